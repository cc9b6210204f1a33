//! A private proto is injected only in its own crate.

use crate::error::DiError;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::kinds::Access;

/// Whether `p` may inject `target`: a private proto only in the crate that declares it.
pub(super) fn check(p: &ProtoDescriptor, target: &ProtoDescriptor) -> Result<(), DiError> {
    if target.access == Access::Private && target.krate != p.krate {
        return Err(DiError::Private {
            wanted: target.type_name(),
            owner_crate: target.krate.to_string(),
            by: p.label(),
            by_crate: p.krate.to_string(),
        });
    }
    Ok(())
}
