//! Graph validation: resolve every dependency once, reject bad graphs, order the singletons.

use std::any::TypeId;
use std::collections::HashSet;
use std::collections::hash_map::Entry;

use crate::error::DiError;
use crate::maps::{FastMap, FastSet};
use crate::proto::def::ProtoDef;
use crate::proto::factory::{Factory, SyncFactory};
use crate::proto::kinds::{Access, InjectKind, Lifetime};
use crate::proto::provide::ProvideCast;

/// The providers of one (type, object name): almost always one, kept without a `Vec`.
enum Named {
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

    fn to_vec(&self) -> Vec<Target> {
        match self {
            Named::One(t) => vec![*t],
            Named::Many(all) => all.clone(),
        }
    }
}

/// A provider of a requested type: the proto, and which of its casts yields that type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) proto: usize,
    pub(crate) cast: usize,
}

/// A dependency after validation.
#[derive(Debug, Clone)]
pub(crate) enum Resolved {
    One(Target),
    Maybe(Option<Target>),
    Many(Vec<Target>),
    /// A `ContextRef`: the context proto, and its cast to the named type.
    Context(Target),
    /// A `Provider<T>` of transient proto `usize`: built on each call, not before.
    Provider(usize),
}

impl Resolved {
    pub(crate) fn construction_targets(&self) -> impl Iterator<Item = usize> + '_ {
        let (one, many): (Option<usize>, &[Target]) = match self {
            Resolved::One(t) | Resolved::Maybe(Some(t)) => (Some(t.proto), &[]),
            Resolved::Many(ts) => (None, ts),
            Resolved::Maybe(None) | Resolved::Context(_) | Resolved::Provider(_) => (None, &[]),
        };
        one.into_iter().chain(many.iter().map(|t| t.proto))
    }
}

/// The validated, indexed object graph.
pub(crate) struct Graph {
    pub(crate) protos: Vec<ProtoDef>,
    pub(crate) resolved: Vec<Vec<Resolved>>,
    /// What each dependency was declared as, `(kind, type)`, per proto: what a factory's request
    /// is checked against without calling each dependency's `TypeId` function or reading its
    /// `ProtoDef` (both cold memory in a large graph).
    pub(crate) declared: Vec<Box<[(InjectKind, TypeId)]>>,
    /// Per proto, per dependency: the proto an `Arc<T>` of a proto's own type resolves to, with
    /// [`CAST_TARGET`] if its object needs its cast, or [`NO_TARGET`] (another kind): what a factory's `fill` reads per field, one `u32`, to take
    /// an object already at hand without the checks and dispatch of a general request.
    pub(crate) arc_targets: Vec<Box<[u32]>>,
    /// Each proto's scope, dense: the resolver's dispatch reads one byte, not a `ProtoDef`.
    pub(crate) scopes: Vec<Lifetime>,
    /// Singletons grouped by construction level: level k only needs levels below k.
    pub(crate) levels: Vec<Vec<usize>>,
    /// Context protos that need `get_async` (an init hook, theirs or a by-value dependency's).
    pub(crate) needs_async: Vec<bool>,
    /// Each proto's end-of-scope hooks, dense ([`COMPLETE_HOOK`], [`DESTROY_HOOK`]): what a
    /// scope owned by its task records per object built, without reading the `ProtoDef`.
    pub(crate) hooks: Vec<u8>,
    /// The context protos each context proto takes by value, in declaration order, each once:
    /// what must be built before it.
    pub(crate) context_deps: Vec<Box<[u32]>>,
    /// Whether none of the context protos each proto takes by value takes one of its own:
    /// those can be built ahead of it, in one loop, with no check of each one's own list.
    pub(crate) shallow: Vec<bool>,
    /// Each context proto's sync factory, dense (`None` for the others): what a scope calls per
    /// object without reading the proto's `ProtoDef`, a line of cold memory per object in a
    /// large graph (the most first-level data misses of a context request at N = 1000 before).
    /// Read through [`context_factory`](Self::context_factory).
    pub(crate) context_factories: Vec<Option<SyncFactory>>,
    /// Protos by their own type, for `get_object`.
    pub(crate) by_type: FastMap<TypeId, Vec<usize>>,
    /// Providers of each type (own types and `provides`), in registration order, for
    /// `get_provider`.
    pub(crate) provided: FastMap<TypeId, Vec<Target>>,
}

/// In [`Graph::arc_targets`]: the dependency is not an `Arc<T>` with one target.
pub(crate) const NO_TARGET: u32 = u32::MAX;
/// In [`Graph::arc_targets`], with a target's index: its object is not of the declared type
/// (a fake stored as another), so its cast makes it one.
pub(crate) const CAST_TARGET: u32 = 1 << 31;

/// A proto with a completion hook, in [`Graph::hooks`].
pub(crate) const COMPLETE_HOOK: u8 = 1;
/// A proto with a destroy hook, in [`Graph::hooks`].
pub(crate) const DESTROY_HOOK: u8 = 2;

impl Graph {
    /// What `NotFound` suggests for `wanted` (named `name`): the object names of its type close
    /// to `name`, or the registered protos whose type has the same short name under another
    /// path, or a close one (a typo, a second version of a crate).
    #[cold]
    pub(crate) fn near(&self, wanted: &str, name: Option<&str>) -> Vec<String> {
        if let Some(name) = name {
            let of_type: Vec<&ProtoDef> = self.protos.iter().filter(|p| p.type_name == wanted).collect();
            if !of_type.is_empty() {
                let near = crate::error::closest(name, of_type.iter().map(|p| &*p.name));
                return of_type.iter().filter(|p| near.contains(&&*p.name)).map(|p| p.label()).collect();
            }
        }
        let short = crate::error::short_type(wanted);
        let mut same: Vec<String> = Vec::new();
        let mut shorts: Vec<(String, &ProtoDef)> = Vec::new();
        for p in &self.protos {
            let theirs = crate::error::short_type(p.type_name);
            if theirs == short && p.type_name != wanted {
                same.push(p.label());
            }
            shorts.push((theirs, p));
        }
        if same.is_empty() {
            let near = crate::error::closest(&short, shorts.iter().map(|(s, _)| s.as_str()));
            same = shorts.iter().filter(|(s, _)| near.contains(&s.as_str())).map(|(_, p)| p.label()).collect();
        }
        same.truncate(3);
        same
    }

    /// Context proto `key`'s sync factory, from the dense array (no `ProtoDef` read): what both
    /// a scope owned by its task and a shared table call to build one of its objects.
    #[inline]
    pub(crate) fn context_factory(&self, key: u32) -> &SyncFactory {
        match &self.context_factories[key as usize] {
            Some(factory) => factory,
            None => unreachable!("a context proto built asynchronously goes through `resolve_async`"),
        }
    }

    /// The protos whose own type is `ty` (none if there is no such proto).
    pub(crate) fn of_type(&self, ty: TypeId) -> &[usize] {
        self.by_type.get(&ty).map_or(&[], Vec::as_slice)
    }

    /// Validates `protos`. `inactive` are the protos left out (another profile, excluded), with
    /// why: a dependency only they provide is reported as such.
    pub(crate) fn new(protos: Vec<ProtoDef>, inactive: &[(ProtoDef, String)]) -> Result<Graph, DiError> {
        let mut errors = Vec::new();
        let mut by_type: FastMap<TypeId, Vec<usize>> = FastMap::default();
        let mut providers = Providers::default();
        providers.by_name.reserve(protos.len());
        let mut names: FastSet<(TypeId, &str)> = FastSet::with_capacity_and_hasher(protos.len(), Default::default());
        for (i, p) in protos.iter().enumerate() {
            if !names.insert((p.type_id, &p.name)) {
                errors.push(DiError::Duplicate { type_name: p.type_name, name: p.name.to_string() });
            }
            if p.scope == Lifetime::Singleton && p.complete.is_some() {
                errors.push(DiError::CompleteOnSingleton { singleton: p.label() });
            }
            if p.lazy {
                let reason = if p.scope != Lifetime::Singleton {
                    Some("only a singleton is lazy: a context or transient proto is built on first use already")
                } else if p.init.is_some() || matches!(p.factory, Factory::Async(_)) {
                    Some(
                        "it is built on first use by a synchronous `get_object` or factory, and it has an init hook or an async constructor; drop `lazy`, or do the work synchronously",
                    )
                } else {
                    None
                };
                if let Some(reason) = reason {
                    errors.push(DiError::Lazy { proto: p.label(), reason });
                }
            }
            if p.scope == Lifetime::Transient {
                let kept_only = [
                    (p.init.is_some(), "an init hook"),
                    (p.complete.is_some(), "a complete hook"),
                    (p.destroy.is_some(), "a destroy hook"),
                    (matches!(p.factory, Factory::Async(_)), "an async constructor"),
                ];
                for (_, what) in kept_only.into_iter().filter(|(has, _)| *has) {
                    errors.push(DiError::TransientHook { transient: p.label(), what });
                }
            }
            by_type.entry(p.type_id).or_default().push(i);
            for (c, provide) in p.provides.iter().enumerate() {
                let target = Target { proto: i, cast: c };
                providers.by_type.entry(provide.type_id).or_default().push(target);
                match providers.by_name.entry((provide.type_id, &p.name)) {
                    Entry::Vacant(v) => {
                        v.insert(Named::One(target));
                    }
                    Entry::Occupied(mut o) => o.get_mut().push(target),
                }
            }
        }

        let resolved: Vec<Vec<Resolved>> = protos
            .iter()
            .map(|p| {
                p.deps
                    .iter()
                    .filter_map(|dep| {
                        match resolve_dep(&protos, &providers, p, dep).map_err(|e| inactive_only(e, dep, inactive)) {
                            Ok(r) => Some(r),
                            Err(e) => {
                                errors.push(e);
                                None
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        // A field its factory fills with `Default` that holds a proto of the App: one registered
        // by hand (the macros refuse a `Proto`'s at compile time).
        for p in &protos {
            for field in p.unmarked.iter().filter(|u| providers.by_type.contains_key(&(u.type_id)())) {
                errors.push(DiError::UninjectedProto {
                    proto: p.label(),
                    field: field.field,
                    wanted: (field.type_name)(),
                });
            }
        }
        DiError::collect(errors)?;

        let order = topo_order(&protos, &resolved)?;
        let mut level = vec![0usize; protos.len()];
        let mut needs_async = vec![false; protos.len()];
        let mut context_deps: Vec<Box<[u32]>> = vec![Box::default(); protos.len()];
        let mut levels: Vec<Vec<usize>> = Vec::new();
        for &i in &order {
            let deps = || resolved[i].iter().flat_map(Resolved::construction_targets);
            match protos[i].scope {
                Lifetime::Singleton => {
                    level[i] = deps().map(|d| level[d] + 1).max().unwrap_or(0);
                    if levels.len() <= level[i] {
                        levels.resize_with(level[i] + 1, Vec::new);
                    }
                    levels[level[i]].push(i);
                }
                // Built on each injection or `Provider::get`, synchronously (async constructors
                // are refused above), in no level. What it takes from the scope by value, and
                // whether that needs awaiting, passes on to the context protos that take it.
                Lifetime::Transient | Lifetime::Context => {
                    needs_async[i] = protos[i].init.is_some()
                        || matches!(protos[i].factory, Factory::Async(_))
                        || deps().any(|d| needs_async[d]);
                    let mut seen = HashSet::new(); // allocates only for protos that have some
                    let mut list: Vec<u32> = Vec::new();
                    for d in deps() {
                        let through: &[u32] = match protos[d].scope {
                            Lifetime::Context => &[],
                            // A transient's own context dependencies, built before it is.
                            Lifetime::Transient => &context_deps[d],
                            Lifetime::Singleton => continue,
                        };
                        list.extend(through.iter().copied().filter(|&c| seen.insert(c as usize)));
                        if protos[d].scope == Lifetime::Context && seen.insert(d) {
                            list.push(d as u32);
                        }
                    }
                    context_deps[i] = list.into_boxed_slice();
                }
            }
        }
        let context_factories = protos
            .iter()
            .map(|p| match (&p.scope, &p.factory) {
                (Lifetime::Context, Factory::Sync(f)) => Some(f.clone()),
                _ => None,
            })
            .collect();
        let shallow =
            context_deps.iter().map(|deps| deps.iter().all(|&d| context_deps[d as usize].is_empty())).collect();
        // A `ContextRef` whose holder calls `get()` to a proto built asynchronously: known only
        // now that `needs_async` is (the macros refuse it at compile time for a proto's type).
        let sync_refs_to_async = protos.iter().zip(&resolved).flat_map(|(p, deps)| {
            p.deps.iter().zip(deps).filter_map(|(dep, r)| match r {
                Resolved::Context(t) if dep.sync_only && needs_async[t.proto] => Some(DiError::ContextRefToAsync {
                    by: p.label(),
                    wanted: dep.type_name(),
                    target: protos[t.proto].type_name,
                }),
                _ => None,
            })
        });
        DiError::collect(sync_refs_to_async.collect())?;
        let Providers { by_type: provided, by_name } = providers;
        drop(by_name); // it borrows the names of `protos`
        let declared: Vec<Box<[(InjectKind, TypeId)]>> =
            protos.iter().map(|p| p.deps.iter().map(|d| (d.kind, (d.type_id)())).collect()).collect();
        let arc_targets = resolved
            .iter()
            .zip(&declared)
            .map(|(deps, declared)| {
                deps.iter()
                    .zip(declared.iter())
                    .map(|(r, (kind, _))| match (kind, r) {
                        (InjectKind::Arc, Resolved::One(t)) => {
                            let own = matches!(protos[t.proto].provides[t.cast].cast, ProvideCast::Own);
                            t.proto as u32 | if own { 0 } else { CAST_TARGET }
                        }
                        _ => NO_TARGET,
                    })
                    .collect()
            })
            .collect();
        let scopes = protos.iter().map(|p| p.scope).collect();
        let hooks = protos
            .iter()
            .map(|p| (u8::from(p.complete.is_some()) * COMPLETE_HOOK) | (u8::from(p.destroy.is_some()) * DESTROY_HOOK))
            .collect();
        Ok(Graph {
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
        })
    }
}

/// Who provides each type, and each (type, object name), for qualified lookups.
#[derive(Default)]
struct Providers<'a> {
    by_type: FastMap<TypeId, Vec<Target>>,
    by_name: FastMap<(TypeId, &'a str), Named>,
}

fn resolve_dep(
    protos: &[ProtoDef],
    providers: &Providers<'_>,
    p: &ProtoDef,
    dep: &crate::proto::dependency::Dependency,
) -> Result<Resolved, DiError> {
    let wanted = dep.type_name();
    let by = || p.label();
    let all: &[Target] = providers.by_type.get(&(dep.type_id)()).map_or(&[], Vec::as_slice);
    let mut chosen: Vec<Target> = match &dep.qualifier {
        None => all.to_vec(),
        Some(q) => {
            let named = providers.by_name.get(&((dep.type_id)(), &**q)).map_or_else(Vec::new, Named::to_vec);
            if named.is_empty() && !all.is_empty() {
                return Err(DiError::UnknownQualifier {
                    wanted,
                    qualifier: q.to_string(),
                    by: by(),
                    available: sorted(protos, all.to_vec())
                        .iter()
                        .map(|t| format!("\"{}\"", protos[t.proto].name))
                        .collect(),
                });
            }
            named
        }
    };
    // Registration order is arbitrary (inventory's, the builder's): every list that shows is
    // sorted, by the protos' `order`, then object name, then type name. Only here, on what a
    // dependency chose: sorting every provider list of the App up front cost a third of
    // `build()` at 10000 protos.
    if chosen.len() > 1 {
        chosen = sorted(protos, chosen);
    }
    for t in &chosen {
        let target = &protos[t.proto];
        if target.access == Access::Private && target.krate != p.krate {
            return Err(DiError::Private {
                wanted: target.type_name,
                owner_crate: target.krate.to_string(),
                by: by(),
                by_crate: p.krate.to_string(),
            });
        }
        let by_value = !matches!(dep.kind, InjectKind::ContextRef | InjectKind::Provider);
        if by_value && p.scope == Lifetime::Singleton && target.scope == Lifetime::Context {
            return Err(DiError::ContextByValue { singleton: by(), context: target.type_name });
        }
        if by_value && p.scope == Lifetime::Singleton && target.scope == Lifetime::Transient {
            return Err(DiError::TransientByValue { singleton: by(), transient: target.type_name });
        }
    }
    let one = || match chosen.as_slice() {
        [] => Err(DiError::Missing { wanted, by: by() }),
        [t] => Ok(*t),
        many => Err(DiError::Ambiguous {
            wanted,
            by: by(),
            candidates: many.iter().map(|t| protos[t.proto].label()).collect(),
        }),
    };
    Ok(match dep.kind {
        InjectKind::Arc => Resolved::One(one()?),
        InjectKind::Optional if chosen.is_empty() => Resolved::Maybe(None),
        InjectKind::Optional => Resolved::Maybe(Some(one()?)),
        InjectKind::All => Resolved::Many(chosen),
        InjectKind::Keyed => {
            // By name: two providers of one name would make `get(name)` pick one silently.
            if let Some(w) = chosen.windows(2).find(|w| protos[w[0].proto].name == protos[w[1].proto].name) {
                return Err(DiError::Ambiguous {
                    wanted,
                    by: by(),
                    candidates: w.iter().map(|t| protos[t.proto].label()).collect(),
                });
            }
            Resolved::Many(chosen)
        }
        InjectKind::Provider => {
            let t = one()?;
            let target = &protos[t.proto];
            let wrong = |scope, fix| DiError::WrongHandle {
                by: by(),
                holds: format!("Provider<{wanted}>"),
                target: target.type_name,
                scope,
                fix,
            };
            match target.scope {
                Lifetime::Singleton => {
                    return Err(wrong("singleton", format!("inject it as `Arc<{}>`", target.type_name)));
                }
                Lifetime::Context => return Err(wrong("context", format!("hold `ContextRef<{}>`", target.type_name))),
                Lifetime::Transient if target.type_id != (dep.type_id)() => {
                    let fix = format!("a `Provider` names the proto's own type: hold `Provider<{}>`", target.type_name);
                    return Err(wrong("transient", fix));
                }
                Lifetime::Transient => {}
            }
            Resolved::Provider(t.proto)
        }
        InjectKind::ContextRef => {
            let t = one()?;
            let target = &protos[t.proto];
            if target.scope == Lifetime::Singleton {
                return Err(DiError::ContextRefToSingleton { by: by(), singleton: target.type_name });
            }
            if target.scope == Lifetime::Transient {
                return Err(DiError::WrongHandle {
                    by: by(),
                    holds: format!("ContextRef<{wanted}>"),
                    target: target.type_name,
                    scope: "transient",
                    fix: format!("hold `Provider<{}>` for a new one per call", target.type_name),
                });
            }
            Resolved::Context(t)
        }
    })
}

/// `targets` by their protos' `order`, then object name, then type name, then registration.
pub(crate) fn sorted(protos: &[ProtoDef], mut targets: Vec<Target>) -> Vec<Target> {
    targets.sort_by(|a, b| {
        let (pa, pb) = (&protos[a.proto], &protos[b.proto]);
        (pa.order, &pa.name, pa.type_name, a.proto).cmp(&(pb.order, &pb.name, pb.type_name, b.proto))
    });
    targets
}

/// A dependency with no provider (`Missing`, or no provider of that name) that a left-out
/// proto would provide: say which, and why it is left out.
fn inactive_only(e: DiError, dep: &crate::proto::dependency::Dependency, inactive: &[(ProtoDef, String)]) -> DiError {
    let (DiError::Missing { wanted, ref by } | DiError::UnknownQualifier { wanted, ref by, .. }) = e else { return e };
    let candidates: Vec<String> = inactive
        .iter()
        .filter(|(def, _)| {
            def.provides.iter().any(|p| p.type_id == (dep.type_id)())
                // A template's instances would take any name.
                && (def.instances_of.is_some() || dep.qualifier.as_deref().is_none_or(|q| def.name == q))
        })
        .map(|(def, why)| format!("{} ({why})", def.label()))
        .collect();
    if candidates.is_empty() { e } else { DiError::Inactive { wanted, by: by.clone(), inactive: candidates } }
}

/// The way out of a cycle (`nodes`, the first repeated at the end) that compiles: a context
/// proto may hold another context proto as `ContextRef<T>`, built on first use, which is not a
/// construction dependency; a singleton may not (it outlives every scope), so a cycle of
/// singletons breaks only by moving what both need into a proto of its own.
fn cycle_fix(protos: &[ProtoDef], nodes: &[usize]) -> String {
    let lazy_edge =
        nodes.windows(2).find(|w| protos[w[0]].scope != Lifetime::Singleton && protos[w[1]].scope == Lifetime::Context);
    match lazy_edge {
        Some(w) => {
            let (holder, held) = (&protos[w[0]], crate::error::short_type(protos[w[1]].type_name));
            format!(
                "break it in `{}`: hold `ContextRef<{held}>` (`AsyncContextRef<{held}>` if it is built asynchronously) where it takes `{held}` by value, as `Arc<{held}>`: it is then built on first use, not before",
                holder.type_name
            )
        }
        None => "move what they need of each other into a proto of its own, which each of them injects (a singleton cannot hold a lazy reference to another)".to_owned(),
    }
}

/// Orders protos so that every construction dependency comes first; reports the first cycle.
fn topo_order(protos: &[ProtoDef], resolved: &[Vec<Resolved>]) -> Result<Vec<usize>, DiError> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; protos.len()];
    let mut order = Vec::with_capacity(protos.len());
    // Iterative DFS: (node, next dependency to visit), so 10000-deep chains cannot overflow.
    let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
    // Dependencies are visited in declaration order, so the reported cycle is stable.
    let pending_of = |n: usize| -> Vec<usize> {
        let mut deps: Vec<usize> = resolved[n].iter().flat_map(Resolved::construction_targets).collect();
        deps.reverse();
        deps
    };
    for root in 0..protos.len() {
        if mark[root] != Mark::New {
            continue;
        }
        mark[root] = Mark::Open;
        stack.push((root, pending_of(root)));
        while let Some((node, pending)) = stack.last_mut() {
            let node = *node;
            match pending.pop() {
                Some(next) => match mark[next] {
                    Mark::Done => {}
                    Mark::Open => {
                        let start = stack.iter().position(|(n, _)| *n == next).unwrap_or(0);
                        let mut nodes: Vec<usize> = stack[start..].iter().map(|(n, _)| *n).collect();
                        nodes.push(next);
                        let chain = nodes.iter().map(|&n| protos[n].label()).collect();
                        return Err(DiError::Cycle { chain, fix: cycle_fix(protos, &nodes) });
                    }
                    Mark::New => {
                        mark[next] = Mark::Open;
                        stack.push((next, pending_of(next)));
                    }
                },
                None => {
                    mark[node] = Mark::Done;
                    order.push(node);
                    stack.pop();
                }
            }
        }
    }
    Ok(order)
}
