//! The dense tables the request path reads instead of a `ProtoDescriptor`: what each dependency was
//! declared as, the targets of its `Arc`s, each proto's scope, hooks and context factory.

use std::any::TypeId;

use super::levels::Levels;
use super::{CAST_TARGET, COMPLETE_HOOK, DESTROY_HOOK, Graph, NO_TARGET, Resolved, Target};
use crate::maps::FastMap;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::factory::Factory;
use crate::proto::kinds::{InjectKind, Lifetime};

/// The graph of the checked `protos`, its tables filled.
pub(super) fn graph(
    protos: Vec<ProtoDescriptor>,
    resolved: Vec<Vec<Resolved>>,
    levels: Levels,
    by_type: FastMap<TypeId, Vec<usize>>,
    provided: FastMap<TypeId, Vec<Target>>,
) -> Graph {
    let Levels { levels, needs_async, context_deps } = levels;
    let context_factories = protos
        .iter()
        .map(|p| match (&p.scope, &p.factory) {
            (Lifetime::Context, Factory::Sync(f)) => Some(f.clone()),
            _ => None,
        })
        .collect();
    let shallow = context_deps.iter().map(|deps| deps.iter().all(|&d| context_deps[d as usize].is_empty())).collect();
    let declared: Vec<Box<[(InjectKind, TypeId)]>> =
        protos.iter().map(|p| p.deps.iter().map(|d| (d.kind, (d.type_id)())).collect()).collect();
    let arc_targets = arc_targets(&resolved, &declared);
    let scopes = protos.iter().map(|p| p.scope).collect();
    let hooks = protos
        .iter()
        .map(|p| (u8::from(p.complete.is_some()) * COMPLETE_HOOK) | (u8::from(p.destroy.is_some()) * DESTROY_HOOK))
        .collect();
    Graph {
        protos,
        resolved,
        declared,
        arc_targets,
        scopes,
        levels,
        needs_async,
        hooks,
        context_deps,
        shallow,
        context_factories,
        by_type,
        provided,
    }
}

/// Per proto, per dependency: the proto an `Arc<T>` with one target resolves to, with
/// [`CAST_TARGET`] where its object needs its cast, or [`NO_TARGET`].
fn arc_targets(resolved: &[Vec<Resolved>], declared: &[Box<[(InjectKind, TypeId)]>]) -> Vec<Box<[u32]>> {
    resolved
        .iter()
        .zip(declared)
        .map(|(deps, declared)| {
            deps.iter()
                .zip(declared.iter())
                .map(|(r, (kind, _))| match (kind, r) {
                    (InjectKind::Arc, Resolved::One(t)) => {
                        let own = t.cast == 0;
                        t.proto as u32 | if own { 0 } else { CAST_TARGET }
                    }
                    _ => NO_TARGET,
                })
                .collect()
        })
        .collect()
}
