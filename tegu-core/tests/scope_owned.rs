//! A scope owned by its task until a second task needs it: what the objects built
//! before the scope is shared, and the constructions in flight when it is, must keep. One
//! object per proto per scope, whichever task asks; a cycle is an error, never a hang; a
//! failure is every task's answer; a panic leaves the proto buildable; each object destroyed
//! once.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{
    App, ContextRef, DiError, ProtoDef,
    registry::{Dependency, InjectKind},
};

/// A context object: its build number.
struct Leaf(usize);
/// Takes a `Leaf` by value.
struct Node(Arc<Leaf>);
/// A singleton reaching both.
struct Holder {
    leaf: ContextRef<Leaf>,
    node: ContextRef<Node>,
}

#[derive(Default)]
struct Counts {
    built: AtomicUsize,
    destroyed: AtomicUsize,
}

/// What the leaf's factory does before it returns, given the shared counts and its resolver.
type LeafHook = dyn Fn(&Counts) -> Result<(), DiError> + Send + Sync;

async fn app(counts: &Arc<Counts>, hook: Arc<LeafHook>) -> App {
    let (c, d) = (counts.clone(), counts.clone());
    let leaf = ProtoDef::context::<Leaf>(move |_| {
        hook(&c)?;
        Ok(Leaf(c.built.fetch_add(1, Ordering::SeqCst)))
    })
    .on_destroy(move |_: Arc<Leaf>| {
        let d = d.clone();
        async move {
            d.destroyed.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    App::builder()
        .without_inventory()
        .register(leaf)
        .register(
            ProtoDef::context::<Node>(|r| Ok(Node(r.arc(0)?))).dep(Dependency::new::<Leaf>(InjectKind::Arc, None)),
        )
        .register(
            ProtoDef::singleton::<Holder>(|r| Ok(Holder { leaf: r.context_ref(0)?, node: r.context_ref(1)? }))
                .dep(Dependency::new::<Leaf>(InjectKind::ContextRef, None))
                .dep(Dependency::new::<Node>(InjectKind::ContextRef, None)),
        )
        .build()
        .await
        .unwrap()
}

/// An App whose leaf's factory does nothing more, its counts, and its holder.
async fn plain_app() -> (Arc<Counts>, App, Arc<Holder>) {
    let counts = Arc::new(Counts::default());
    let app = app(&counts, Arc::new(|_| Ok(()))).await;
    let holder = app.get_object::<Holder>().unwrap();
    (counts, app, holder)
}

/// Shuts `app` down, then checks that its one leaf was built once and destroyed once.
async fn built_and_destroyed_once(app: App, counts: &Counts) {
    app.shutdown().await.unwrap();
    assert_eq!(counts.built.load(Ordering::SeqCst), 1, "built once");
    assert_eq!(counts.destroyed.load(Ordering::SeqCst), 1, "destroyed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_built_before_a_spawn_are_the_spawned_tasks_and_destroyed_once() {
    let (counts, app, holder) = plain_app().await;
    let same = app
        .run_in_context(async {
            let node = holder.node.get(); // built in the owned scope, with its leaf
            let h = app.get_object::<Holder>().unwrap();
            let other = tegu_core::spawn(async move { (h.leaf.get(), h.node.get()) }).await.unwrap();
            Arc::ptr_eq(&node, &other.1) && Arc::ptr_eq(&node.0, &other.0) && Arc::ptr_eq(&holder.leaf.get(), &node.0)
        })
        .await;
    assert!(same, "the spawned task sees the objects the owner built");
    built_and_destroyed_once(app, &counts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_construction_in_flight_when_the_scope_is_shared_is_built_once_for_every_task() {
    // The leaf's factory spawns a task that asks for the leaf: the scope is shared while the
    // leaf is being built, and the other task waits for this construction, not a second one.
    let counts = Arc::new(Counts::default());
    let seen: Arc<Mutex<Option<tokio::task::JoinHandle<Arc<Leaf>>>>> = Arc::default();
    let (s, app_cell) = (seen.clone(), Arc::new(std::sync::OnceLock::<App>::new()));
    let cell = app_cell.clone();
    let app = app(
        &counts,
        Arc::new(move |_| {
            if s.lock().unwrap().is_none() {
                let app = cell.get().unwrap().clone();
                *s.lock().unwrap() = Some(tegu_core::spawn(async move { app.get_object::<Leaf>().unwrap() }));
                std::thread::sleep(Duration::from_millis(50)); // the other task asks meanwhile
            }
            Ok(())
        }),
    )
    .await;
    app_cell.set(app.clone()).ok();
    let holder = app.get_object::<Holder>().unwrap();
    let (mine, theirs) = app
        .run_in_context(async {
            let mine = holder.node.get().0.clone();
            let task = seen.lock().unwrap().take().unwrap();
            (mine, task.await.unwrap())
        })
        .await;
    assert!(Arc::ptr_eq(&mine, &theirs));
    built_and_destroyed_once(app, &counts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_closed_after_the_scope_is_shared_mid_construction_is_an_error_not_a_hang() {
    // Building the node builds its leaf first; the leaf's factory shares the scope (a spawn),
    // then asks for the node, which is being built further down this very stack.
    let counts = Arc::new(Counts::default());
    let cell = Arc::new(std::sync::OnceLock::<App>::new());
    let c = cell.clone();
    let app = app(
        &counts,
        Arc::new(move |_| {
            drop(tegu_core::spawn(async {}));
            match c.get().unwrap().get_object::<Node>() {
                Err(e) => Err(e),
                Ok(_) => panic!("the node cannot exist while its leaf is built"),
            }
        }),
    )
    .await;
    cell.set(app.clone()).ok();
    let holder = app.get_object::<Holder>().unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), app.run_in_context(async { holder.node.try_get() }))
        .await
        .expect("a cycle must not hang");
    match result {
        Err(DiError::EagerCycle { chain }) => {
            assert_eq!(chain.len(), 3, "{chain:?}");
            assert!(chain[0].contains("Node") && chain[1].contains("Leaf") && chain[2].contains("Node"), "{chain:?}");
        }
        other => panic!("expected the cycle, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_failed_construction_is_every_later_askers_answer_without_a_rebuild() {
    let counts = Arc::new(Counts::default());
    let app = app(
        &counts,
        Arc::new(|c: &Counts| {
            c.built.fetch_add(1, Ordering::SeqCst);
            Err(DiError::construction::<Leaf>("leaf", "the disk is full"))
        }),
    )
    .await;
    let holder = app.get_object::<Holder>().unwrap();
    let (first, second, via_node) = app
        .run_in_context(async {
            let first = holder.leaf.try_get().map(|_| ()).unwrap_err().to_string();
            let second = holder.leaf.try_get().map(|_| ()).unwrap_err().to_string();
            let via_node = holder.node.try_get().map(|_| ()).unwrap_err().to_string();
            (first, second, via_node)
        })
        .await;
    assert!(first.contains("the disk is full"), "{first}");
    assert_eq!(first, second);
    assert_eq!(first, via_node);
    assert_eq!(counts.built.load(Ordering::SeqCst), 1, "the factory ran once");
}

#[tokio::test]
async fn a_panicking_factory_leaves_its_proto_buildable_in_the_same_scope() {
    let counts = Arc::new(Counts::default());
    let tries = Arc::new(AtomicUsize::new(0));
    let t = tries.clone();
    let app = app(
        &counts,
        Arc::new(move |_| {
            if t.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the first try fails");
            }
            Ok(())
        }),
    )
    .await;
    let holder = app.get_object::<Holder>().unwrap();
    let (panicked, node) = app
        .run_in_context(async {
            let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| holder.node.get())).is_err();
            (panicked, holder.node.get())
        })
        .await;
    assert!(panicked);
    assert_eq!(node.0.0, 0, "built once, on the second try");
    app.shutdown().await.unwrap();
    assert_eq!(counts.destroyed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_object_first_asked_for_inside_a_with_callback_is_kept_once() {
    let (counts, app, holder) = plain_app().await;
    let same = app
        .run_in_context(async {
            let leaf = holder.leaf.get();
            // The task's cache is borrowed while the callback runs: the node goes to the
            // shared table, and later asks find it there.
            let inside = holder.leaf.with(|_| holder.node.get());
            Arc::ptr_eq(&inside, &holder.node.get()) && Arc::ptr_eq(&inside.0, &leaf)
        })
        .await;
    assert!(same);
    built_and_destroyed_once(app, &counts).await;
}

#[tokio::test]
async fn objects_of_an_owned_scope_are_destroyed_newest_first_and_dropped_at_its_end() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = (order.clone(), order.clone());
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Leaf>(|_| Ok(Leaf(0))).on_destroy(move |_: Arc<Leaf>| {
            a.lock().unwrap().push("leaf");
            async { Ok(()) }
        }))
        .register(
            ProtoDef::context::<Node>(|r| Ok(Node(r.arc(0)?)))
                .dep(Dependency::new::<Leaf>(InjectKind::Arc, None))
                .on_destroy(move |_: Arc<Node>| {
                    b.lock().unwrap().push("node");
                    async { Ok(()) }
                }),
        )
        .build()
        .await
        .unwrap();
    let weak = app.run_in_context(async { Arc::downgrade(&app.get_object::<Node>().unwrap()) }).await;
    assert_eq!(*order.lock().unwrap(), ["node", "leaf"]);
    assert!(weak.upgrade().is_none(), "dropped when the scope ended");
}

/// A context object at one level of a chain of nested resolutions.
struct Level(usize, Option<Arc<Level>>);

#[tokio::test]
async fn resolutions_nested_deeper_than_the_owned_stack_go_to_the_shared_table_built_once() {
    // Each level's factory asks for the next one (user code, not a declared dependency): 20
    // constructions in flight on one stack, past the owned scope's depth, so the scope is
    // shared with those in flight adopted.
    const LEVELS: usize = 20;
    let builds = Arc::new(AtomicUsize::new(0));
    let cell = Arc::new(std::sync::OnceLock::<App>::new());
    let defs = (0..LEVELS).map(|i| {
        let (cell, builds) = (cell.clone(), builds.clone());
        ProtoDef::context::<Level>(move |_| {
            builds.fetch_add(1, Ordering::SeqCst);
            let next = (i + 1 < LEVELS).then(|| cell.get().unwrap().get_object_named::<Level>(&format!("l{}", i + 1)));
            Ok(Level(i, next.transpose()?))
        })
        .name(format!("l{i}"))
    });
    let app = App::builder().without_inventory().register_all(defs).build().await.unwrap();
    cell.set(app.clone()).ok();
    let (depth, last_again) = app
        .run_in_context(async {
            let top = app.get_object_named::<Level>("l0").unwrap();
            let mut depth = 0;
            let mut at = Some(top);
            let mut last = None;
            while let Some(level) = at {
                depth += 1;
                last = Some(level.clone());
                at = level.1.clone();
            }
            let again = app.get_object_named::<Level>(&format!("l{}", LEVELS - 1)).unwrap();
            (depth, Arc::ptr_eq(&last.unwrap(), &again) && again.0 == LEVELS - 1)
        })
        .await;
    assert_eq!(depth, LEVELS);
    assert!(last_again, "the deepest level is the scope's one object of its proto");
    assert_eq!(builds.load(Ordering::SeqCst), LEVELS, "each level built once");
}

/// Taken by value by `Report`, with a completion hook.
struct Ledger;
struct Report(#[allow(dead_code)] Arc<Ledger>);

#[tokio::test]
async fn a_dependency_with_a_completion_hook_built_after_the_phase_is_refused() {
    // As for an object asked for directly (scope_edges.rs): once the completion phase is over,
    // an object with a completion hook would never be completed; built as another's dependency
    // in the owned scope, it is refused the same way, and so is its dependent.
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Ledger>(|_| Ok(Ledger)).on_complete(|_: Arc<Ledger>| async { Ok(()) }))
        .register(
            ProtoDef::context::<Report>(|r| Ok(Report(r.arc(0)?)))
                .dep(Dependency::new::<Ledger>(InjectKind::Arc, None)),
        )
        .build()
        .await
        .unwrap();
    let (report, ledger) = app
        .run_in_context(async {
            tegu_core::scope::complete_scope().await.unwrap();
            (app.get_object::<Report>().map(|_| ()), app.get_object::<Ledger>().map(|_| ()))
        })
        .await;
    for result in [report, ledger] {
        assert!(matches!(&result, Err(DiError::LateCompletion { wanted }) if wanted.contains("Ledger")), "{result:?}");
    }
}

#[tokio::test]
async fn a_hold_entered_inside_a_with_callback_runs_in_the_same_scope() {
    // With tokio's task-local, entering a scope while a `with` callback borrowed the current
    // one panicked ("task-local storage is borrowed"); the scope's own task-local nests.
    let (counts, app, holder) = plain_app().await;
    let same = app
        .run_in_context(async {
            let mut hold = tegu_core::scope::hold_scope().unwrap();
            let leaf = holder.leaf.get();
            holder.leaf.with(|inner| inner.0 == leaf.0 && hold.enter(|| Arc::ptr_eq(&holder.leaf.get(), &leaf)))
        })
        .await;
    assert!(same);
    built_and_destroyed_once(app, &counts).await;
}

/// One of many context objects of a scope: counts its drops.
struct Piece;
static PIECES_DROPPED: AtomicUsize = AtomicUsize::new(0);
impl Drop for Piece {
    fn drop(&mut self) {
        PIECES_DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

/// A context object whose `Drop` runs a whole scope of its App's, to its end.
struct Nester;
static NESTER_APP: std::sync::OnceLock<App> = std::sync::OnceLock::new();
const PIECES: usize = 40;

/// Asks for every `Piece` of the current scope.
fn touch_pieces(app: &App) {
    for i in 0..PIECES {
        app.get_object_named::<Piece>(&format!("piece{i}")).unwrap();
    }
}

impl Drop for Nester {
    fn drop(&mut self) {
        let app = NESTER_APP.get().unwrap();
        let nested = std::pin::pin!(app.run_in_context(async { touch_pieces(app) }));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(nested.poll(&mut cx).is_ready(), "a scope with no hook ends in one poll");
    }
}

#[tokio::test]
async fn a_scope_ended_inside_an_objects_drop_leaves_both_scopes_tables_whole() {
    // A large owned scope's table goes back to the thread's spares at its end, emptied entry by
    // entry; an object dropped meanwhile may run a scope of its own, whose table comes from
    // and goes back to the same spares. Three rounds: the tables are reused.
    let pieces = (0..PIECES).map(|i| ProtoDef::context::<Piece>(|_| Ok(Piece)).name(format!("piece{i}")));
    let app = App::builder()
        .without_inventory()
        .register_all(pieces)
        .register(ProtoDef::context::<Nester>(|_| Ok(Nester)))
        .build()
        .await
        .unwrap();
    let _ = NESTER_APP.set(app.clone());
    for round in 1..=3 {
        app.run_in_context(async {
            // The nester newest: dropped first, while this scope's table is being emptied.
            touch_pieces(&app);
            app.get_object::<Nester>().unwrap();
        })
        .await;
        // This scope's pieces, then the nested scope's, each dropped once.
        assert_eq!(PIECES_DROPPED.load(Ordering::SeqCst), 2 * PIECES * round, "round {round}");
    }
}

/// A context object that knows which proto of which App built it.
struct Tagged(usize, usize);

/// An App of `n` context protos of type `Tagged`, named `t0`..; `tag` identifies the App.
async fn tagged_app(tag: usize, n: usize) -> App {
    let defs = (0..n).map(|i| ProtoDef::context::<Tagged>(move |_| Ok(Tagged(tag, i))).name(format!("t{i}")));
    App::builder().without_inventory().register_all(defs).build().await.unwrap()
}

#[tokio::test]
async fn scopes_of_apps_with_graphs_of_other_sizes_share_a_threads_spare_tables() {
    // A table emptied by a scope of a 40-proto App, its index sized for that graph, is taken by
    // a scope of a 5000-proto App on the same thread (its keys past the index's end), and back:
    // each scope finds its own objects and no other's.
    let small = tagged_app(1, 40).await;
    let large = tagged_app(2, 5000).await;
    for round in 0..4 {
        for (app, tag, picks) in
            [(&small, 1, (0..40).collect::<Vec<_>>()), (&large, 2, (0..5000).step_by(50).collect())]
        {
            let seen = app
                .run_in_context(async {
                    // Twice each: the second is a lookup in the (reused) table.
                    let mut seen = Vec::new();
                    for _ in 0..2 {
                        for &i in &picks {
                            let obj = app.get_object_named::<Tagged>(&format!("t{i}")).unwrap();
                            seen.push((obj.0, obj.1));
                        }
                    }
                    seen
                })
                .await;
            let expected: Vec<_> = picks.iter().map(|&i| (tag, i)).chain(picks.iter().map(|&i| (tag, i))).collect();
            assert_eq!(seen, expected, "round {round}, app {tag}");
        }
    }
}

/// Takes a `Leaf` by value and, inside its own factory, reads it through a `ContextRef` and
/// starts a construction it did not declare by value (`Node`, through a `ContextRef`).
struct Top {
    leaf: Arc<Leaf>,
    node: Arc<Node>,
    leaf_seen_inside: usize,
}

#[tokio::test]
async fn a_construction_a_factory_starts_itself_is_built_once_and_seen_by_every_later_ask() {
    // An owned scope runs `Top`'s factory with its cache borrowed (the `Leaf` built ahead is
    // found there): the warm `with` inside it reads the cache, and the `Node` it builds itself
    // goes to the shared table. Both are the scope's one object of their proto, destroyed once.
    let counts = Arc::new(Counts::default());
    let d = counts.clone();
    let leaf = ProtoDef::context::<Leaf>({
        let c = counts.clone();
        move |_| Ok(Leaf(c.built.fetch_add(1, Ordering::SeqCst)))
    })
    .on_destroy(move |_: Arc<Leaf>| {
        let d = d.clone();
        async move {
            d.destroyed.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let top = ProtoDef::context::<Top>(|r| {
        let leaf = r.arc::<Leaf>(0)?;
        let leaf_seen_inside = r.context_ref::<Leaf>(1)?.with(|l| l.0);
        let node = r.context_ref::<Node>(2)?.try_get()?;
        Ok(Top { leaf, node, leaf_seen_inside })
    })
    .dep(Dependency::new::<Leaf>(InjectKind::Arc, None))
    .dep(Dependency::new::<Leaf>(InjectKind::ContextRef, None))
    .dep(Dependency::new::<Node>(InjectKind::ContextRef, None));
    let app = App::builder()
        .without_inventory()
        .register(leaf)
        .register(
            ProtoDef::context::<Node>(|r| Ok(Node(r.arc(0)?))).dep(Dependency::new::<Leaf>(InjectKind::Arc, None)),
        )
        .register(top)
        .build()
        .await
        .unwrap();
    for round in 0..3 {
        let (same, inside, leaf_id) = app
            .run_in_context(async {
                let top = app.get_object::<Top>().unwrap();
                let (node, leaf) = (app.get_object::<Node>().unwrap(), app.get_object::<Leaf>().unwrap());
                let same =
                    Arc::ptr_eq(&top.node, &node) && Arc::ptr_eq(&top.leaf, &leaf) && Arc::ptr_eq(&node.0, &leaf);
                (same, top.leaf_seen_inside, leaf.0)
            })
            .await;
        assert!(same, "round {round}: one object per proto in the scope");
        assert_eq!((inside, leaf_id), (round, round), "the factory's `with` saw the scope's leaf");
    }
    app.shutdown().await.unwrap();
    assert_eq!(counts.built.load(Ordering::SeqCst), 3, "one leaf per scope");
    assert_eq!(counts.destroyed.load(Ordering::SeqCst), 3, "each destroyed once");
}
