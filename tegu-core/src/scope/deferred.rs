//! What a scope holds until its completion phase's end: items released (to the feature that
//! handed them over, through the App's handle) with the phase's result. An item may ask for a
//! step of its own at the start of the phase, before the completion hooks ([`Prepare`]).

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::erased::AnyArc;
use crate::error::DiError;
use crate::runtime::AppInner;

/// An item on its way: its type, for whoever receives it, and its value.
#[derive(Clone)]
pub(crate) struct HeldItem {
    pub(crate) ty: TypeId,
    pub(crate) value: AnyArc,
    /// Whether the item has a step to run in the completion phase, before its hooks.
    pub(crate) prepare: bool,
    /// The lineage of the scope it came from, for the work it causes (empty in an App without
    /// lineage types).
    pub(crate) lineage: crate::lineage::Lineage,
}

/// A held item's step in the completion phase, run inside the scope before its hooks: its
/// failure fails the phase (the events feature's `before_commit` handlers).
pub(crate) type Prepare = fn(&Arc<AppInner>, HeldItem) -> Pin<Box<dyn Future<Output = Result<(), DiError>> + Send>>;

/// What becomes of a held item once the phase is over: `true` if it succeeded. An item still
/// marked `prepare` did not have its step (it came after the phase, or the phase failed).
pub(crate) type Release = fn(&Arc<AppInner>, HeldItem, bool);

/// What a feature that hands a scope items to hold does with them: installed in the App by
/// `build()`. The completion phase runs `prepare` for each item that asks for a step (and for
/// the items those steps hand over, until none is left), then `send` for each of them, so that
/// no item leaves (an outbox write outside any transaction commits on its own) while another's
/// step may still fail the phase.
#[derive(Clone, Copy)]
pub(crate) struct HeldHooks {
    pub(crate) prepare: Prepare,
    pub(crate) send: Prepare,
    pub(crate) release: Release,
}

/// What a scope does with the items handed to it until its completion phase's end (the events
/// emitted in it, from the events feature): it knows them only as a type and a value.
pub(crate) enum Held {
    /// Holds them until the completion phase's end.
    Holding(Vec<HeldItem>),
    /// The phase succeeded: release at once.
    Passing,
    /// The phase failed: release at once, as failed.
    Failing,
}

impl Default for Held {
    fn default() -> Self {
        Held::Holding(Vec::new())
    }
}

impl Held {
    /// Holds `item`; or gives it back with the phase's result, to release at once (outside the
    /// scope's lock: what it releases to is user code).
    pub(crate) fn hold(&mut self, item: HeldItem) -> Option<(HeldItem, bool)> {
        match self {
            Held::Holding(items) => {
                items.push(item);
                None
            }
            Held::Passing => Some((item, true)),
            Held::Failing => Some((item, false)),
        }
    }

    /// Whether an item held has a step that has not run yet.
    pub(crate) fn unprepared(&self) -> bool {
        matches!(self, Held::Holding(items) if items.iter().any(|item| item.prepare))
    }

    /// The items whose step has not run yet, in the order they came; from now on they are
    /// held as prepared (released without the step).
    pub(crate) fn take_unprepared(&mut self) -> Vec<HeldItem> {
        let Held::Holding(items) = self else { return Vec::new() };
        let mut new = Vec::new();
        for item in items.iter_mut().filter(|item| item.prepare) {
            new.push(item.clone());
            item.prepare = false;
        }
        new
    }

    /// Ends the holding: returns what was held, to release with the result `ok`.
    pub(crate) fn settle(&mut self, ok: bool) -> Vec<HeldItem> {
        // Settled once: what a later call says changes nothing.
        let Held::Holding(items) = self else { return Vec::new() };
        let held = std::mem::take(items);
        *self = if ok { Held::Passing } else { Held::Failing };
        held
    }
}
