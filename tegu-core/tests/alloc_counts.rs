//! Per-request allocations do not grow with the number of registered protos: a scope that
//! touches 3 context objects allocates the same with 10 or 10000 context protos registered, and
//! likewise with 10 or 10000 singletons. Counted by a global allocator, on this thread only.

use std::sync::Arc;

use tegu_core::{
    App, ContextRef, ProtoDef,
    registry::{Dependency, InjectKind},
};
use tegu_test_support::alloc::{Counting, count_on_this_thread};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations made on this thread while `f` runs.
fn count(f: impl FnOnce()) -> usize {
    count_on_this_thread(f)
}

struct Ctx(usize);
struct Single(usize);
struct Touch3([ContextRef<Ctx>; 3]);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn context_app(rt: &tokio::runtime::Runtime, n: usize) -> (App, Arc<Touch3>) {
    let defs = (0..n).map(|i| ProtoDef::context::<Ctx>(move |_| Ok(Ctx(i))).name(format!("ctx{i}")));
    // Touch three spread over the registry, so a table indexed by proto would show it.
    let picks = [0, n / 2, n - 1];
    let mut touch =
        ProtoDef::singleton::<Touch3>(|r| Ok(Touch3([r.context_ref(0)?, r.context_ref(1)?, r.context_ref(2)?])));
    for p in picks {
        touch = touch.dep(Dependency::named::<Ctx>(InjectKind::ContextRef, format!("ctx{p}")));
    }
    let app = rt.block_on(App::builder().without_inventory().register_all(defs).register(touch).build()).unwrap();
    let touch = app.get_object::<Touch3>().unwrap();
    (app, touch)
}

fn touch_three_context_objects(rt: &tokio::runtime::Runtime, app: &App, touch: &Touch3) -> usize {
    let request = || {
        rt.block_on(app.run_in_context(async {
            let sum: usize = touch.0.iter().map(|c| c.get().0).sum();
            let again: usize = touch.0.iter().map(|c| c.with(|c| c.0)).sum();
            assert_eq!(sum, again);
        }))
    };
    request(); // warm-up: the runtime's own first-use allocations
    count(request)
}

#[test]
fn allocations_per_request_do_not_grow_with_registered_protos() {
    let rt = runtime();

    let (small, small_touch) = context_app(&rt, 10);
    let (large, large_touch) = context_app(&rt, 10_000);
    let small_allocs = touch_three_context_objects(&rt, &small, &small_touch);
    let large_allocs = touch_three_context_objects(&rt, &large, &large_touch);
    assert_eq!(small_allocs, large_allocs, "context protos: 10 registered vs 10000");
    // The three objects and nothing else: the task's table is a spare one of the thread's,
    // which the warm-up's scope gave back.
    assert_eq!(small_allocs, 3, "the three objects alone are allocated");

    let singletons = |n: usize| {
        let defs = (0..n).map(|i| ProtoDef::singleton::<Single>(move |_| Ok(Single(i))).name(format!("s{i}")));
        rt.block_on(App::builder().without_inventory().register_all(defs).build()).unwrap()
    };
    let touch_singletons = |app: &App, n: usize| {
        let names = [0, n / 2, n - 1].map(|i| format!("s{i}"));
        let request = || {
            rt.block_on(app.run_in_context(async {
                for name in &names {
                    assert!(app.get_object_named::<Single>(name).unwrap().0 < n);
                }
            }))
        };
        request();
        count(request)
    };
    let (small, large) = (singletons(10), singletons(10_000));
    assert_eq!(touch_singletons(&small, 10), touch_singletons(&large, 10_000), "singletons: 10 vs 10000");

    // An empty scope allocates nothing: its shared part is created on first use.
    let empty = count(|| rt.block_on(small.run_in_context(async {})));
    assert_eq!(empty, 0);
}

struct Head;
struct Tracer(#[allow(dead_code)] Arc<Head>);
struct Holder(ContextRef<Tracer>);

#[test]
fn a_seeded_scope_building_one_object_allocates_only_the_object() {
    // tegu-http's shape: the request head is given to the scope, the tracer built from it.
    let rt = runtime();
    let head_factory = |_: &tegu_core::Resolver<'_>| Err(tegu_core::DiError::construction::<Head>("head", "seeded"));
    let app = rt
        .block_on(
            App::builder()
                .without_inventory()
                .register(ProtoDef::context::<Head>(head_factory))
                .register(
                    ProtoDef::context::<Tracer>(|r| Ok(Tracer(r.arc(0)?)))
                        .dep(Dependency::new::<Head>(InjectKind::Arc, None)),
                )
                .register(
                    ProtoDef::singleton::<Holder>(|r| Ok(Holder(r.context_ref(0)?)))
                        .dep(Dependency::new::<Tracer>(InjectKind::ContextRef, None)),
                )
                .build(),
        )
        .unwrap();
    let holder = app.get_object::<Holder>().unwrap();
    let head = Arc::new(Head);
    let request = || {
        let slot = app.context_slot::<Head>().unwrap();
        rt.block_on(app.run_in_context_with(slot, head.clone(), async {
            holder.0.with(|tracer| std::hint::black_box(tracer as *const Tracer));
            holder.0.with(|tracer| std::hint::black_box(tracer as *const Tracer)); // cached
        }))
    };
    request();
    // The tracer: a scope owned by its one task keeps it in the task's cache (its first entry is
    // inline), with no shared part, slot table or list of created objects (4 allocations
    // otherwise), and its end allocates nothing.
    assert_eq!(count(request), 1);
}
