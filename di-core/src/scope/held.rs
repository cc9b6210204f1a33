//! What a scope holds until its completion phase's end: items released (to the feature that
//! handed them over, through the App's handle) if the phase succeeded, dropped if not.

use std::any::TypeId;

use crate::erased::AnyArc;

/// An item on its way: its type, for whoever receives it, and its value.
pub(crate) struct HeldItem {
    pub(crate) ty: TypeId,
    pub(crate) value: AnyArc,
}

/// What a scope does with the items handed to it until its completion phase's end (the events
/// emitted in it, from the events feature): it knows them only as a type and a value.
pub(crate) enum Held {
    /// Holds them until the completion phase's end.
    Holding(Vec<HeldItem>),
    /// The phase succeeded: release at once.
    Passing,
    /// The phase failed: drop them.
    Dropping,
}

impl Default for Held {
    fn default() -> Self {
        Held::Holding(Vec::new())
    }
}

impl Held {
    /// Holds `event`; or gives it back with whether to release it now (`Passing`) or drop it
    /// (outside the scope's lock: its `Drop` is user code).
    pub(crate) fn hold(&mut self, event: HeldItem) -> Option<(HeldItem, bool)> {
        match self {
            Held::Holding(held) => {
                held.push(event);
                None
            }
            Held::Passing => Some((event, true)),
            Held::Dropping => Some((event, false)),
        }
    }

    /// Ends the holding: returns what was held, to release if `ok` and drop otherwise.
    pub(crate) fn settle(&mut self, ok: bool) -> Vec<HeldItem> {
        // Settled once: what a later call says changes nothing.
        let Held::Holding(held) = self else { return Vec::new() };
        let held = std::mem::take(held);
        *self = if ok { Held::Passing } else { Held::Dropping };
        held
    }
}
