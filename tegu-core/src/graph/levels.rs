//! The levels: each singleton's construction level (level k needs only levels below it); each
//! context or transient proto's context dependencies and whether it needs awaiting; and a
//! `ContextRef` whose holder calls `get()` refused where its proto needs awaiting.

use std::collections::HashSet;

use super::Resolved;
use crate::error::DiError;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::factory::Factory;
use crate::proto::kinds::Lifetime;

/// What the levels pass finds, per proto (see [`Graph`](super::Graph)'s fields of these names).
pub(super) struct Levels {
    pub(super) levels: Vec<Vec<usize>>,
    pub(super) needs_async: Vec<bool>,
    pub(super) context_deps: Vec<Box<[u32]>>,
}

impl Levels {
    /// The levels of `protos`, visited in `order` (each after its construction dependencies).
    pub(super) fn of(protos: &[ProtoDescriptor], resolved: &[Vec<Resolved>], order: &[usize]) -> Levels {
        let mut level = vec![0usize; protos.len()];
        let mut out = Levels {
            levels: Vec::new(),
            needs_async: vec![false; protos.len()],
            context_deps: vec![Box::default(); protos.len()],
        };
        for &i in order {
            let deps = || resolved[i].iter().flat_map(Resolved::construction_targets);
            match protos[i].scope {
                Lifetime::Singleton => {
                    level[i] = deps().map(|d| level[d] + 1).max().unwrap_or(0);
                    if out.levels.len() <= level[i] {
                        out.levels.resize_with(level[i] + 1, Vec::new);
                    }
                    out.levels[level[i]].push(i);
                }
                // Built on each injection or `Provider::get`, synchronously (async constructors
                // are refused by the options pass), in no level. What it takes from the scope
                // by value, and whether that needs awaiting, passes on to the context protos
                // that take it.
                Lifetime::Transient | Lifetime::Context => {
                    out.needs_async[i] = protos[i].init.is_some()
                        || matches!(protos[i].factory, Factory::Async(_))
                        || deps().any(|d| out.needs_async[d]);
                    out.context_deps[i] = out.context_deps_of(protos, deps());
                }
            }
        }
        out
    }

    /// The context protos a proto with construction dependencies `deps` takes by value, in
    /// declaration order, each once: a transient's own first, then the proto itself.
    fn context_deps_of(&self, protos: &[ProtoDescriptor], deps: impl Iterator<Item = usize>) -> Box<[u32]> {
        let mut seen = HashSet::new(); // allocates only for protos that have some
        let mut list: Vec<u32> = Vec::new();
        for d in deps {
            let through: &[u32] = match protos[d].scope {
                Lifetime::Context => &[],
                // A transient's own context dependencies, built before it is.
                Lifetime::Transient => &self.context_deps[d],
                Lifetime::Singleton => continue,
            };
            list.extend(through.iter().copied().filter(|&c| seen.insert(c as usize)));
            if protos[d].scope == Lifetime::Context && seen.insert(d) {
                list.push(d as u32);
            }
        }
        list.into_boxed_slice()
    }

    /// A `ContextRef` whose holder calls `get()` to a proto built asynchronously: known only
    /// now that `needs_async` is (the macros refuse it at compile time for a proto's type).
    pub(super) fn sync_refs_to_async(&self, protos: &[ProtoDescriptor], resolved: &[Vec<Resolved>]) -> Vec<DiError> {
        protos
            .iter()
            .zip(resolved)
            .flat_map(|(p, deps)| {
                p.deps.iter().zip(deps).filter_map(|(dep, r)| match r {
                    Resolved::Context(t) if dep.sync_only && self.needs_async[t.proto] => {
                        Some(DiError::ContextRefToAsync {
                            by: p.label_of(dep),
                            wanted: dep.type_name(),
                            target: protos[t.proto].type_name(),
                        })
                    }
                    _ => None,
                })
            })
            .collect()
    }
}
