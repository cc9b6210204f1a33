//! A context object taking many context objects by value: they are built just before it, in
//! one pass that reserves their slots first. What that pass must not change: one object per
//! proto per scope, whoever else reaches a dependency meanwhile (its own siblings' factories,
//! other tasks), and a failing or panicking dependency leaves the others buildable.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::{
    App, ContextRef, DiError, ProtoDef,
    registry::{Dependency, InjectKind},
};

/// A dependency: its build number across the App's life.
struct Part(usize);

/// What takes the parts by value.
struct Whole(Vec<Arc<Part>>);

#[derive(Default)]
struct Builds(AtomicUsize);

impl Builds {
    fn next(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn part(i: usize) -> String {
    format!("part{i}")
}

/// `Part`s `part0..part{n}` (built by `make`) and a `Whole` taking them all by value, resolved
/// in the order `order` gives.
fn app_defs(
    n: usize,
    builds: &Arc<Builds>,
    make: impl Fn(usize, &tegu_core::Resolver<'_>) -> Result<(), DiError> + Send + Sync + Clone + 'static,
    order: fn(usize) -> Vec<usize>,
) -> Vec<ProtoDef> {
    let mut defs: Vec<ProtoDef> = (0..n)
        .map(|i| {
            let (builds, make) = (builds.clone(), make.clone());
            ProtoDef::context::<Part>(move |r| {
                make(i, r)?;
                Ok(Part(builds.next()))
            })
            .name(part(i))
        })
        .collect();
    let whole = ProtoDef::context::<Whole>(move |r| {
        let mut parts: Vec<Option<Arc<Part>>> = vec![None; n];
        for i in order(n) {
            parts[i] = Some(r.arc(i)?);
        }
        Ok(Whole(parts.into_iter().map(Option::unwrap).collect()))
    });
    defs.push((0..n).fold(whole, |def, i| def.dep(Dependency::named::<Part>(InjectKind::Arc, part(i)))));
    defs
}

async fn build(defs: Vec<ProtoDef>) -> App {
    App::builder().without_inventory().register_all(defs).build().await.unwrap()
}

fn in_order(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// Asserts that `whole` holds the scope's own objects, in declaration order.
fn assert_holds_the_scopes_parts(app: &App, whole: &Whole) {
    for (i, held) in whole.0.iter().enumerate() {
        let scopes = app.get_object_named::<Part>(&part(i)).unwrap();
        assert!(Arc::ptr_eq(held, &scopes), "part{i} of the whole is not the scope's part{i}");
    }
}

#[tokio::test]
async fn a_dependencys_factory_reaching_a_later_sibling_builds_it_once_and_the_whole_gets_it() {
    // part0's factory dereferences a ContextRef to part2, whose slot the whole's pass reserved
    // but has not built yet: part0 builds it, and the pass then finds it built.
    let builds = Arc::new(Builds::default());
    let seen: Arc<Mutex<Option<usize>>> = Arc::default();
    let mut defs = app_defs(3, &builds, |_, _| Ok(()), in_order);
    let seen_in = seen.clone();
    let builds_in = builds.clone();
    defs[0] = ProtoDef::context::<Part>(move |r| {
        let later: ContextRef<Part> = r.context_ref(0)?;
        *seen_in.lock().unwrap() = Some(later.get().0);
        Ok(Part(builds_in.next()))
    })
    .name(part(0))
    .dep(Dependency::named::<Part>(InjectKind::ContextRef, part(2)));
    let app = build(defs).await;

    app.run_in_context(async {
        let whole = app.get_object::<Whole>().unwrap();
        assert_holds_the_scopes_parts(&app, &whole);
        assert_eq!(Some(whole.0[2].0), *seen.lock().unwrap(), "part0 saw the whole's part2");
    })
    .await;
    assert_eq!(builds.count(), 3, "each part built once");
}

#[tokio::test]
async fn a_failing_dependency_fails_the_whole_and_leaves_the_other_parts_buildable() {
    let builds = Arc::new(Builds::default());
    let fail = |i: usize, r: &tegu_core::Resolver<'_>| match i {
        1 => Err(r.construction_error("part1 is down")),
        _ => Ok(()),
    };
    let app = build(app_defs(4, &builds, fail, in_order)).await;

    app.run_in_context(async {
        let error = app.get_object::<Whole>().err().expect("part1 fails the whole");
        assert!(error.to_string().contains("part1 is down"), "{error}");
        // Built before the failure: kept. Reserved after it: vacant, built on demand.
        assert_eq!(app.get_object_named::<Part>(&part(0)).unwrap().0, 0);
        assert_eq!(builds.count(), 1, "part2 and part3 were not built");
        let later = app.get_object_named::<Part>(&part(3)).unwrap();
        assert_eq!(later.0, 1);
        // The failure is the scope's answer for the whole and for part1, every time.
        assert!(app.get_object::<Whole>().is_err());
        assert!(app.get_object_named::<Part>(&part(1)).is_err());
        assert_eq!(builds.count(), 2);
    })
    .await;
}

#[tokio::test]
async fn a_panicking_dependency_frees_the_slots_its_pass_reserved() {
    let builds = Arc::new(Builds::default());
    let panicked = Arc::new(AtomicBool::new(false));
    let once = panicked.clone();
    let panic_once = move |i: usize, _: &tegu_core::Resolver<'_>| {
        if i == 2 && !once.swap(true, Ordering::SeqCst) {
            panic!("part2 panics once");
        }
        Ok(())
    };
    let app = build(app_defs(4, &builds, panic_once, in_order)).await;

    app.run_in_context(async {
        let first = std::panic::catch_unwind(AssertUnwindSafe(|| app.get_object::<Whole>()));
        assert!(first.is_err(), "the panic reaches the asker");
        assert!(panicked.load(Ordering::SeqCst));
        // Nobody waits for a construction that is gone: asked again, it is built.
        let whole = app.get_object::<Whole>().unwrap();
        assert_holds_the_scopes_parts(&app, &whole);
    })
    .await;
    // part0 and part1 were built once (kept from the first pass), part2 and part3 once after.
    assert_eq!(builds.count(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parts_raced_by_other_tasks_are_built_once_per_scope() {
    const PARTS: usize = 40;
    let builds = Arc::new(Builds::default());
    let yield_a_little = |i: usize, _: &tegu_core::Resolver<'_>| {
        if i.is_multiple_of(7) {
            std::thread::yield_now();
        }
        Ok(())
    };
    let app = build(app_defs(PARTS, &builds, yield_a_little, in_order)).await;
    for round in 0..100 {
        let before = builds.count();
        let scope = app.clone();
        app.run_in_context(async move {
            let mut tasks = Vec::new();
            for t in 0..4 {
                let app = scope.clone();
                tasks.push(tegu_core::spawn(async move {
                    if t % 2 == 0 {
                        let whole = app.get_object::<Whole>().unwrap();
                        assert_holds_the_scopes_parts(&app, &whole);
                    } else {
                        // Backwards, against the whole's pass.
                        for i in (0..PARTS).rev() {
                            app.get_object_named::<Part>(&part(i)).unwrap();
                        }
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
        })
        .await;
        assert_eq!(builds.count() - before, PARTS, "round {round}: each part once");
    }
}

#[tokio::test]
async fn a_large_whole_resolving_out_of_order_gets_the_scopes_objects() {
    // 300 parts: the scope's table grows past its linear range; the second scope starts from
    // the first one's size (a dense index). The whole asks for its parts backwards, so that
    // they are not where the pass put them.
    let builds = Arc::new(Builds::default());
    let backwards = |n: usize| (0..n).rev().collect();
    let app = build(app_defs(300, &builds, |_, _| Ok(()), backwards)).await;
    for scope in 0..3 {
        app.run_in_context(async {
            let whole = app.get_object::<Whole>().unwrap();
            assert_holds_the_scopes_parts(&app, &whole);
            let first = whole.0[0].0;
            assert!(whole.0.iter().enumerate().all(|(i, p)| p.0 == first + i), "scope {scope}: built in order");
        })
        .await;
    }
    assert_eq!(builds.count(), 900);
}
