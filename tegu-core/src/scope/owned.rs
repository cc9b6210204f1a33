//! A scope owned by its task: until a second task needs the scope, its objects live in the
//! task's handle (the task cache is the table), built with no lock, no atomics and no
//! allocation of the scope's own; the first thing that needs the shared form (a
//! [`spawn`](crate::spawn), a hold, an event, an async construction, a failure, a hook to run)
//! moves them into a [`ScopeShared`] table, constructions in flight included.
//!
//! Only the plain case is built here: a sync construction whose by-value context dependencies
//! are built already or have none of their own. Anything else goes to the shared table, which
//! has the whole protocol (the plan of deep dependencies, waits between tasks, failures).
//!
//! Constructions in flight are kept in a thread-local stack (a sync construction never leaves
//! its thread): a handle's share of it starts at `base`. That is what finds a cycle (the asked
//! object is being built further down), and what the shared table adopts as `Building` slots,
//! each with the one below as its parent, when the scope is shared mid-construction.

use std::cell::Cell;
use std::sync::Arc;

use super::handle::ScopeHandle;
use super::handle::TaskCache;
use super::table::{ScopeShared, building_now, set_building_now};
use crate::erased::AnyArc;
use crate::error::DiError;
use crate::resolver::ScopeAt;

/// The most constructions an owned scope runs nested on one thread; a deeper one goes to the
/// shared table (a factory resolving a context object whose factory resolves another...: rare).
const DEPTH: usize = 8;

/// The owned scopes' constructions running on this thread, innermost last. Cells with no
/// destructor: a thread-local reached in one load, each entry written on its own.
struct Stack {
    len: Cell<usize>,
    keys: [Cell<u32>; DEPTH],
}

std::thread_local! {
    static FRAMES: Stack = const { Stack { len: Cell::new(0), keys: [const { Cell::new(0) }; DEPTH] } };
}

/// `FRAMES.with(f)`, always inlined. Left to the optimizer, `LocalKey::with` was outlined after
/// unrelated changes elsewhere in the crate: the thread-local's address then comes through an
/// indirect call, instructions more per object built (`benches/scripts/per-request.sh context
/// 100` shows it).
#[inline(always)]
fn with_frames<R>(f: impl FnOnce(&Stack) -> R) -> R {
    match FRAMES.try_with(f) {
        Ok(out) => out,
        Err(_) => unreachable!("`FRAMES` has no destructor: it is never torn down"),
    }
}

/// A handle's constructions in flight: how many, where they start in [`FRAMES`], and the
/// construction the shared tables knew as running on this thread when the first began
/// (restored if the scope is shared meanwhile: until then its constructions change nothing
/// there, so it is the same for all of them).
#[derive(Default)]
pub(crate) struct Frames {
    count: Cell<u32>,
    base: Cell<u32>,
    before: Cell<Option<(usize, u32)>>,
}

impl Frames {
    /// The keys of the constructions in flight, outermost first.
    pub(super) fn keys(&self) -> Vec<u32> {
        let (base, count) = (self.base.get() as usize, self.count.get() as usize);
        with_frames(|f| f.keys[base..base + count].iter().map(Cell::get).collect())
    }

    /// Where `key` is among the constructions in flight (0: the outermost).
    #[inline]
    fn position(&self, key: u32) -> Option<usize> {
        let (base, count) = (self.base.get() as usize, self.count.get() as usize);
        if count == 0 {
            return None;
        }
        with_frames(|f| f.keys[base..base + count].iter().position(|k| k.get() == key))
    }
}

/// One construction in flight on an owned scope; popped when it finishes or unwinds.
struct Frame<'a> {
    handle: &'a ScopeHandle,
    key: u32,
    /// Where its key is in [`FRAMES`], for [`rekey`](Self::rekey).
    slot: u32,
    done: bool,
}

impl<'a> Frame<'a> {
    /// Pushes `key`'s construction; `None` if the stack is full.
    #[inline]
    fn enter(handle: &'a ScopeHandle, key: u32) -> Option<Self> {
        let frames = &handle.frames;
        let slot = with_frames(|stack| {
            let len = stack.len.get();
            if len == DEPTH {
                return None;
            }
            if frames.count.get() == 0 {
                frames.base.set(len as u32);
                frames.before.set(building_now());
            }
            stack.keys[len].set(key);
            stack.len.set(len + 1);
            Some(len as u32)
        })?;
        frames.count.set(frames.count.get() + 1);
        Some(Frame { handle, key, slot, done: false })
    }

    /// Makes this construction, done and the innermost, the one of `key`: the dependencies built
    /// ahead of a proto take turns in one frame, pushed once (a thread-local write, not a push
    /// and a pop each).
    #[inline]
    fn rekey(&mut self, key: u32) {
        with_frames(|stack| stack.keys[self.slot as usize].set(key));
        self.key = key;
    }

    /// Pops this construction, which has stored its outcome.
    fn release(mut self) {
        self.done = true;
        self.pop();
    }

    /// Pops this construction; if the scope was shared meanwhile, the construction below (if
    /// one of this scope's) is the one running on this thread again.
    #[inline]
    fn pop(&self) -> Option<&'a Arc<ScopeShared>> {
        let frames = &self.handle.frames;
        let left = frames.count.get() - 1;
        frames.count.set(left);
        let below = with_frames(|stack| {
            let len = stack.len.get() - 1;
            stack.len.set(len);
            len.checked_sub(1).map(|i| stack.keys[i].get())
        });
        let before = frames.before.get();
        let shared = self.handle.shared.get()?;
        // Shared mid-construction: the shared table marks what runs here (set when it was
        // shared); below this scope's constructions, what was there before them.
        set_building_now(match (left, below) {
            (0, _) | (_, None) => before,
            (_, Some(below)) => Some((shared.addr(), below)),
        });
        Some(shared)
    }

    /// Stores the construction's outcome: in the task cache, which is the owned scope's table;
    /// in the shared table if the scope was shared meanwhile or the construction failed (every
    /// task gets the same failure: the shared table keeps it).
    fn finish(self, result: Result<AnyArc, DiError>) -> Result<AnyArc, DiError> {
        self.store(result, AnyArc::clone)
    }

    /// [`finish`](Self::finish) for a dependency built ahead of its dependent, which finds it
    /// in the table: no reference to hand back.
    fn finish_ahead(self, result: Result<AnyArc, DiError>) -> Result<(), DiError> {
        self.store(result, |_| ())
    }

    #[inline]
    fn store<R>(mut self, result: Result<AnyArc, DiError>, out: impl Fn(&AnyArc) -> R) -> Result<R, DiError> {
        self.done = true;
        // A failure, or a cache borrowed (by a `with` callback; checked free before the
        // construction began): shared before the pop, so that this construction is adopted as
        // in flight and the shared table keeps its outcome.
        if result.is_err() || self.handle.cache.try_borrow_mut().is_err() {
            self.handle.shared();
        }
        if let Some(shared) = self.pop() {
            return shared.finish_adopted(self.key, result).map(|obj| out(&obj));
        }
        let obj = result.expect("a failure shares the scope above");
        let kept = out(&obj);
        self.handle.cache.borrow_mut().insert_owned(&self.handle.app, self.key, obj);
        Ok(kept)
    }
}

impl Drop for Frame<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Unwinding (a factory panicked): nothing was built; a shared table adopted the
            // slot as in flight, and gives it up.
            if let Some(shared) = self.pop() {
                shared.abandon_adopted(self.key);
            }
        }
    }
}

impl ScopeHandle {
    /// Builds context proto `key` (sync, not seeded, not built) in this task's owned scope, or
    /// in the shared table when the case is not the plain one. The scope is not shared yet.
    pub(super) fn build_owned(&self, key: u32) -> Result<AnyArc, DiError> {
        let graph = &self.app.graph;
        if let Some(pos) = self.frames.position(key) {
            return Err(self.local_cycle(pos, key));
        }
        if let Some(late) = self.refuse_late(key) {
            return Err(late);
        }
        let deps = &graph.context_deps[key as usize];
        let built = |d: u32, cache: &TaskCache| self.seed.get(d).is_some() || cache.get(d).is_some();
        // The plain case: the cache can take the objects (not borrowed by a `with` callback),
        // and what is to be built first has no by-value context dependency of its own.
        let plain = self.cache.try_borrow_mut().is_ok_and(|cache| {
            graph.shallow[key as usize]
                || deps.iter().all(|&d| graph.context_deps[d as usize].is_empty() || built(d, &cache))
        });
        let frame = match plain {
            true => Frame::enter(self, key),
            false => None,
        };
        let Some(frame) = frame else { return self.shared().resolve_sync(key as usize) };
        // Built in order, each as the task's own; the factory of `key` then finds them in the
        // cache (no list of them, no extra reference count each). Those built one after the
        // other take turns in one frame (`ahead`), released before anything else runs here.
        let mut ahead: Option<Frame<'_>> = None;
        let nested = self.frames.count.get() > 1;
        // One resolver for them all, its proto set per dependency.
        let mut resolver = self.app.resolver(key as usize, ScopeAt::Current);
        for &dep in deps {
            // Built before, or by a sibling's factory meanwhile.
            if self.cache.try_borrow().is_ok_and(|cache| built(dep, &cache)) {
                continue;
            }
            let refused = match self.refuse_late(dep) {
                Some(late) => Some(late),
                // With `key` the only construction in flight (the common case), `dep` (never
                // `key` itself, nor the dependency `ahead` last built) cannot be one: no
                // thread-local to read.
                None if nested => self.frames.position(dep).map(|pos| self.local_cycle(pos, dep)),
                None => None,
            };
            if let Some(refused) = refused {
                ahead.take().into_iter().for_each(Frame::release);
                return frame.finish(Err(refused));
            }
            let inner = match (self.shared.get(), ahead.take()) {
                (None, Some(mut inner)) => {
                    inner.rekey(dep);
                    Some(inner)
                }
                (None, None) => Frame::enter(self, dep),
                (Some(_), held) => {
                    held.into_iter().for_each(Frame::release);
                    None
                }
            };
            // Shared meanwhile (by a factory before: another task may build it now), or nested
            // too deep: the shared table.
            let Some(inner) = inner else {
                match self.shared().resolve_sync(dep as usize) {
                    Ok(_) => continue,
                    Err(e) => return frame.finish(Err(e)),
                }
            };
            // `dep` takes no context object by value (the plain case): nothing to find in the
            // cache, which stays free for what its factory may start itself.
            resolver.proto = dep as usize;
            let result = graph.context_factory(dep).call(&resolver);
            let result = match result {
                Ok(obj) if self.shared.get().is_none() => match self.cache.try_borrow_mut() {
                    Ok(mut cache) => {
                        cache.insert_owned(&self.app, dep, obj);
                        ahead = Some(inner);
                        continue;
                    }
                    Err(_) => Ok(obj),
                },
                result => result,
            };
            if let Err(e) = inner.finish_ahead(result) {
                return frame.finish(Err(e));
            }
        }
        ahead.into_iter().for_each(Frame::release);
        let result = self.call_factory(key);
        frame.finish(result)
    }

    /// Why `key` cannot be built now: it has a completion hook, and the completion phase is
    /// over (as the shared table's `refuse_late`).
    fn refuse_late(&self, key: u32) -> Option<DiError> {
        let late = self.completed.get() && self.app.graph.hooks[key as usize] & crate::graph::COMPLETE_HOOK != 0;
        late.then(|| DiError::LateCompletion { wanted: self.app.graph.protos[key as usize].type_name() })
    }

    /// Runs proto `key`'s sync factory; its context dependencies are found in the cache (those
    /// built ahead of it), else through the task-local. The cache stays borrowed for the call:
    /// a construction the factory starts itself finds it so and goes to the shared table, as
    /// one inside a `with` callback does.
    fn call_factory(&self, key: u32) -> Result<AnyArc, DiError> {
        let cache = self.cache.try_borrow();
        let at = match &cache {
            Ok(cache) => ScopeAt::Owned(cache, &self.seed),
            Err(_) => ScopeAt::Current,
        };
        self.app.graph.context_factory(key).call(&self.app.resolver(key as usize, at))
    }

    /// The cycle closed by asking for `key`, in flight at `pos`: `key`, what it runs, ... the
    /// asker, `key` (as the shared table names it).
    #[cold]
    fn local_cycle(&self, pos: usize, key: u32) -> DiError {
        let protos = &self.app.graph.protos;
        let chain = self.frames.keys()[pos..].iter().chain([&key]).map(|&k| protos[k as usize].label()).collect();
        DiError::EagerCycle { chain }
    }

    /// Whether an object this task built has a hook the scope's end must run: a destroy hook,
    /// or a completion hook while the phase has not run (only completion hooks if
    /// `complete_only`).
    pub(super) fn owned_hooks(&self, complete_only: bool) -> bool {
        use crate::graph::{COMPLETE_HOOK, DESTROY_HOOK};
        let Ok(cache) = self.cache.try_borrow() else { return true };
        let destroy = !complete_only && cache.hooks & DESTROY_HOOK != 0;
        destroy || (!self.completed.get() && cache.hooks & COMPLETE_HOOK != 0)
    }

    /// The shared part to end the scope with: the existing one, or one made now if an object
    /// this task built has a hook to run. Otherwise the objects are dropped here, newest first,
    /// each isolated from the others' panics, and there is nothing left to end.
    pub(crate) fn into_shared(self) -> Option<Arc<ScopeShared>> {
        if let Some(shared) = self.shared.get() {
            return Some(shared.clone());
        }
        if self.cache.try_borrow().is_ok_and(|cache| cache.is_empty()) {
            return None; // a scope that built nothing: nothing to record, drop or end
        }
        if !self.owned_hooks(false) {
            let cache = std::mem::take(&mut *self.cache.borrow_mut());
            self.app.record_scope_size(cache.len());
            cache.drop_newest_first();
            return None;
        }
        Some(self.shared().clone())
    }
}

#[cfg(test)]
mod tests {
    use std::panic::AssertUnwindSafe;

    use super::with_frames;
    use crate::registry::{Dependency, InjectKind};
    use crate::{App, DiError, ProtoDef};

    struct Leaf<const I: usize>;
    struct Multi(#[allow(dead_code)] [crate::erased::AnyArc; 3]);

    /// Constructions this thread's owned scopes have in flight.
    fn in_flight() -> usize {
        with_frames(|f| f.len.get())
    }

    /// `Multi` takes three leaves by value; the middle one's factory runs `middle`.
    async fn app(middle: impl Fn() -> Result<(), DiError> + Send + Sync + 'static) -> App {
        App::builder()
            .without_inventory()
            .register(ProtoDef::context::<Leaf<0>>(|_| Ok(Leaf)))
            .register(ProtoDef::context::<Leaf<1>>(move |_| middle().map(|()| Leaf)))
            .register(ProtoDef::context::<Leaf<2>>(|_| Ok(Leaf)))
            .register(
                ProtoDef::context::<Multi>(|r| {
                    Ok(Multi([r.arc::<Leaf<0>>(0)? as _, r.arc::<Leaf<1>>(1)? as _, r.arc::<Leaf<2>>(2)? as _]))
                })
                .dep(Dependency::new::<Leaf<0>>(InjectKind::Arc, None))
                .dep(Dependency::new::<Leaf<1>>(InjectKind::Arc, None))
                .dep(Dependency::new::<Leaf<2>>(InjectKind::Arc, None)),
            )
            .build()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_frame_the_dependencies_built_ahead_share_is_popped_on_every_outcome() {
        // Built, failed, panicked: after each, this thread's stack of constructions is empty
        // (a frame left on it would send every later construction of the thread, once the
        // stack is full, to the shared table).
        let ok = app(|| Ok(())).await;
        let failing = app(|| Err(DiError::NotBuilt { wanted: "a store" })).await;
        let panicking = app(|| panic!("the middle leaf panics")).await;
        for _ in 0..2 * super::DEPTH {
            let (built, left) = ok.run_in_context(async { (ok.get_object::<Multi>().is_ok(), in_flight()) }).await;
            assert!(built);
            assert_eq!(left, 0, "built");
            let left = failing.run_in_context(async { (failing.get_object::<Multi>().is_err(), in_flight()) }).await;
            assert_eq!(left, (true, 0), "failed");
            let unwound = panicking
                .run_in_context(async {
                    let unwound = std::panic::catch_unwind(AssertUnwindSafe(|| panicking.get_object::<Multi>()));
                    (unwound.is_err(), in_flight())
                })
                .await;
            assert_eq!(unwound, (true, 0), "unwound");
        }
    }
}
