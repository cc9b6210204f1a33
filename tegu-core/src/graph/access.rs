//! A private proto is injected only in its own crate.

use crate::error::DiError;
use crate::proto::dependency::Dependency;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::kinds::Access;

/// Whether `p` may inject `target` (as `dep` asks): a private proto only in the crate that declares it.
pub(super) fn check(p: &ProtoDescriptor, dep: &Dependency, target: &ProtoDescriptor) -> Result<(), DiError> {
    if target.access == Access::Private && target.krate != p.krate {
        return Err(DiError::Private {
            wanted: target.type_name(),
            owner_crate: target.krate.to_string(),
            by: p.label_of(dep),
            by_crate: p.krate.to_string(),
        });
    }
    Ok(())
}
