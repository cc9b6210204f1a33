//! Micro benchmarks of tegu-core, each next to a floor measured in the same run.
//!
//! Run: `cargo bench -p benches --bench context -- --sample-count 200`
//! (figures and the machine in `benches/RESULTS.md`).
//!
//! Every benchmarked closure returns `()` or a `Copy` value: divan defers the drop of returned
//! values out of the timed loop, and an `Arc`'s drop is half of what we want to measure.
//!
//! Benchmarks that need a context scope run divan's sampling loop inside ONE scope: the future
//! given to `block_on` calls `Bencher::bench_local` synchronously while it is polled, so the
//! task-local is set for every iteration.

use std::any::Any;
use std::hint::black_box;
use std::sync::Arc;

use benches::micro::{poll_once, runtime};
use divan::Bencher;
use tegu_core::{
    App, ContextRef, ProtoDef,
    registry::{Dependency, InjectKind},
};
use tokio::runtime::Runtime;

/// Counts allocations per iteration (the `alloc:` rows of divan's output). Costs a few ns per
/// allocation; `--features no-alloc-profiler` measures without it.
#[cfg(not(feature = "no-alloc-profiler"))]
#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

/// Iterations per sample for the benchmarks that enter a scope (a few hundred ns each). Divan's
/// automatic tuning stops at 1 when the first, cold iteration is slow, and a one-iteration
/// sample carries the timer's granularity (about 26 ns here).
const SCOPE_SAMPLE: u32 = 64;

fn main() {
    divan::main();
}

/// The context object the benchmarks reach.
struct Tracer {
    id: u64,
}

/// A singleton holding a `ContextRef` to the tracer, as a service would.
struct Holder {
    t: ContextRef<Tracer>,
}

/// Padding: registered in bulk as named instances, never touched (or touched in bulk).
struct Filler(u64);

/// A singleton holding `ContextRef`s to the first `n` fillers.
struct Many {
    refs: Vec<ContextRef<Filler>>,
}

fn filler_name(i: usize) -> String {
    format!("filler{i}")
}

fn fillers(n: usize) -> impl Iterator<Item = ProtoDef> {
    (0..n).map(|i| ProtoDef::context::<Filler>(move |_| Ok(Filler(i as u64))).name(filler_name(i)))
}

struct Setup {
    rt: Runtime,
    app: App,
    holder: Arc<Holder>,
}

/// An App with the tracer, its holder and `padding` other context protos; when `touched > 0`
/// also a singleton `Many` holding `ContextRef`s to the first `touched` fillers.
fn setup(padding: usize, touched: usize) -> Setup {
    assert!(touched <= padding);
    let rt = runtime();
    let mut builder = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Tracer>(|_| Ok(Tracer { id: 42 })))
        .register(
            ProtoDef::singleton::<Holder>(|r| Ok(Holder { t: r.context_ref(0)? }))
                .dep(Dependency::new::<Tracer>(InjectKind::ContextRef, None)),
        )
        .register_all(fillers(padding));
    if touched > 0 {
        let mut many = ProtoDef::singleton::<Many>(move |r| {
            Ok(Many { refs: (0..touched).map(|i| r.context_ref::<Filler>(i)).collect::<Result<_, _>>()? })
        });
        for i in 0..touched {
            many = many.dep(Dependency::named::<Filler>(InjectKind::ContextRef, filler_name(i)));
        }
        builder = builder.register(many);
    }
    let app = rt.block_on(builder.build()).expect("the benchmark graph is valid");
    let holder = app.get_object::<Holder>().expect("the holder singleton");
    Setup { rt, app, holder }
}

/// What the library's figures are compared with: the same mechanism without tegu-core.
mod floor {
    use super::*;

    tokio::task_local! {
        static U64: u64;
        static ARC: Arc<u64>;
        static ANY: Arc<dyn Any + Send + Sync>;
    }

    /// A raw `task_local` `try_with` inside its scope, reading a `u64`.
    #[divan::bench]
    fn task_local_with(b: Bencher) {
        runtime().block_on(U64.scope(7, async move {
            b.bench_local(|| black_box(U64.try_with(|v| *v).unwrap_or(0)));
        }));
    }

    /// The same access behind an `#[inline(never)]` function. Inlined, the access above lets LLVM
    /// hoist most of it out of divan's loop (0.1 to 0.9 ns, depending on the build); a call per
    /// iteration keeps it honest, and tegu-core's non-generic core is such a call.
    #[divan::bench]
    fn task_local_with_call(b: Bencher) {
        #[inline(never)]
        fn read() -> u64 {
            U64.try_with(|v| *v).unwrap_or(0)
        }
        runtime().block_on(U64.scope(7, async move {
            b.bench_local(|| black_box(read()));
        }));
    }

    /// A raw `task_local` `try_with` handing out a clone of the `Arc` it holds, dropped at once.
    #[divan::bench]
    fn task_local_arc_clone(b: Bencher) {
        runtime().block_on(ARC.scope(Arc::new(7), async move {
            b.bench_local(|| drop(black_box(ARC.try_with(Arc::clone).ok())));
        }));
    }

    /// What a safe, type-erased, non-generic core can do at best: an `#[inline(never)]` function
    /// that reaches an `Arc<dyn Any>` in a task-local and hands it to a `&mut dyn FnMut`, which
    /// downcasts it (tegu-core's `ContextRef::with` has this shape, plus its cache lookup).
    #[divan::bench]
    fn task_local_with_dyn(b: Bencher) {
        #[inline(never)]
        fn with_any(f: &mut dyn FnMut(&(dyn Any + Send + Sync))) -> bool {
            ANY.try_with(|a| f(&**a)).is_ok()
        }
        runtime().block_on(ANY.scope(Arc::new(7u64), async move {
            b.bench_local(|| {
                let mut out = 0;
                with_any(&mut |a| {
                    if let Some(v) = a.downcast_ref::<u64>() {
                        out = *v;
                    }
                });
                black_box(out)
            });
        }));
    }

    /// `Arc` clone + drop, uncontended.
    #[divan::bench]
    fn arc_clone(b: Bencher) {
        let arc = Arc::new(7u64);
        b.bench_local(|| drop(black_box(black_box(&arc).clone())));
    }

    /// `std::sync::Mutex` lock + unlock, uncontended (an empty scope takes two).
    #[divan::bench]
    fn mutex_lock_unlock(b: Bencher) {
        let mutex = std::sync::Mutex::new(7u64);
        b.bench_local(|| black_box(*black_box(&mutex).lock().unwrap_or_else(|e| e.into_inner())));
    }

    /// `Arc::new` + drop of 168 bytes, the size of an empty scope's one allocation.
    #[divan::bench]
    fn arc_new_168(b: Bencher) {
        b.bench_local(|| drop(black_box(Arc::new(black_box([0u64; 19])))));
    }

    /// `block_on` of an empty future on a current-thread runtime: part of every `scope/*` figure.
    #[divan::bench(sample_size = SCOPE_SAMPLE)]
    fn block_on(b: Bencher) {
        let rt = runtime();
        b.bench_local(|| rt.block_on(async {}));
    }

    /// `block_on` of an empty future inside a fresh task-local scope holding a cloned `Arc`:
    /// the least a scope can cost that carries shared state.
    #[divan::bench(sample_size = SCOPE_SAMPLE)]
    fn block_on_task_local_scope_arc(b: Bencher) {
        let rt = runtime();
        let arc = Arc::new(7u64);
        b.bench_local(|| rt.block_on(ARC.scope(arc.clone(), async {})));
    }

    /// One poll of a fresh task-local scope holding a cloned `Arc`, inside a running runtime
    /// (no `block_on` per iteration): the floor of `scope/empty_polled`.
    #[divan::bench(sample_size = SCOPE_SAMPLE)]
    fn task_local_scope_arc_polled(b: Bencher) {
        let arc = Arc::new(7u64);
        runtime().block_on(async move {
            b.bench_local(|| poll_once(ARC.scope(arc.clone(), async {})));
        });
    }
}

mod context_ref {
    use super::*;

    mod get {
        use super::*;

        /// `get()` of an object that already exists in the current scope (clone + drop of the `Arc`).
        fn warm_in(s: Setup, b: Bencher) {
            let Setup { rt, app, holder } = s;
            rt.block_on(app.run_in_context(async move {
                assert_eq!(holder.t.get().id, 42);
                b.bench_local(|| drop(black_box(black_box(&holder.t).get())));
            }));
        }

        #[divan::bench]
        fn warm(b: Bencher) {
            warm_in(setup(0, 0), b);
        }

        /// As `warm`, with 10000 other context protos registered.
        #[divan::bench]
        fn warm_at_10000(b: Bencher) {
            warm_in(setup(10_000, 0), b);
        }

        /// `get()` of the last of 16 objects the task touched (the cache's linear scan at its
        /// longest).
        #[divan::bench]
        fn warm_touched_16(b: Bencher) {
            warm_touched(16, b);
        }

        /// `get()` of the last of 64 objects the task touched (the cache has switched to its index).
        #[divan::bench]
        fn warm_touched_64(b: Bencher) {
            warm_touched(64, b);
        }

        fn warm_touched(n: usize, b: Bencher) {
            let Setup { rt, app, .. } = setup(n, n);
            let many = app.get_object::<Many>().expect("the Many singleton");
            rt.block_on(app.run_in_context(async move {
                for (i, r) in many.refs.iter().enumerate() {
                    assert_eq!(r.get().0, i as u64);
                }
                let last = many.refs[n - 1];
                b.bench_local(|| drop(black_box(black_box(&last).get())));
            }));
        }

        /// A scope whose only work is creating the object: enter + first `get()` + leave
        /// (destroying the object). Subtract `scope/empty` for the creation cost.
        #[divan::bench(sample_size = SCOPE_SAMPLE)]
        fn first(b: Bencher) {
            let Setup { rt, app, holder } = setup(0, 0);
            b.bench_local(|| {
                rt.block_on(app.run_in_context(async {
                    drop(black_box(holder.t.get()));
                }));
            });
        }

        /// As `first`, polled once inside a running runtime instead of `block_on`: subtract
        /// `scope/empty_polled`.
        #[divan::bench(sample_size = SCOPE_SAMPLE)]
        fn first_polled(b: Bencher) {
            let Setup { rt, app, holder } = setup(0, 0);
            rt.block_on(async move {
                b.bench_local(|| {
                    poll_once(app.run_in_context(async {
                        drop(black_box(holder.t.get()));
                    }));
                });
            });
        }
    }

    mod with {
        use super::*;

        /// `with(|t| t.id)` on an object that already exists in the current scope.
        fn warm_in(s: Setup, b: Bencher) {
            let Setup { rt, app, holder } = s;
            rt.block_on(app.run_in_context(async move {
                assert_eq!(holder.t.with(|t| t.id), 42);
                b.bench_local(|| black_box(black_box(&holder.t).with(|t| t.id)));
            }));
        }

        #[divan::bench]
        fn warm(b: Bencher) {
            warm_in(setup(0, 0), b);
        }

        /// As `warm`, with 10000 other context protos registered.
        #[divan::bench]
        fn warm_at_10000(b: Bencher) {
            warm_in(setup(10_000, 0), b);
        }
    }
}

mod scope {
    use super::*;

    fn empty_in(s: Setup, b: Bencher) {
        let Setup { rt, app, .. } = s;
        b.bench_local(|| rt.block_on(app.run_in_context(async {})));
    }

    /// `block_on(app.run_in_context(async {}))`: enter and leave a scope that touches nothing.
    #[divan::bench(sample_size = SCOPE_SAMPLE)]
    fn empty(b: Bencher) {
        empty_in(setup(0, 0), b);
    }

    /// As `empty`, with 10000 other context protos registered.
    #[divan::bench(sample_size = SCOPE_SAMPLE)]
    fn empty_at_10000(b: Bencher) {
        empty_in(setup(10_000, 0), b);
    }

    /// One poll of `app.run_in_context(async {})` inside a running runtime: the scope without
    /// `block_on`'s cost, as a server that opens one scope per request future pays it.
    #[divan::bench(sample_size = SCOPE_SAMPLE)]
    fn empty_polled(b: Bencher) {
        let Setup { rt, app, .. } = setup(0, 0);
        rt.block_on(async move {
            b.bench_local(|| poll_once(app.run_in_context(async {})));
        });
    }
}

mod get_object {
    use super::*;

    /// `app.get_object::<Holder>()` of a singleton (clone + drop of its `Arc`).
    #[divan::bench]
    fn singleton(b: Bencher) {
        let Setup { app, .. } = setup(0, 0);
        b.bench_local(|| drop(black_box(black_box(&app).get_object::<Holder>())));
    }

    /// `app.get_object::<Tracer>()` of a context object that exists in the current scope.
    #[divan::bench]
    fn context_warm(b: Bencher) {
        let Setup { rt, app, .. } = setup(0, 0);
        rt.block_on(app.run_in_context(async {
            assert_eq!(app.get_object::<Tracer>().expect("in scope").id, 42);
            b.bench_local(|| drop(black_box(black_box(&app).get_object::<Tracer>())));
        }));
    }
}

mod app {
    use super::*;

    /// `App::builder().register_all(n + 2 protos).build()` (and dropping the App): graph validation,
    /// indexing and the two singletons. Start-up, not per request; the contract says "a few
    /// milliseconds" at 10000. The `n` fillers are named instances of ONE type.
    #[divan::bench(args = [100, 1000, 10_000])]
    fn build(b: Bencher, n: usize) {
        let rt = runtime();
        let defs = app_defs(n);
        b.with_inputs(|| defs.clone()).bench_local_values(|defs| {
            drop(black_box(rt.block_on(App::builder().without_inventory().register_all(defs).build())));
        });
    }

    /// `n` fillers, the tracer and its holder.
    fn app_defs(n: usize) -> Vec<ProtoDef> {
        fillers(n)
            .chain([
                ProtoDef::context::<Tracer>(|_| Ok(Tracer { id: 42 })),
                ProtoDef::singleton::<Holder>(|r| Ok(Holder { t: r.context_ref(0)? }))
                    .dep(Dependency::new::<Tracer>(InjectKind::ContextRef, None)),
            ])
            .collect()
    }

    /// A config section of the `build_config` benchmark.
    #[derive(serde::Deserialize)]
    #[allow(dead_code)] // read by serde only
    struct Section {
        url: String,
        pool: u32,
        #[serde(default)]
        tags: Vec<String>,
    }

    /// As `build` with `n` fillers, plus 1000 config sections read from one TOML file and an
    /// environment prefix (the target: within 2x of `build` at 10000).
    #[divan::bench(args = [10_000])]
    fn build_config(b: Bencher, n: usize) {
        let rt = runtime();
        let dir = std::env::temp_dir().join(format!("di-bench-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp folder");
        let file = dir.join("app.toml");
        let toml: String = (0..1000)
            .map(|i| format!("[s{i}]\nurl = \"postgres://db{i}\"\npool = {i}\ntags = [\"a\", \"b\"]\n\n"))
            .collect();
        std::fs::write(&file, toml).expect("the config file");
        let mut defs = app_defs(n);
        defs.extend((0..1000).map(|i| ProtoDef::config::<Section>(format!("s{i}")).name(format!("s{i}"))));
        b.with_inputs(|| defs.clone()).bench_local_values(|defs| {
            let builder =
                App::builder().without_inventory().register_all(defs).config_file(&file).config_env("DI_BENCH_");
            drop(black_box(rt.block_on(builder.build()).expect("the config is valid")));
        });
    }
}
