//! The handles: a `Provider<T>` is of a transient proto's own type, a `ContextRef<T>` of a
//! context proto; each other pairing names the handle to hold instead.

use super::Resolved;
use crate::error::DiError;
use crate::proto::dependency::Dependency;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::kinds::Lifetime;

/// `Provider<T>` held by `p`, resolved to `target`'s proto `proto`.
pub(super) fn provider(
    p: &ProtoDescriptor,
    dep: &Dependency,
    proto: usize,
    target: &ProtoDescriptor,
) -> Result<Resolved, DiError> {
    let wanted = dep.type_name();
    let wrong = |scope, fix| DiError::WrongHandle {
        by: p.label_of(dep),
        holds: format!("Provider<{wanted}>"),
        target: target.type_name(),
        scope,
        fix,
    };
    match target.scope {
        Lifetime::Singleton => Err(wrong("singleton", format!("inject it as `Arc<{}>`", target.type_name()))),
        Lifetime::Context => Err(wrong("context", format!("hold `ContextRef<{}>`", target.type_name()))),
        Lifetime::Transient if target.type_id() != (dep.type_id)() => {
            let fix = format!("a `Provider` names the proto's own type: hold `Provider<{}>`", target.type_name());
            Err(wrong("transient", fix))
        }
        Lifetime::Transient => Ok(Resolved::Provider(proto)),
    }
}

/// `ContextRef<T>` held by `p`, resolved to `target`.
pub(super) fn context_ref(p: &ProtoDescriptor, dep: &Dependency, target: &ProtoDescriptor) -> Result<(), DiError> {
    match target.scope {
        Lifetime::Singleton => {
            Err(DiError::ContextRefToSingleton { by: p.label_of(dep), singleton: target.type_name() })
        }
        Lifetime::Transient => Err(DiError::WrongHandle {
            by: p.label_of(dep),
            holds: format!("ContextRef<{}>", dep.type_name()),
            target: target.type_name(),
            scope: "transient",
            fix: format!("hold `Provider<{}>` for a new one per call", target.type_name()),
        }),
        Lifetime::Context => Ok(()),
    }
}
