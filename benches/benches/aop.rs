//! The cost of an interceptor and of an event, each next to its floor in the same run.
//!
//! Run: `cargo bench -p benches --bench aop -- --sample-count 200`
//! (figures in `benches/RESULTS.md`, "Interceptors and events").
//!
//! - `intercept/bare`: an `async fn` adding one to its argument, polled once, inside a scope.
//! - `intercept/floor_arc_clone`: an `Arc` clone and drop, what holding an advice for the call
//!   costs at least; `intercept/advice_lookup`: the advice's lookup through the scope.
//! - `intercept/one_singleton_advice`: the same method with `#[intercept(Pass)]`, `Pass` a
//!   singleton advice that only runs `next`: the advice's lookup through the scope, the step
//!   pinned in the method's future, the dynamic poll.
//! - `intercept/one_context_advice`: the same with a context-proto advice (the scope's object).
//! - `intercept/two_advices`: both, nested.
//! - `intercept/join_point_unselected`: the same method as a join point (a `pub async fn` of an
//!   impl block marked `#[intercept]`) that no crosscut selects: what opting in costs.
//! - `intercept/one_crosscut`: a join point that `crosscut!(Pass, ..)` selects: the advice's
//!   lookup, its boxed future, the dynamic calls.
//! - `event/*`: `emit` of an event with one handler, run to its end on a current-thread
//!   runtime, against spawning and running an empty task the same way; and `emit` of an event
//!   with no handler (a lookup).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use benches::micro::{poll_once, runtime};
use divan::Bencher;
use tegu_core::{
    App,
    advice::{Advice, Call, Next},
    context_proto, crosscut,
    events::EventBus,
    handlers, intercept, singleton_proto,
};
use tokio::runtime::Runtime;

#[cfg(not(feature = "no-alloc-profiler"))]
#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

/// Runs `next` and nothing else.
#[singleton_proto]
struct Pass;

impl<R> Advice<R> for Pass {
    async fn around(&self, _: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

/// The same, as a context proto.
#[context_proto]
struct ScopedPass;

impl<R> Advice<R> for ScopedPass {
    async fn around(&self, _: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

#[singleton_proto]
struct Svc;

impl Svc {
    #[inline(never)]
    async fn bare(&self, n: u64) -> u64 {
        n + 1
    }

    #[intercept(Pass)]
    async fn one(&self, n: u64) -> u64 {
        n + 1
    }

    #[intercept(ScopedPass)]
    async fn scoped(&self, n: u64) -> u64 {
        n + 1
    }

    #[intercept(Pass, ScopedPass)]
    async fn two(&self, n: u64) -> u64 {
        n + 1
    }
}

/// Join points: one that no crosscut selects, one that `Pass` does.
#[intercept]
impl Svc {
    pub async fn joined(&self, n: u64) -> u64 {
        n + 1
    }

    pub async fn crosscut_one(&self, n: u64) -> u64 {
        n + 1
    }
}

crosscut!(Pass, types = "Svc", methods = "crosscut_*");

struct Tick;
struct Unheard;

#[singleton_proto]
#[derive(Default)]
struct Counter {
    n: AtomicU64,
}

#[handlers]
impl Counter {
    #[event_handler]
    async fn on_tick(&self, _: &Tick) {
        self.n.fetch_add(1, Ordering::Relaxed);
    }
}

/// The benchmark's App: only its own protos (the benchmark binary links tegg's projects).
fn app(rt: &Runtime) -> App {
    let builder = App::builder()
        .without_inventory()
        .link::<Pass>()
        .link::<ScopedPass>()
        .link::<Svc>()
        .link::<Counter>()
        .link::<EventBus>();
    rt.block_on(builder.build()).expect("the benchmark graph is valid")
}

mod intercept {
    use super::*;

    /// Runs `f` in divan's loop inside one scope of the benchmark's App.
    fn in_scope(b: Bencher, f: impl Fn(&Svc) -> u64 + Sync) {
        let rt = runtime();
        let app = app(&rt);
        let svc = app.get_object::<Svc>().expect("Svc");
        rt.block_on(app.run_in_context(async {
            // Warm: the context advice is built on first use.
            black_box(f(&svc));
            b.bench_local(|| black_box(f(&svc)));
        }));
    }

    /// The advice's lookup alone (what `one_singleton_advice` pays before its future): the
    /// scope's App, the type index, an `Arc` clone and its drop.
    #[divan::bench]
    fn advice_lookup(b: Bencher) {
        in_scope(b, |_| {
            let advice = tegu_core::__private::advice::<Pass>(Call::new("Svc", "one"));
            black_box(&advice);
            drop(advice);
            0
        });
    }

    /// The floor of holding an advice across the call: an `Arc` clone and its drop.
    #[divan::bench]
    fn floor_arc_clone(b: Bencher) {
        let arc = Arc::new(Pass);
        in_scope(b, move |_| {
            let held = Arc::clone(&arc);
            black_box(&held);
            drop(held);
            0
        });
    }

    #[divan::bench]
    fn bare(b: Bencher) {
        in_scope(b, |svc| poll_once(svc.bare(black_box(1))));
    }

    #[divan::bench]
    fn one_singleton_advice(b: Bencher) {
        in_scope(b, |svc| poll_once(svc.one(black_box(1))));
    }

    #[divan::bench]
    fn one_context_advice(b: Bencher) {
        in_scope(b, |svc| poll_once(svc.scoped(black_box(1))));
    }

    #[divan::bench]
    fn two_advices(b: Bencher) {
        in_scope(b, |svc| poll_once(svc.two(black_box(1))));
    }

    #[divan::bench]
    fn join_point_unselected(b: Bencher) {
        in_scope(b, |svc| poll_once(svc.joined(black_box(1))));
    }

    #[divan::bench]
    fn one_crosscut(b: Bencher) {
        in_scope(b, |svc| poll_once(svc.crosscut_one(black_box(1))));
    }
}

mod event {
    use super::*;

    /// The floor of `emit_one_handler`: spawn an empty task and let it run.
    #[divan::bench]
    fn floor_spawn_and_run(b: Bencher) {
        let rt = runtime();
        b.bench_local(|| {
            rt.block_on(async {
                drop(tokio::spawn(async {}));
                tokio::task::yield_now().await;
            })
        });
    }

    /// `emit` outside a scope, its one handler run to its end (in a scope of its own).
    #[divan::bench]
    fn emit_one_handler(b: Bencher) {
        let rt = runtime();
        let app = app(&rt);
        let bus = app.events();
        let counter: Arc<Counter> = app.get_object().expect("Counter");
        b.bench_local(|| {
            rt.block_on(async {
                bus.emit(Tick);
                tokio::task::yield_now().await;
            })
        });
        assert!(counter.n.load(Ordering::Relaxed) > 0, "the handler ran");
    }

    /// `emit` of an event type nobody handles: one lookup.
    #[divan::bench]
    fn emit_no_handler(b: Bencher) {
        let rt = runtime();
        let app = app(&rt);
        let bus = app.events();
        b.bench_local(|| bus.emit(Unheard));
    }
}
