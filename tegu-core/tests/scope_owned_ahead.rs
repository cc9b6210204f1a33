//! A scope owned by its task builds a proto's by-value context dependencies ahead of it, one
//! after the other in one frame of its construction stack. Whatever
//! the k-th of them does (panics, fails, shares the scope, asks for the proto being built), the
//! ones before it stay built once, the later ones are built once, the cycle is named through
//! the right dependency, and every object is destroyed once.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tegu_core::{
    App, ContextRef, DiError, ProtoDef,
    registry::{Dependency, InjectKind},
};

/// A context object with no dependency of its own: which leaf it is, and its build number.
struct Leaf<const I: usize>(usize);

/// Takes the three leaves by value.
struct Multi {
    a: Arc<Leaf<0>>,
    b: Arc<Leaf<1>>,
    c: Arc<Leaf<2>>,
}

#[derive(Default)]
struct Counts {
    built: [AtomicUsize; 3],
    destroyed: [AtomicUsize; 3],
}

/// What leaf `I`'s factory does before it returns: given its try number (0 first).
type Hook = dyn Fn(usize) -> Result<(), DiError> + Send + Sync;

fn leaf<const I: usize>(counts: &Arc<Counts>, hook: Option<Arc<Hook>>) -> ProtoDef {
    let (c, d, tries) = (counts.clone(), counts.clone(), Arc::new(AtomicUsize::new(0)));
    ProtoDef::context::<Leaf<I>>(move |_| {
        if let Some(hook) = &hook {
            hook(tries.fetch_add(1, Ordering::SeqCst))?;
        }
        Ok(Leaf(c.built[I].fetch_add(1, Ordering::SeqCst)))
    })
    .on_destroy(move |_: Arc<Leaf<I>>| {
        let d = d.clone();
        async move {
            d.destroyed[I].fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    })
}

/// `Multi`, taking the three leaves by value.
fn multi() -> ProtoDef {
    ProtoDef::context::<Multi>(|r| Ok(Multi { a: r.arc(0)?, b: r.arc(1)?, c: r.arc(2)? }))
        .dep(Dependency::new::<Leaf<0>>(InjectKind::Arc, None))
        .dep(Dependency::new::<Leaf<1>>(InjectKind::Arc, None))
        .dep(Dependency::new::<Leaf<2>>(InjectKind::Arc, None))
}

/// An App of `Multi` and its three leaves, the middle one (`Leaf<1>`) running `hook`.
async fn app(counts: &Arc<Counts>, hook: Arc<Hook>) -> App {
    App::builder()
        .without_inventory()
        .register(leaf::<0>(counts, None))
        .register(leaf::<1>(counts, Some(hook)))
        .register(leaf::<2>(counts, None))
        .register(multi())
        .build()
        .await
        .unwrap()
}

/// Whether `multi`'s leaves are the scope's own (asked for again, they are the same objects).
fn leaves_are_the_scopes(app: &App, multi: &Multi) -> bool {
    Arc::ptr_eq(&multi.a, &app.get_object::<Leaf<0>>().unwrap())
        && Arc::ptr_eq(&multi.b, &app.get_object::<Leaf<1>>().unwrap())
        && Arc::ptr_eq(&multi.c, &app.get_object::<Leaf<2>>().unwrap())
}

/// Shuts `app` down and checks that each leaf was built `built[i]` times and destroyed as often.
async fn each_destroyed_once(app: App, counts: &Counts, built: [usize; 3]) {
    app.shutdown().await.unwrap();
    let load = |a: &[AtomicUsize; 3]| a.each_ref().map(|n| n.load(Ordering::SeqCst));
    assert_eq!(load(&counts.built), built, "built");
    assert_eq!(load(&counts.destroyed), built, "destroyed once each");
}

#[tokio::test]
async fn a_dependency_that_panics_midway_leaves_the_earlier_built_once_and_all_buildable() {
    let counts = Arc::new(Counts::default());
    let app = app(
        &counts,
        Arc::new(|tries| match tries {
            0 => panic!("the middle leaf's first try fails"),
            _ => Ok(()),
        }),
    )
    .await;
    let (panicked, same, first_kept, middle) = app
        .run_in_context(async {
            let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| app.get_object::<Multi>())).is_err();
            // The first leaf was built before the panic, and is the scope's: not built again.
            let first = app.get_object::<Leaf<0>>().unwrap();
            let multi = app.get_object::<Multi>().unwrap();
            (panicked, leaves_are_the_scopes(&app, &multi), Arc::ptr_eq(&first, &multi.a), multi.b.0)
        })
        .await;
    assert!(panicked && same && first_kept);
    assert_eq!(middle, 0, "the middle leaf's first build, on its second try");
    // The stack of constructions is whole again: a second scope on this thread builds as new.
    let again = app.run_in_context(async { leaves_are_the_scopes(&app, &app.get_object::<Multi>().unwrap()) }).await;
    assert!(again);
    each_destroyed_once(app, &counts, [2, 2, 2]).await;
}

#[tokio::test]
async fn a_dependency_that_fails_midway_fails_the_proto_for_every_later_ask() {
    let counts = Arc::new(Counts::default());
    let app = app(&counts, Arc::new(|_| Err(DiError::NotBuilt { wanted: "the middle leaf's store" }))).await;
    let (first, second, third_buildable) = app
        .run_in_context(async {
            let first = app.get_object::<Multi>().map(|_| ()).unwrap_err();
            let second = app.get_object::<Multi>().map(|_| ()).unwrap_err();
            (first, second, app.get_object::<Leaf<2>>().is_ok())
        })
        .await;
    for e in [&first, &second] {
        assert!(e.to_string().contains("the middle leaf's store"), "{e}");
    }
    assert!(third_buildable, "a leaf after the failed one is built on its own ask");
    each_destroyed_once(app, &counts, [1, 0, 1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_that_shares_the_scope_midway_leaves_one_object_per_proto_for_every_task() {
    let counts = Arc::new(Counts::default());
    let cell = Arc::new(OnceLock::<App>::new());
    let task: Arc<Mutex<Option<tokio::task::JoinHandle<Arc<Multi>>>>> = Arc::default();
    let (c, t) = (cell.clone(), task.clone());
    let app = app(
        &counts,
        Arc::new(move |tries| {
            // Shares the scope while the middle leaf is being built; the other task asks for
            // `Multi` meanwhile and must wait for this construction, not start its own.
            if tries == 0 {
                let app = c.get().unwrap().clone();
                *t.lock().unwrap() = Some(tegu_core::spawn(async move { app.get_object::<Multi>().unwrap() }));
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        }),
    )
    .await;
    cell.set(app.clone()).ok();
    let (same_for_both, leaves_same) = app
        .run_in_context(async {
            let mine = app.get_object::<Multi>().unwrap();
            let other = task.lock().unwrap().take().expect("the middle leaf spawned a task");
            let theirs = tokio::time::timeout(Duration::from_secs(10), other).await.expect("no hang").unwrap();
            (Arc::ptr_eq(&mine, &theirs), leaves_are_the_scopes(&app, &mine))
        })
        .await;
    assert!(same_for_both && leaves_same);
    each_destroyed_once(app, &counts, [1, 1, 1]).await;
}

/// A singleton reaching `Multi` through a proxy, for a leaf's factory to ask it.
struct Holder(ContextRef<Multi>);

#[tokio::test]
async fn a_dependency_that_asks_for_the_proto_being_built_is_a_cycle_named_through_it() {
    let counts = Arc::new(Counts::default());
    let holder: Arc<OnceLock<Arc<Holder>>> = Arc::default();
    let h = holder.clone();
    let app = App::builder()
        .without_inventory()
        .register(leaf::<0>(&counts, None))
        .register(leaf::<1>(&counts, Some(Arc::new(move |_| h.get().unwrap().0.try_get().map(drop)))))
        .register(leaf::<2>(&counts, None))
        .register(multi())
        .register(
            ProtoDef::singleton::<Holder>(|r| Ok(Holder(r.context_ref(0)?)))
                .dep(Dependency::new::<Multi>(InjectKind::ContextRef, None)),
        )
        .build()
        .await
        .unwrap();
    holder.set(app.get_object::<Holder>().unwrap()).ok();
    let result = app.run_in_context(async { app.get_object::<Multi>().map(drop) }).await;
    match result {
        Err(DiError::EagerCycle { chain }) => {
            assert_eq!(chain.len(), 3, "{chain:?}");
            assert!(
                chain[0].contains("Multi") && chain[1].contains("Leaf<1>") && chain[2].contains("Multi"),
                "{chain:?}"
            );
        }
        other => panic!("expected the cycle through the middle leaf, got {other:?}"),
    }
    each_destroyed_once(app, &counts, [1, 0, 0]).await;
}
