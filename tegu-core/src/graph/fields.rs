//! A field its factory fills with `Default` that holds a proto of the App: one registered by
//! hand (the macros refuse a `Proto`'s at compile time).

use super::providers::Providers;
use crate::error::DiError;
use crate::proto::descriptor::ProtoDescriptor;

/// One error per such field.
pub(super) fn uninjected(protos: &[ProtoDescriptor], providers: &Providers<'_>) -> Vec<DiError> {
    protos
        .iter()
        .flat_map(|p| {
            p.unmarked.iter().filter(|u| providers.by_type.contains_key(&(u.type_id)())).map(|field| {
                DiError::UninjectedProto { proto: p.label_at(), field: field.field, wanted: (field.type_name)() }
            })
        })
        .collect()
}
