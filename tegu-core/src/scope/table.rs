//! A context scope's shared table: which objects exist, which are being built and on whose
//! behalf, and the construction that fills it.
//!
//! Construction never recurses on the stack: before a context object is built, the context
//! objects it takes by value (transitively) are built first, deepest first, so that its factory
//! only finds finished objects. A chain of 5000 by-value context protos builds in a loop.
//!
//! A slot being built records which construction asked for it (its parent). That is enough to
//! see, before waiting, that a wait could never end: the object is being built by the asker
//! itself or one of its askers (a factory or init hook dereferencing a `ContextRef` whose object
//! needs the first one), or by a construction that waits, directly or not, for one of them.

use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::deferred::{Held, HeldItem};
use crate::erased::AnyArc;
use crate::error::DiError;
use crate::maps::SmallMap;
use crate::pending::Pending;
use crate::proto::factory::Factory;
use crate::resolver::{Fresh, Resolver};
use crate::runtime::AppInner;

tokio::task_local! {
    /// The context object whose async init hook runs on this task: `(scope, proto)`.
    static BUILDING: (usize, u32);
}

std::thread_local! {
    /// The context object whose factory runs on this thread now: `(scope, proto)`. A factory is
    /// synchronous, so a thread-local set around the call is enough (and costs a fraction of
    /// a task-local scope); it takes precedence over `BUILDING`, being the innermost.
    static BUILDING_NOW: Cell<Option<(usize, u32)>> = const { Cell::new(None) };
}

/// The construction a shared table marked as running on this thread.
pub(super) fn building_now() -> Option<(usize, u32)> {
    BUILDING_NOW.with(Cell::get)
}

/// Marks what runs on this thread now: for a scope shared in the middle of its owned
/// constructions (`owned.rs`), which then run as the shared table's.
pub(super) fn set_building_now(now: Option<(usize, u32)>) {
    BUILDING_NOW.with(|b| b.set(now));
}

/// Marks `(scope, proto)` as the construction running on this thread while `f` runs (restored
/// on unwind too).
fn building<R>(now: (usize, u32), f: impl FnOnce() -> R) -> R {
    struct Restore(Option<(usize, u32)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUILDING_NOW.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BUILDING_NOW.with(|b| b.replace(Some(now))));
    f()
}

pub(crate) enum Slot {
    /// Claimed and then given up (its construction panicked or was cancelled): free to claim.
    Vacant,
    /// Being built. `parent` is the object whose construction asked for it; `None` when user
    /// code did.
    Building { parent: Option<u32> },
    /// Built, or failed; every task of the scope gets the same answer. The error is boxed:
    /// a slot stays three words, however large `DiError` is.
    Ready(Result<AnyArc, Box<DiError>>),
}

#[derive(Default)]
pub(crate) struct Table {
    pub(super) slots: SmallMap<Slot>,
    /// Objects in creation order, for completion and destruction in reverse.
    pub(super) created: Vec<(usize, AnyArc)>,
    /// Constructions waiting for an object another task builds: `(waiting, awaited)`.
    waits: Vec<(u32, u32)>,
    /// Tasks waiting for a slot to leave `Building` (user code included).
    waiters: u32,
    /// How many of `created` the completion phase has listed: those after it were created
    /// while it ran, and get a further pass.
    pub(super) listed: u32,
    /// The [`ScopeHold`](super::ScopeHold)s alive, which the scope's end waits for with no
    /// deadline (counted and signalled in `hold.rs`).
    pub(super) holds: u32,
    /// Where the completion phase stands (it runs once).
    pub(super) completion: Completion,
    /// Whether the destroy hooks have begun: nothing can hold the scope open any more.
    pub(super) destroying: bool,
    /// Whether the scope has ended: its objects are gone and no new one can be created.
    pub(super) ended: bool,
    /// What the scope holds until its completion phase has succeeded (the events emitted in
    /// it).
    pub(super) held: Held,
}

/// Where a scope's completion phase stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Completion {
    /// Not begun: any object may be created.
    #[default]
    Pending,
    /// The completion hooks run: an object created now is completed in a further pass.
    Running,
    /// Over (it ran, failed, was cancelled, or the scope failed before it): an object with a
    /// completion hook created now would never be completed, so its creation is refused.
    Over,
}

impl Table {
    /// Why `key` cannot be created now: it has a completion hook, and the completion phase is
    /// over.
    #[inline]
    pub(super) fn refuse_late(&self, app: &AppInner, key: u32) -> Option<DiError> {
        if self.completion != Completion::Over {
            return None;
        }
        let def = &app.graph.protos[key as usize];
        def.complete.is_some().then(|| DiError::LateCompletion { wanted: def.type_name() })
    }

    /// The construction that asked for `key`, while `key` is being built.
    fn parent(&self, key: u32) -> Option<u32> {
        match self.slots.get(key) {
            Some(Slot::Building { parent }) => *parent,
            _ => None,
        }
    }

    /// `key` and the constructions it runs inside: `key`, its parent, the parent's parent...
    /// Bounded by the number of slots, so a corrupted table cannot loop.
    fn ancestors(&self, key: u32) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(Some(key), |&k| self.parent(k)).take(self.slots.len() + 1)
    }

    /// The by-value context dependencies of `key` (`deps` per proto) that are not built yet,
    /// transitively, deepest first (the order in which to build them so that no factory
    /// recurses), each with its slot reserved: see [`Planned`]. Allocates nothing when there
    /// are none.
    fn plan(&mut self, app: &AppInner, key: u32) -> Vec<Planned> {
        let deps = &app.graph.context_deps;
        let direct = &deps[key as usize];
        // The common shape: dependencies with none of their own (listed once each).
        let order = if direct.iter().all(|&d| deps[d as usize].is_empty()) {
            None
        } else {
            Some(self.pending_deps(deps, direct))
        };
        let order = order.as_deref().unwrap_or(direct);
        let mut planned = Vec::new();
        for (i, &dep) in order.iter().enumerate() {
            let pos = match self.slots.position(dep) {
                Some(pos) => match self.slots.value_at(pos) {
                    Slot::Ready(_) => continue,
                    Slot::Vacant => pos as u32,
                    Slot::Building { .. } => NOT_RESERVED,
                },
                None => self.add(app, dep, Slot::Vacant) as u32,
            };
            if planned.capacity() == 0 {
                // Sized once, at the first dependency that is not built (often none is).
                planned.reserve_exact(order.len() - i);
            }
            planned.push((dep, pos));
        }
        planned
    }

    /// The by-value context dependencies in `direct` and theirs, transitively, that are not
    /// built yet, deepest first.
    fn pending_deps(&self, deps: &[Box<[u32]>], direct: &[u32]) -> Vec<u32> {
        let pending = |d: &&u32| !matches!(self.slots.get(**d), Some(Slot::Ready(_)));
        // (proto, whether its dependencies were pushed); pushed in reverse, so popped in
        // declaration order.
        let mut stack: Vec<(u32, bool)> = direct.iter().rev().filter(pending).map(|&d| (d, false)).collect();
        let mut order = Vec::new();
        let mut seen: SmallMap<()> = SmallMap::default();
        while let Some((node, expanded)) = stack.pop() {
            if expanded {
                order.push(node);
            } else if seen.get(node).is_none() {
                seen.insert(node, ());
                stack.push((node, true));
                stack.extend(deps[node as usize].iter().rev().filter(pending).map(|&d| (d, false)));
            }
        }
        order
    }

    /// Why construction `waiter` must not wait for `key`, which another construction builds:
    /// `key` is `waiter` or one it runs inside, or `key`'s construction waits (itself, or
    /// through constructions inside it, transitively) for one of those. The cycle, as proto
    /// indices, first repeated at the end.
    fn blocked_wait(&self, waiter: Option<u32>, key: u32) -> Option<Vec<u32>> {
        // User code holds no slot: nothing can be waiting for it.
        let lineage: Vec<u32> = self.ancestors(waiter?).collect();
        // What `key`'s end depends on, breadth first, each with the index it was reached from.
        let mut reached: Vec<(u32, Option<usize>)> = vec![(key, None)];
        let mut i = 0;
        while let Some(&(x, _)) = reached.get(i) {
            if let Some(pos) = lineage.iter().position(|&k| k == x) {
                // x -> ... -> waiter (who runs inside x) -> key -> ... -> x
                let mut cycle: Vec<u32> = lineage[..=pos].iter().rev().copied().collect();
                let mut path = Vec::new();
                let mut at = Some(i);
                while let Some(j) = at {
                    path.push(reached[j].0);
                    at = reached[j].1;
                }
                cycle.extend(path.into_iter().rev());
                return Some(cycle);
            }
            for &(w, awaited) in &self.waits {
                let inside_x = self.ancestors(w).any(|k| k == x);
                if inside_x && !reached.iter().any(|&(n, _)| n == awaited) {
                    reached.push((awaited, Some(i)));
                }
            }
            i += 1;
        }
        None
    }
}

/// One context scope, shared by the task that opened it and the tasks it spawned with
/// [`spawn`](crate::spawn).
pub(crate) struct ScopeShared {
    pub(crate) app: Arc<AppInner>,
    table: Mutex<Table>,
    /// Signalled when a slot leaves `Building` and someone waits: threads blocked in `get`...
    built: Condvar,
    /// ...and tasks awaiting in `get_async` (and the end of a held scope, `hold.rs`).
    pub(super) built_async: Notify,
    /// The tasks started with `tegu_core::spawn`, which the scope's end waits for.
    pub(super) tasks: Pending,
    /// The objects the scope was given (also in the table): a factory taking one (tegu-http's
    /// request head) finds it here without the lock.
    seeds: super::handle::Seeds,
}

impl AsRef<Pending> for ScopeShared {
    fn as_ref(&self) -> &Pending {
        &self.tasks
    }
}

pub(crate) enum Claimed<'a> {
    Ready(AnyArc),
    /// This task builds it now; the guard gives the slot up if the construction never finishes.
    Mine(Claim<'a>),
}

/// A slot this task claimed. Dropped unfinished (a panic, a cancelled future), it leaves the
/// slot vacant and wakes those waiting, so that nobody waits for a construction that is gone.
pub(crate) struct Claim<'a> {
    shared: &'a ScopeShared,
    key: u32,
    /// Where the slot is in the table (entries never move): finishing it needs no lookup.
    pos: usize,
    done: bool,
    /// With a claim asked to plan: the by-value context dependencies to build first, deepest
    /// first, found under the same lock as the claim.
    pending: Vec<Planned>,
}

/// A dependency a claim plans to build, and the position of the slot it reserved for it: a
/// vacant slot that the claimer takes when it gets to it, unless another construction took it
/// first; [`NOT_RESERVED`] when another construction was building it already.
type Planned = (u32, u32);

const NOT_RESERVED: u32 = u32::MAX;

impl Claim<'_> {
    /// Stores the outcome of the construction; the object joins the scope's created list.
    fn finish(self, result: Result<AnyArc, DiError>) -> Result<AnyArc, DiError> {
        let mut table = self.shared.table();
        self.finish_in(&mut table, result)
    }

    /// [`finish`](Self::finish) under a lock the caller holds.
    fn finish_in(mut self, table: &mut Table, result: Result<AnyArc, DiError>) -> Result<AnyArc, DiError> {
        self.done = true;
        if table.ended {
            // The slot went with the table; whoever waits for it learns the scope ended.
            self.shared.wake(table);
            return Err(DiError::ScopeClosed { wanted: self.shared.app.graph.protos[self.key as usize].type_name() });
        }
        if let Ok(obj) = &result {
            table.created.push((self.key as usize, obj.clone()));
        }
        // Claimed before the completion phase ended, finished after it: not handed out (it
        // would never be completed), but destroyed with the others.
        let result = match (result, table.refuse_late(&self.shared.app, self.key)) {
            (Ok(_), Some(late)) => Err(late),
            (result, _) => result,
        };
        if let Some(slot) = table.slots.at_mut(self.pos, self.key) {
            *slot = Slot::Ready(result.clone().map_err(Box::new));
        }
        self.shared.wake(table);
        result
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut table = self.shared.table();
        if let Some(slot @ Slot::Building { .. }) = table.slots.at_mut(self.pos, self.key) {
            *slot = Slot::Vacant;
        }
        self.shared.wake(&table);
    }
}

/// Registration of a construction waiting for `awaited`, removed when the wait ends (also when
/// the waiting future is dropped).
struct Waiting<'a> {
    shared: &'a ScopeShared,
    entry: Option<(u32, u32)>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut table = self.shared.table();
        table.unwait(self.entry);
    }
}

impl Table {
    /// Adds a slot for `key` (absent); returns its position.
    fn add(&mut self, app: &AppInner, key: u32, slot: Slot) -> usize {
        let pos = self.slots.insert(key, slot);
        if self.slots.len() == crate::maps::LINEAR_LIMIT + 1 {
            let hint = app.reserve_large_scope(&mut self.slots);
            self.created.reserve(hint.saturating_sub(self.created.len()));
        }
        pos
    }

    fn wait(&mut self, entry: Option<(u32, u32)>) {
        self.waiters += 1;
        self.waits.extend(entry);
    }

    fn unwait(&mut self, entry: Option<(u32, u32)>) {
        self.waiters -= 1;
        if let Some(entry) = entry
            && let Some(i) = self.waits.iter().position(|&w| w == entry)
        {
            self.waits.swap_remove(i);
        }
    }
}

/// A finished slot's answer.
fn ready(result: &Result<AnyArc, Box<DiError>>) -> Result<AnyArc, DiError> {
    match result {
        Ok(obj) => Ok(obj.clone()),
        Err(error) => Err((**error).clone()),
    }
}

/// What to do about a slot, decided under the table lock.
enum Step<'a> {
    Done(Result<Claimed<'a>, DiError>),
    Wait(Option<(u32, u32)>),
}

impl ScopeShared {
    pub(crate) fn new(app: Arc<AppInner>, seeds: super::handle::Seeds) -> Arc<Self> {
        let mut table = Table::default();
        for (key, obj) in seeds.iter() {
            table.slots.insert(*key, Slot::Ready(Ok(obj.clone())));
            // Built already: in `created` (whose hooks run at the end) only when asked.
            if seeds.hooked(*key) {
                table.created.push((*key as usize, obj.clone()));
            }
        }
        Arc::new(ScopeShared {
            app,
            table: Mutex::new(table),
            built: Condvar::new(),
            built_async: Notify::new(),
            tasks: Pending::default(),
            seeds,
        })
    }

    /// Holds an item (an event emitted in the scope) until the completion phase's end; see
    /// [`Held::hold`].
    pub(crate) fn hold_item(&self, item: HeldItem) -> Option<(HeldItem, bool)> {
        self.table().held.hold(item)
    }

    /// The completion phase is over: releases the held items through the App's handle with
    /// its result; later items follow the same result at once.
    pub(crate) fn settle_held(&self, ok: bool) {
        let held = self.table().held.settle(ok);
        if let Some(hooks) = self.app.held {
            for item in held {
                (hooks.release)(&self.app, item, ok);
            }
        }
    }

    /// Runs the step of each held item that asks for one and has not had it (events emitted by
    /// a step included), in the order they came, inside the scope, then sends them (the
    /// events an [`EventTransport`](crate::events::EventTransport) carries); stops at the first
    /// failure, or once the scope was marked failed.
    pub(super) async fn prepare_held(&self) -> Result<(), DiError> {
        let Some(hooks) = self.app.held else { return Ok(()) };
        let mut prepared = Vec::new();
        loop {
            let items = self.table().held.take_unprepared();
            if items.is_empty() {
                break;
            }
            for item in items {
                // Marked failed by a step (a handler called `fail_scope`): what is left is
                // released as failed, with the rest of the scope's events.
                if self.failed() {
                    return Ok(());
                }
                (hooks.prepare)(&self.app, item.clone()).await?;
                prepared.push(item);
            }
        }
        for item in prepared {
            if self.failed() {
                return Ok(());
            }
            (hooks.send)(&self.app, item).await?;
        }
        Ok(())
    }

    /// Whether the scope has failed: what it holds is released as failed
    /// ([`settle_held`](Self::settle_held) with `false`: the scope was marked failed, or its
    /// completion phase failed).
    pub(super) fn failed(&self) -> bool {
        matches!(self.table().held, Held::Failing)
    }

    /// The scope's object for context proto `key` if it has one: a seed, or one built; nothing
    /// is built, and a construction in flight or failed counts as none.
    pub(super) fn built(&self, key: u32) -> Option<AnyArc> {
        if let Some(obj) = self.seeds.get(key) {
            return Some(obj.clone());
        }
        match self.table().slots.get(key) {
            Some(Slot::Ready(Ok(obj))) => Some(obj.clone()),
            _ => None,
        }
    }

    pub(super) fn table(&self) -> MutexGuard<'_, Table> {
        // No user code runs under this lock, so a poisoned lock still holds consistent data.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the tasks waiting for a slot to change, if any.
    pub(super) fn wake(&self, table: &Table) {
        if table.waiters > 0 {
            self.built.notify_all();
            self.built_async.notify_waiters();
        }
    }

    pub(super) fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// Takes over what the task that owned the scope built (`objects`, in creation order; the
    /// seeds among them are in the table already) and the constructions it has in flight
    /// (`building`, outermost first, each running inside the one before it). Those are
    /// finished ([`finish_adopted`](Self::finish_adopted)) or given up
    /// ([`abandon_adopted`](Self::abandon_adopted)) by the owned scope's code.
    pub(super) fn adopt<'o>(&self, objects: impl Iterator<Item = (u32, &'o AnyArc)>, building: &[u32]) {
        let mut table = self.table();
        for (key, obj) in objects {
            if self.seeds.get(key).is_none() {
                table.add(&self.app, key, Slot::Ready(Ok(obj.clone())));
                table.created.push((key as usize, obj.clone()));
            }
        }
        let mut parent = None;
        for &key in building {
            table.add(&self.app, key, Slot::Building { parent });
            parent = Some(key);
        }
        if let Some(&top) = building.last() {
            set_building_now(Some((self.addr(), top)));
        }
    }

    /// The claim of a construction adopted in flight: what its owned-scope code finishes.
    fn adopted(&self, table: &Table, key: u32) -> Option<Claim<'_>> {
        let pos = table.slots.position(key)?;
        Some(Claim { shared: self, key, pos, done: false, pending: Vec::new() })
    }

    /// Stores the outcome of a construction adopted in flight, as [`Claim::finish`] does.
    pub(super) fn finish_adopted(&self, key: u32, result: Result<AnyArc, DiError>) -> Result<AnyArc, DiError> {
        let mut table = self.table();
        match self.adopted(&table, key) {
            Some(claim) => claim.finish_in(&mut table, result),
            None => result,
        }
    }

    /// Gives up a construction adopted in flight (its factory panicked): its claim, dropped
    /// unfinished, leaves the slot vacant and wakes those waiting.
    pub(super) fn abandon_adopted(&self, key: u32) {
        let claim = self.adopted(&self.table(), key);
        drop(claim); // after the lock above is released: the claim's drop takes it
    }

    /// The construction of this scope running on this task, if any.
    fn builder(&self) -> Option<u32> {
        let mine = |(scope, key): (usize, u32)| (scope == self.addr()).then_some(key);
        match BUILDING_NOW.with(Cell::get) {
            Some(now) => mine(now),
            None => BUILDING.try_with(|&now| mine(now)).ok().flatten(),
        }
    }

    fn label(&self, key: u32) -> String {
        self.app.graph.protos[key as usize].label()
    }

    /// Under the lock: the object if built, a claim if free, a wait if another builds it, or
    /// the cycle that waiting would close.
    fn step(&self, table: &mut Table, key: u32, waiter: Option<u32>, plan: bool) -> Step<'_> {
        match table.slots.get(key) {
            Some(Slot::Ready(result)) => Step::Done(ready(result).map(Claimed::Ready)),
            Some(Slot::Building { .. }) => match table.blocked_wait(waiter, key) {
                Some(cycle) => {
                    Step::Done(Err(DiError::EagerCycle { chain: cycle.into_iter().map(|k| self.label(k)).collect() }))
                }
                None => Step::Wait(waiter.map(|w| (w, key))),
            },
            None | Some(Slot::Vacant) if table.ended => {
                Step::Done(Err(DiError::ScopeClosed { wanted: self.app.graph.protos[key as usize].type_name() }))
            }
            vacant => {
                if let Some(late) = table.refuse_late(&self.app, key) {
                    return Step::Done(Err(late));
                }
                let building = Slot::Building { parent: waiter };
                let pos = match vacant {
                    None => table.add(&self.app, key, building),
                    Some(_) => {
                        let pos = table.slots.position(key).expect("found above");
                        *table.slots.value_at_mut(pos) = building;
                        pos
                    }
                };
                let pending = if plan { table.plan(&self.app, key) } else { Vec::new() };
                Step::Done(Ok(Claimed::Mine(Claim { shared: self, key, pos, done: false, pending })))
            }
        }
    }

    /// Claims `key` for `waiter`, blocking this thread while another thread builds it (sync
    /// constructions never await, so that wait is short).
    fn claim_sync(&self, key: u32, waiter: Option<u32>, plan: bool) -> Result<Claimed<'_>, DiError> {
        let mut table = self.table();
        loop {
            match self.step(&mut table, key, waiter, plan) {
                Step::Done(claimed) => return claimed,
                Step::Wait(entry) => {
                    table.wait(entry);
                    table = self.built.wait(table).unwrap_or_else(|e| e.into_inner());
                    table.unwait(entry);
                }
            }
        }
    }

    /// Claims `key` for `waiter`, awaiting while another task builds it.
    async fn claim_async(&self, key: u32, waiter: Option<u32>, plan: bool) -> Result<Claimed<'_>, DiError> {
        loop {
            let notified = self.built_async.notified();
            tokio::pin!(notified);
            let waiting = {
                let mut table = self.table();
                match self.step(&mut table, key, waiter, plan) {
                    Step::Done(claimed) => return claimed,
                    Step::Wait(entry) => {
                        // Registered before the lock is released: a wake-up cannot slip by.
                        notified.as_mut().enable();
                        table.wait(entry);
                        Waiting { shared: self, entry }
                    }
                }
            };
            notified.await;
            drop(waiting);
        }
    }

    fn resolver(&self, key: u32) -> Resolver<'_> {
        self.app.resolver(key as usize, crate::resolver::ScopeAt::Shared(self))
    }

    /// Runs proto `key`'s sync factory, marked as its construction.
    fn build(&self, key: u32) -> Result<AnyArc, DiError> {
        self.build_with(key, Fresh::default())
    }

    /// [`build`](Self::build), with `fresh`, the by-value dependencies just built for it, at
    /// hand for its resolver (which otherwise finds them in the table, under its lock).
    fn build_with(&self, key: u32, fresh: Fresh<'_>) -> Result<AnyArc, DiError> {
        let resolver = Resolver { fresh, ..self.resolver(key) };
        building((self.addr(), key), || self.app.graph.context_factory(key).call(&resolver))
    }

    /// Runs proto `key`'s factory, awaiting its constructor if it is async.
    async fn construct(&self, key: u32) -> Result<AnyArc, DiError> {
        let def = &self.app.graph.protos[key as usize];
        let Factory::Async(factory) = &def.factory else { return self.build(key) };
        let resolver = self.resolver(key);
        let construction = building((self.addr(), key), || factory.call(&resolver))?;
        BUILDING.scope((self.addr(), key), construction).await.map_err(|e| def.construction_error(e))
    }

    /// Builds the by-value dependencies `pending` of the construction `parent` (all sync),
    /// deepest first, and returns them in that order. Finishing one and taking the next one's
    /// reserved slot (if still vacant) share a lock: one lock per object, no lookup. A slot
    /// another construction took meanwhile is waited for as usual.
    fn build_deps(&self, parent: u32, pending: &[Planned]) -> Result<Vec<AnyArc>, DiError> {
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        let mut fresh = Vec::with_capacity(pending.len());
        let mut next = self.take_reserved(&mut self.table(), parent, pending.first());
        for (i, &(dep, _)) in pending.iter().enumerate() {
            let claim = match next.take() {
                Some(claim) => claim,
                None => match self.claim_sync(dep, Some(parent), false)? {
                    Claimed::Mine(claim) => claim,
                    Claimed::Ready(obj) => {
                        fresh.push(obj);
                        next = self.take_reserved(&mut self.table(), parent, pending.get(i + 1));
                        continue;
                    }
                },
            };
            let built = self.build(dep);
            let mut table = self.table();
            fresh.push(claim.finish_in(&mut table, built)?);
            next = self.take_reserved(&mut table, parent, pending.get(i + 1));
        }
        Ok(fresh)
    }

    /// Claims `planned`'s slot for `parent` if the plan reserved it and it is still vacant.
    fn take_reserved(&self, table: &mut Table, parent: u32, planned: Option<&Planned>) -> Option<Claim<'_>> {
        let &(dep, pos) = planned?;
        // A claim refused (the scope ended, the dependency would be created too late) is left to
        // `claim_sync`, which says why.
        if pos == NOT_RESERVED || table.ended || table.refuse_late(&self.app, dep).is_some() {
            return None;
        }
        let slot = table.slots.at_mut(pos as usize, dep)?;
        matches!(slot, Slot::Vacant).then(|| {
            *slot = Slot::Building { parent: Some(parent) };
            Claim { shared: self, key: dep, pos: pos as usize, done: false, pending: Vec::new() }
        })
    }

    /// Builds a claimed object, running its init hook if it has one.
    async fn build_async(&self, claim: Claim<'_>) -> Result<AnyArc, DiError> {
        let key = claim.key;
        let def = &self.app.graph.protos[key as usize];
        let built = match (self.construct(key).await, &def.init) {
            (Ok(obj), Some(init)) => BUILDING
                .scope((self.addr(), key), init.call(obj.clone()))
                .await
                .map(|()| obj)
                .map_err(|e| def.hook_error("init", e)),
            (built, _) => built,
        };
        claim.finish(built)
    }

    /// The scope's object for context proto `key`, built now if this is the first request.
    /// No lock is held while a factory runs, so it may resolve other context objects.
    pub(crate) fn resolve_sync(&self, key: usize) -> Result<AnyArc, DiError> {
        let key = key as u32;
        if let Some(obj) = self.seeds.get(key) {
            return Ok(obj.clone());
        }
        if self.app.graph.needs_async[key as usize] {
            // A factory takes it once built (its construction built it first); user code never
            // gets here for it (`ScopeHandle::miss` refuses it).
            return match self.table().slots.get(key) {
                Some(Slot::Ready(result)) => ready(result),
                _ => Err(DiError::AsyncInit { wanted: self.app.graph.protos[key as usize].type_name() }),
            };
        }
        let mut claim = match self.claim_sync(key, self.builder(), true)? {
            Claimed::Ready(obj) => return Ok(obj),
            Claimed::Mine(claim) => claim,
        };
        let pending = std::mem::take(&mut claim.pending);
        let built = match self.build_deps(key, &pending) {
            Ok(fresh) => self.build_with(key, Fresh { keys: &pending, objs: &fresh }),
            Err(e) => Err(e),
        };
        claim.finish(built)
    }

    /// Like [`resolve_sync`](Self::resolve_sync), running async init hooks (the object's and
    /// its by-value dependencies') on first use.
    pub(crate) async fn resolve_async(&self, key: usize) -> Result<AnyArc, DiError> {
        if !self.app.graph.needs_async[key] {
            return self.resolve_sync(key);
        }
        let key = key as u32;
        let mut claim = match self.claim_async(key, self.builder(), true).await? {
            Claimed::Ready(obj) => return Ok(obj),
            Claimed::Mine(claim) => claim,
        };
        for (dep, _) in std::mem::take(&mut claim.pending) {
            let built = if self.app.graph.needs_async[dep as usize] {
                match self.claim_async(dep, Some(key), false).await {
                    Ok(Claimed::Ready(_)) => Ok(()),
                    Ok(Claimed::Mine(dep)) => self.build_async(dep).await.map(drop),
                    Err(e) => Err(e),
                }
            } else {
                // Claimed and built with no await in between: a sync construction never
                // holds its slot across a suspension point, so sync waiters wait briefly.
                building((self.addr(), key), || self.resolve_sync(dep as usize)).map(drop)
            };
            if let Err(e) = built {
                return claim.finish(Err(e));
            }
        }
        self.build_async(claim).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::registry::{Dependency, InjectKind};
    use crate::{App, ProtoDef};

    struct Part;
    struct Whole;

    /// An App whose `Whole` takes `n` context objects by value.
    async fn app(n: usize) -> App {
        let parts = (0..n).map(|i| ProtoDef::context::<Part>(|_| Ok(Part)).name(format!("part{i}")));
        let whole = (0..n).fold(ProtoDef::context::<Whole>(|_| Ok(Whole)), |def, i| {
            def.dep(Dependency::named::<Part>(InjectKind::Arc, format!("part{i}")))
        });
        App::builder().without_inventory().register_all(parts.chain([whole])).build().await.unwrap()
    }

    #[tokio::test]
    async fn a_large_scope_records_its_size_for_the_next_and_a_small_one_does_not() {
        let small = app(3).await;
        small.run_in_context(async { small.get_object::<Whole>().unwrap() }).await;
        assert_eq!(small.inner.large_scope.load(Ordering::Relaxed), 0, "4 objects: no hint");

        let large = app(40).await;
        for _ in 0..2 {
            // The second scope reserves 41 slots at the 17th and builds the same objects.
            large.run_in_context(async { large.get_object::<Whole>().unwrap() }).await;
            assert_eq!(large.inner.large_scope.load(Ordering::Relaxed), 41);
        }
    }
}
