//! Captive lifetimes: a singleton outlives every scope, so it holds a context or transient
//! proto only through a handle (`ContextRef`, `Provider`), never by value.

use crate::error::DiError;
use crate::proto::dependency::Dependency;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::kinds::{InjectKind, Lifetime};

/// Whether `p` may take `target` as `dep` asks.
pub(super) fn check(p: &ProtoDescriptor, dep: &Dependency, target: &ProtoDescriptor) -> Result<(), DiError> {
    let by_value = !matches!(dep.kind, InjectKind::ContextRef | InjectKind::Provider);
    if !by_value || p.scope != Lifetime::Singleton {
        return Ok(());
    }
    match target.scope {
        Lifetime::Context => Err(DiError::ContextByValue { singleton: p.label_of(dep), context: target.type_name() }),
        Lifetime::Transient => {
            Err(DiError::TransientByValue { singleton: p.label_of(dep), transient: target.type_name() })
        }
        Lifetime::Singleton => Ok(()),
    }
}
