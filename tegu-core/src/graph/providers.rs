//! Who provides each type, and each (type, object name), for the dependencies to choose from.

use std::any::TypeId;
use std::collections::hash_map::Entry;

use super::Target;
use crate::maps::FastMap;
use crate::proto::descriptor::ProtoDescriptor;

/// Who provides each type, and each (type, object name), for qualified lookups.
#[derive(Default)]
pub(super) struct Providers<'a> {
    pub(super) by_type: FastMap<TypeId, Vec<Target>>,
    pub(super) by_name: FastMap<(TypeId, &'a str), Named>,
}

/// The providers of one (type, object name): almost always one, kept without a `Vec`.
pub(super) enum Named {
    One(Target),
    Many(Vec<Target>),
}

impl Named {
    fn push(&mut self, t: Target) {
        match self {
            Named::One(first) => *self = Named::Many(vec![*first, t]),
            Named::Many(all) => all.push(t),
        }
    }

    pub(super) fn to_vec(&self) -> Vec<Target> {
        match self {
            Named::One(t) => vec![*t],
            Named::Many(all) => all.clone(),
        }
    }
}

impl<'a> Providers<'a> {
    /// The protos by their own type, and who provides what, in registration order.
    pub(super) fn index(protos: &'a [ProtoDescriptor]) -> (FastMap<TypeId, Vec<usize>>, Providers<'a>) {
        let mut by_type: FastMap<TypeId, Vec<usize>> = FastMap::default();
        let mut providers = Providers::default();
        providers.by_name.reserve(protos.len());
        for (i, p) in protos.iter().enumerate() {
            by_type.entry(p.type_id()).or_default().push(i);
            for (c, (provided, _)) in p.provided().enumerate() {
                let target = Target { proto: i, cast: c };
                providers.by_type.entry(provided).or_default().push(target);
                match providers.by_name.entry((provided, &p.name)) {
                    Entry::Vacant(v) => {
                        v.insert(Named::One(target));
                    }
                    Entry::Occupied(mut o) => o.get_mut().push(target),
                }
            }
        }
        (by_type, providers)
    }
}
