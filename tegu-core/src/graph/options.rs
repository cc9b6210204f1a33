//! Each proto's own declaration: one proto per type and object name, and the options its
//! lifetime allows (a completion hook, `lazy`, a transient's hooks and constructor).

use std::any::TypeId;

use crate::error::DiError;
use crate::maps::FastSet;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::factory::Factory;
use crate::proto::kinds::Lifetime;

/// The errors of every proto's declaration, each proto's in turn.
pub(super) fn check(protos: &[ProtoDescriptor]) -> Vec<DiError> {
    let mut errors = Vec::new();
    let mut names: FastSet<(TypeId, &str)> = FastSet::with_capacity_and_hasher(protos.len(), Default::default());
    for p in protos {
        if !names.insert((p.type_id(), &p.name)) {
            errors.push(DiError::Duplicate { type_name: p.type_name(), name: p.name.to_string() });
        }
        if p.scope == Lifetime::Singleton && p.complete.is_some() {
            errors.push(DiError::CompleteOnSingleton { singleton: p.label_at() });
        }
        if let Some(reason) = lazy_refused(p) {
            errors.push(DiError::Lazy { proto: p.label_at(), reason });
        }
        if p.scope == Lifetime::Transient {
            errors.extend(transient_refused(p).map(|what| DiError::TransientHook { transient: p.label_at(), what }));
        }
    }
    errors
}

/// Why `p` may not be `lazy`, if it is and may not.
fn lazy_refused(p: &ProtoDescriptor) -> Option<&'static str> {
    if !p.lazy {
        None
    } else if p.scope != Lifetime::Singleton {
        Some("only a singleton is lazy: a context or transient proto is built on first use already")
    } else if p.init.is_some() || matches!(p.factory, Factory::Async(_)) {
        Some(
            "it is built on first use by a synchronous `get_object` or factory, and it has an init hook or an async constructor; drop `lazy`, or do the work synchronously",
        )
    } else {
        None
    }
}

/// What transient `p` has that a transient may not: it is built on each injection,
/// synchronously, and kept by nobody.
fn transient_refused(p: &ProtoDescriptor) -> impl Iterator<Item = &'static str> {
    let kept_only = [
        (p.init.is_some(), "an init hook"),
        (p.complete.is_some(), "a complete hook"),
        (p.destroy.is_some(), "a destroy hook"),
        (matches!(p.factory, Factory::Async(_)), "an async constructor"),
    ];
    kept_only.into_iter().filter(|(has, _)| *has).map(|(_, what)| what)
}
