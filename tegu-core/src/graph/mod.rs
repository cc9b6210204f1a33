//! The validated, indexed object graph that the resolver and the scopes read; built and checked
//! once, at `build()`, by `build.rs`, whose checks are the files named below, run in its order.

mod build;

// The checks, which `build.rs` runs in order: options, providers, resolve (with access, captive
// and handles), fields, order, levels, tables.
mod access;
mod captive;
mod fields;
mod handles;
mod levels;
mod options;
mod order;
mod providers;
mod resolve;
mod tables;

use std::any::TypeId;

use crate::maps::FastMap;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::factory::SyncFactory;
use crate::proto::kinds::{InjectKind, Lifetime};

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
    pub(crate) protos: Vec<ProtoDescriptor>,
    pub(crate) resolved: Vec<Vec<Resolved>>,
    /// What each dependency was declared as, `(kind, type)`, per proto: what a factory's request
    /// is checked against without calling each dependency's `TypeId` function or reading its
    /// `ProtoDescriptor` (both cold memory in a large graph).
    pub(crate) declared: Vec<Box<[(InjectKind, TypeId)]>>,
    /// Per proto, per dependency: the proto an `Arc<T>` of a proto's own type resolves to, with
    /// [`CAST_TARGET`] if its object needs its cast, or [`NO_TARGET`] (another kind): what a factory's `fill` reads per field, one `u32`, to take
    /// an object already at hand without the checks and dispatch of a general request.
    pub(crate) arc_targets: Vec<Box<[u32]>>,
    /// Each proto's scope, dense: the resolver's dispatch reads one byte, not a `ProtoDescriptor`.
    pub(crate) scopes: Vec<Lifetime>,
    /// Singletons grouped by construction level: level k only needs levels below k.
    pub(crate) levels: Vec<Vec<usize>>,
    /// Context protos that need `get_async` (an init hook, theirs or a by-value dependency's).
    pub(crate) needs_async: Vec<bool>,
    /// Each proto's end-of-scope hooks, dense ([`COMPLETE_HOOK`], [`DESTROY_HOOK`]): what a
    /// scope owned by its task records per object built, without reading the `ProtoDescriptor`.
    pub(crate) hooks: Vec<u8>,
    /// The context protos each context proto takes by value, in declaration order, each once:
    /// what must be built before it.
    pub(crate) context_deps: Vec<Box<[u32]>>,
    /// Whether none of the context protos each proto takes by value takes one of its own:
    /// those can be built ahead of it, in one loop, with no check of each one's own list.
    pub(crate) shallow: Vec<bool>,
    /// Each context proto's sync factory, dense (`None` for the others): what a scope calls per
    /// object without reading the proto's `ProtoDescriptor`, a line of cold memory per object in a
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
            let of_type: Vec<&ProtoDescriptor> = self.protos.iter().filter(|p| p.type_name() == wanted).collect();
            if !of_type.is_empty() {
                let near = crate::error::closest(name, of_type.iter().map(|p| &*p.name));
                return of_type.iter().filter(|p| near.contains(&&*p.name)).map(|p| p.label()).collect();
            }
        }
        let short = crate::error::short_type(wanted);
        let mut same: Vec<String> = Vec::new();
        let mut shorts: Vec<(String, &ProtoDescriptor)> = Vec::new();
        for p in &self.protos {
            let theirs = crate::error::short_type(p.type_name());
            if theirs == short && p.type_name() != wanted {
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

    /// Context proto `key`'s sync factory, from the dense array (no `ProtoDescriptor` read): what both
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
}

/// `targets` by their protos' `order`, then object name, then type name, then registration.
pub(crate) fn sorted(protos: &[ProtoDescriptor], mut targets: Vec<Target>) -> Vec<Target> {
    targets.sort_by(|a, b| {
        let (pa, pb) = (&protos[a.proto], &protos[b.proto]);
        (pa.order, &pa.name, pa.type_name(), a.proto).cmp(&(pb.order, &pb.name, pb.type_name(), b.proto))
    });
    targets
}
