//! The runtime of a built App (`AppInner`): its graph, its singletons (lazy ones built on first
//! use), the count of what shutdown waits for, and one handle per feature above the kernel.
//! What every scope, provider and feature holds; `App` (the composition root) wraps it.

pub(crate) mod handles;
pub(crate) mod lazy;
pub(crate) mod phase;

pub(crate) use handles::{Handle, Handles};
pub(crate) use lazy::LazySlot;
use phase::Phase;

use std::any::TypeId;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use crate::config::Config;
use crate::erased::AnyArc;
use crate::error::DiError;
use crate::graph::{Graph, Target};
use crate::maps::{FastMap, LINEAR_LIMIT, SmallMap};
use crate::pending::{Pending, PendingGuard};
use crate::proto::factory::Factory;
use crate::resolver::{Resolver, ScopeAt};
use crate::scope::deferred::HeldHooks;
use crate::scope::handle;

/// Where a `Provider` finds its App once it is built: the App owns the singletons that hold the
/// providers, so they hold it weakly, through a cell filled when `build()` returns.
pub(crate) type AppCell = Arc<OnceLock<Weak<AppInner>>>;

/// A built App: what `App` wraps in an `Arc`, and scopes, providers and features hold.
pub(crate) struct AppInner {
    pub(crate) id: u64,
    pub(crate) graph: Graph,
    /// Indexed by proto; `None` for context protos.
    pub(crate) singletons: Vec<Option<AnyArc>>,
    pub(crate) background_timeout: Duration,
    pub(crate) config: Config,
    /// This App, weakly, for the `Provider`s its singletons hold.
    pub(crate) cell: AppCell,
    /// The lazy singletons `build()` left for their first use, by proto.
    pub(crate) lazy: FastMap<usize, LazySlot>,
    pub(crate) drain_scopes_timeout: Duration,
    /// Where the App is in its life: serving, stopping, shutting down, closed to work
    /// outside scopes, destroying its singletons.
    pub(crate) lifecycle: phase::Lifecycle,
    /// Scopes whose end (background tasks, destroy hooks) is still running.
    pub(crate) ending: Pending,
    /// The features' state (event handlers, jobs), one handle each.
    pub(crate) handles: Handles,
    /// What a scope's held items ask of its completion phase, and what they become at its end:
    /// the events feature's handlers, installed by `build()`. `None` while no feature hands a
    /// scope items to hold.
    pub(crate) held: Option<HeldHooks>,
    /// The most objects a scope of this App has created, once past the scope table's linear
    /// range: a table that grows past that range reserves this much at once (`ScopeShared`).
    pub(crate) large_scope: std::sync::atomic::AtomicUsize,
    /// How long shutdown gives hosted services to stop, and destroy hooks to run (each phase).
    pub(crate) stop_timeout: Duration,
    /// The metrics the App records (nothing without the `metrics` feature).
    pub(crate) metrics: crate::telemetry::Metrics,
    /// The App's lineage types: what a scope's work carries (`scope/lineage.rs`). Empty: a
    /// scope carries nothing, and its events capture nothing.
    pub(crate) lineage: Box<[crate::lineage::LineageSlot]>,
    /// The singleton that sets the parent of the spans of a request's work (tegu-otel's).
    pub(crate) trace_link: Option<Arc<dyn crate::lineage::TraceLink>>,
}

impl AsRef<Pending> for AppInner {
    fn as_ref(&self) -> &Pending {
        &self.ending
    }
}

impl Drop for AppInner {
    /// Drops the singletons one at a time, dependents first (the order of their destroy
    /// hooks), each `Drop` isolated: a panic in one is logged and the others are still dropped,
    /// where a second panic while the first unwinds would abort the process.
    fn drop(&mut self) {
        if !self.lifecycle.reached_mut(Phase::ShuttingDown) {
            let never: Vec<String> = self
                .singletons
                .iter()
                .enumerate()
                .filter(|(p, obj)| obj.is_some() && self.graph.protos[*p].destroy.is_some())
                .map(|(p, _)| self.graph.protos[p].label())
                .collect();
            if !never.is_empty() {
                tracing::warn!(
                    singletons = %never.join(", "),
                    "an App was dropped without `App::shutdown()`: these singletons' destroy hooks never ran"
                );
            }
        }
        let mut singletons = std::mem::take(&mut self.singletons);
        let mut lazy = std::mem::take(&mut self.lazy);
        for &p in self.graph.levels.iter().flatten().rev() {
            if let Some(obj) = singletons.get_mut(p).and_then(Option::take) {
                crate::isolate::drop_isolated(obj);
            }
            if let Some(slot) = lazy.remove(&p) {
                crate::isolate::drop_isolated(slot);
            }
        }
        // Whatever no level lists (none, as built): dropped the same way.
        singletons.into_iter().flatten().for_each(crate::isolate::drop_isolated);
        lazy.into_values().for_each(crate::isolate::drop_isolated);
    }
}

/// The most objects a large scope reserves room for up front, whatever the largest scope was:
/// one scope of a million objects must not make every later large scope allocate for a million.
const LARGE_SCOPE_HINT_MAX: usize = 1 << 16;

impl AppInner {
    /// Makes room in `map`, a scope's table that has just grown past the linear range, for as
    /// many objects as the largest scope of this App so far, at once, rather than doubling (and
    /// rehashing its index) as it grows; returns that many.
    pub(crate) fn reserve_large_scope<V>(&self, map: &mut SmallMap<V>) -> usize {
        let hint = self.large_scope.load(Ordering::Relaxed);
        map.reserve_total(hint, Some(self.graph.protos.len()));
        hint
    }

    /// Records the size of a scope that ended, for the next large scopes to reserve; small
    /// scopes leave the shared counter alone.
    pub(crate) fn record_scope_size(&self, size: usize) {
        let size = size.min(LARGE_SCOPE_HINT_MAX);
        if size > LINEAR_LIMIT && size > self.large_scope.load(Ordering::Relaxed) {
            self.large_scope.fetch_max(size, Ordering::Relaxed);
        }
    }

    /// Waits until no scope is ending and no event handler or scheduled run is going, at most
    /// the shutdown timeout, then closes the count: no handler or run starts after it.
    pub(crate) async fn wait_for_endings(&self) {
        let deadline = std::time::Instant::now() + self.drain_scopes_timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if !self.ending.wait(left).await {
                tracing::error!(
                    pending = self.ending.count(),
                    timeout = ?self.drain_scopes_timeout,
                    "context scopes, event handlers or scheduled jobs were still running at the shutdown deadline; destroying singletons without them"
                );
                self.ending.close();
                return;
            }
            // A handler may have started between the wait and now: wait for it too.
            if self.ending.close_when_idle() {
                return;
            }
        }
    }

    /// The one singleton of type `ty`, if that is what it is: `get_object`'s fast path, small
    /// enough to return in registers.
    pub(crate) fn singleton_of(&self, ty: TypeId) -> Option<AnyArc> {
        match self.graph.by_type.get(&ty)?.as_slice() {
            [one] => self.singletons[*one].clone(),
            _ => None,
        }
    }

    /// The object of own type `ty`: a singleton, or the current scope's object of a context
    /// proto. What an advice is.
    #[inline]
    pub(crate) fn object_of(&self, ty: TypeId, wanted: &'static str) -> Result<AnyArc, DiError> {
        match self.singleton_of(ty) {
            Some(obj) => Ok(obj),
            None => self.object(ty, None, wanted),
        }
    }

    #[cold]
    pub(crate) fn object(&self, ty: TypeId, name: Option<&str>, wanted: &'static str) -> Result<AnyArc, DiError> {
        let proto = self.proto_of(ty, name, wanted)?;
        self.instance(proto, wanted)
    }

    /// The proto of own type `ty` (named `name`), or why there is not one.
    pub(crate) fn proto_of(&self, ty: TypeId, name: Option<&str>, wanted: &'static str) -> Result<usize, DiError> {
        let not_found =
            || DiError::NotFound { wanted, name: name.map(str::to_owned), near: self.graph.near(wanted, name) };
        let list = self.graph.by_type.get(&ty).ok_or_else(not_found)?;
        match (name, list.as_slice()) {
            (None, [one]) => Ok(*one),
            (None, many) => Err(DiError::Ambiguous {
                wanted,
                by: "App::get_object".to_owned().into(),
                candidates: many.iter().map(|&p| self.graph.protos[p].label()).collect(),
            }),
            (Some(name), list) => {
                list.iter().copied().find(|&p| self.graph.protos[p].name == name).ok_or_else(not_found)
            }
        }
    }

    /// What the factory of `proto` sees, in `scope` (or none).
    pub(crate) fn resolver<'a>(&'a self, proto: usize, scope: ScopeAt<'a>) -> Resolver<'a> {
        Resolver {
            graph: &self.graph,
            singletons: &self.singletons,
            app_id: self.id,
            proto,
            scope,
            config: &self.config,
            cell: &self.cell,
            fresh: crate::resolver::Fresh::default(),
        }
    }

    /// A new object of transient proto `key`, its context dependencies from the current scope
    /// if there is one of this App.
    pub(crate) fn build_transient(&self, key: u32) -> Result<AnyArc, DiError> {
        let scope = if handle::in_scope_of(self.id) { ScopeAt::Current } else { ScopeAt::None };
        self.resolver(key as usize, scope).transient(key as usize)
    }

    /// Singleton `proto`, built now if it is lazy and this is its first use.
    pub(crate) fn lazy_singleton(&self, proto: usize, wanted: &'static str) -> Result<AnyArc, DiError> {
        let slot = self.lazy.get(&proto).ok_or(DiError::NotBuilt { wanted })?;
        slot.get_or_build(
            (self.id, proto),
            || self.graph.protos[proto].label(),
            // Built once `shutdown` destroys the singletons, it would never be destroyed; until
            // then (while it waits for scopes, handlers and jobs) it is built as usual, and
            // destroyed. Checked under the slot's lock, which `shutdown` takes to see what it
            // must destroy.
            || match self.lifecycle.reached(Phase::Destroying) {
                true => Err(DiError::ShutDown { wanted }),
                false => Ok(()),
            },
            || match &self.graph.protos[proto].factory {
                Factory::Sync(factory) => factory.call(&self.resolver(proto, ScopeAt::None)),
                _ => unreachable!("a lazy singleton has a sync factory (checked by the graph)"),
            },
        )
    }

    /// Singleton `proto` for `shutdown` to destroy, once the App is in `Phase::Destroying`: a lazy one being
    /// built now is waited for, and none starts after.
    pub(crate) fn singleton_to_destroy(&self, proto: usize) -> Option<AnyArc> {
        match &self.singletons[proto] {
            Some(obj) => Some(obj.clone()),
            None => self.lazy.get(&proto)?.built(),
        }
    }

    /// The object of `proto`: a singleton (built now if lazy), a new transient, or the current
    /// scope's context object.
    pub(crate) fn instance_of(&self, proto: usize) -> Result<AnyArc, DiError> {
        self.instance(proto, self.graph.protos[proto].type_name())
    }

    /// Whether `shutdown` has started.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.lifecycle.reached(Phase::ShuttingDown)
    }

    /// Counts an event handler or a scheduled run, unless `shutdown` has stopped waiting for
    /// them (it is destroying the singletons, or has).
    pub(crate) fn try_pending(self: &Arc<Self>) -> Option<PendingGuard<AppInner>> {
        PendingGuard::try_new(self.clone())
    }

    /// Proto `proto`'s object: the singleton, or the current scope's.
    pub(crate) fn instance(&self, proto: usize, wanted: &'static str) -> Result<AnyArc, DiError> {
        match &self.singletons[proto] {
            Some(obj) => Ok(obj.clone()),
            None if self.graph.protos[proto].scope == crate::proto::kinds::Lifetime::Singleton => {
                self.lazy_singleton(proto, wanted)
            }
            None if self.graph.protos[proto].scope == crate::proto::kinds::Lifetime::Transient => {
                self.build_transient(proto as u32)
            }
            None => handle::current(self.id, proto as u32, wanted),
        }
    }

    /// The provider of `ty` (named `name`) as `Arc<U>`, `U` being `ty`.
    pub(crate) fn provider<U: ?Sized + 'static>(
        &self,
        ty: TypeId,
        name: Option<&str>,
        wanted: &'static str,
    ) -> Result<Arc<U>, DiError> {
        let not_found =
            || DiError::NotFound { wanted, name: name.map(str::to_owned), near: self.graph.near(wanted, name) };
        let all = self.graph.provided.get(&ty).map_or(&[][..], Vec::as_slice);
        let chosen: Vec<Target> =
            all.iter().copied().filter(|t| name.is_none_or(|n| self.graph.protos[t.proto].name == n)).collect();
        let target = match chosen.as_slice() {
            [] => return Err(not_found()),
            [one] => *one,
            _ => {
                return Err(DiError::Ambiguous {
                    wanted,
                    by: "App::get_provider".to_owned().into(),
                    candidates: crate::graph::sorted(&self.graph.protos, chosen)
                        .iter()
                        .map(|t| self.graph.protos[t.proto].label())
                        .collect(),
                });
            }
        };
        let obj = self.instance(target.proto, wanted)?;
        Ok(crate::resolver::provided_as::<U>(&self.graph, target, obj))
    }
}
