//! The edges of a scope's life: objects first created after the completion phase began (by a
//! background task, a completion hook, a destroy hook, a construction straddling the phase's
//! end), scopes held open past their work, work the App's shutdown waits for, and `Drop`s that
//! panic.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{App, DiError, ProtoDef};
use tegu_test_support::child_env::in_child;

/// What happened, in order.
use tegu_test_support::Lines as Log;

/// A unit of work: a completion hook (commit) and a destroy hook (roll back), both logged.
#[derive(Debug, Default)]
struct Uow;
/// Another object with a completion hook.
#[derive(Debug, Default)]
struct Audit;
/// An object with a destroy hook only.
#[derive(Debug, Default)]
struct Tracer;

fn uow(log: &Log) -> ProtoDef {
    uow_built_by(log, || Ok(Uow))
}

/// A unit of work whose factory is `build`.
fn uow_built_by(log: &Log, build: impl Fn() -> Result<Uow, DiError> + Send + Sync + 'static) -> ProtoDef {
    let (on_complete, on_destroy) = (log.clone(), log.clone());
    ProtoDef::context::<Uow>(move |_| build())
        .on_complete(move |_: Arc<Uow>| {
            on_complete.push("complete uow");
            async { Ok(()) }
        })
        .on_destroy(move |_: Arc<Uow>| {
            on_destroy.push("destroy uow");
            async { Ok(()) }
        })
}

fn tracer(log: &Log) -> ProtoDef {
    let log = log.clone();
    ProtoDef::context::<Tracer>(|_| Ok(Tracer)).on_destroy(move |_: Arc<Tracer>| {
        log.push("destroy tracer");
        async { Ok(()) }
    })
}

async fn app(defs: impl IntoIterator<Item = ProtoDef>) -> App {
    App::builder().without_inventory().register_all(defs).build().await.unwrap()
}

fn is_late(result: &Result<Arc<impl Sized>, DiError>) -> bool {
    matches!(result, Err(DiError::LateCompletion { wanted }) if wanted.ends_with("Uow"))
}

/// The guide's pattern, a handler that answers at once and leaves the work to a task, when the
/// task is the first to touch the unit of work: created then, it would never commit, and its
/// write would be rolled back after being acknowledged. It is refused instead.
#[tokio::test]
async fn an_object_with_a_completion_hook_first_touched_after_the_phase_is_refused() {
    let log = Log::default();
    let app = app([uow(&log), tracer(&log)]).await;
    let (go, wait) = tokio::sync::oneshot::channel::<()>();
    let (answer, answered) = tokio::sync::oneshot::channel();
    let background = app.clone();
    app.run_in_context(async move {
        tegu_core::spawn(async move {
            wait.await.unwrap();
            let uow = background.get_object::<Uow>();
            let tracer = background.get_object::<Tracer>(); // no completion hook: fine
            answer.send((uow.map(drop), tracer.is_ok())).ok();
        });
        "202 accepted"
    })
    .end_in_background()
    .await;
    go.send(()).unwrap(); // the task runs after the phase
    let (uow, tracer_ok) = answered.await.unwrap();
    let uow = uow.map(|()| Arc::new(()));
    assert!(is_late(&uow), "{uow:?}");
    let message = uow.unwrap_err().to_string();
    assert!(message.contains("completion phase is over") && message.contains("Uow"), "{message}");
    assert!(tracer_ok);
    app.shutdown().await.unwrap();
    assert_eq!(log.lines(), ["destroy tracer"], "the unit of work was never created");
}

/// A completion hook that needs another object with a completion hook: the new object is
/// completed in a further pass, after the pass that created it.
#[tokio::test]
async fn an_object_created_by_a_completion_hook_is_completed_in_a_further_pass() {
    let log = Log::default();
    let app_cell = Arc::new(std::sync::OnceLock::<App>::new());
    let (cell, audit_log) = (app_cell.clone(), log.clone());
    let audit = ProtoDef::context::<Audit>(|_| Ok(Audit)).on_complete(move |_: Arc<Audit>| {
        audit_log.push("complete audit");
        // The audit's completion writes through the unit of work, created only now.
        let created = cell.get().unwrap().get_object::<Uow>().is_ok();
        audit_log.push(format!("audit created the uow: {created}"));
        async { Ok(()) }
    });
    let app = app([uow(&log), audit]).await;
    app_cell.set(app.clone()).ok();
    let result = app.try_run_in_context(async { app.get_object::<Audit>().map(drop) }).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(log.lines(), ["complete audit", "audit created the uow: true", "complete uow", "destroy uow"]);
}

/// A destroy hook runs after the phase: an object with a completion hook created there would
/// be destroyed uncompleted, so it is refused; one without is built as before.
#[tokio::test]
async fn an_object_with_a_completion_hook_asked_for_by_a_destroy_hook_is_refused() {
    let log = Log::default();
    let app_cell = Arc::new(std::sync::OnceLock::<App>::new());
    let (cell, destroy_log) = (app_cell.clone(), log.clone());
    let audit = ProtoDef::context::<Audit>(|_| Ok(Audit)).on_destroy(move |_: Arc<Audit>| {
        let app = cell.get().unwrap();
        let late = app.get_object::<Uow>();
        destroy_log.push(format!("uow refused: {}", is_late(&late)));
        destroy_log.push(format!("tracer built: {}", app.get_object::<Tracer>().is_ok()));
        async { Ok(()) }
    });
    let app = app([uow(&log), tracer(&log), audit]).await;
    app_cell.set(app.clone()).ok();
    app.run_in_context(async { app.get_object::<Audit>().map(drop) }).await.unwrap();
    assert_eq!(log.lines(), ["uow refused: true", "tracer built: true", "destroy tracer"]);
}

/// A construction claimed before the phase ended and finished after it: the object is not
/// handed out (nothing would complete it), and it is still destroyed with the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_construction_that_straddles_the_end_of_the_phase_is_refused_and_destroyed() {
    let log = Log::default();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (finish_tx, finish_rx) = std::sync::mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new((started_tx, finish_rx)));
    let slow = uow_built_by(&log, move || {
        let gate = gate.lock().unwrap();
        gate.0.send(()).unwrap();
        gate.1.recv().unwrap(); // until the phase is over
        Ok(Uow)
    });
    let app = app([slow]).await;
    let in_task = app.clone();
    let (result_tx, result_rx) = tokio::sync::oneshot::channel();
    app.run_in_context(async move {
        tegu_core::scope::spawn_blocking(move || result_tx.send(in_task.get_object::<Uow>().map(drop)));
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap()).await.unwrap(); // claimed
    })
    .end_in_background()
    .await;
    finish_tx.send(()).unwrap();
    let result = result_rx.await.unwrap().map(|()| Arc::new(()));
    assert!(is_late(&result), "{result:?}");
    app.shutdown().await.unwrap();
    assert_eq!(log.lines(), ["destroy uow"], "destroyed, never completed");
}

/// A completion phase run from inside and dropped half-way (a timeout around it) is not cut
/// where it stood: it finishes on a task of its own, and an object with a completion hook
/// created afterwards is completed by it, not left uncompleted (nor refused).
#[tokio::test(start_paused = true)]
async fn a_completion_phase_dropped_half_way_finishes_and_completes_later_objects() {
    let log = Log::default();
    let slow = ProtoDef::context::<Audit>(|_| Ok(Audit)).on_complete(|_: Arc<Audit>| async {
        tokio::time::sleep(Duration::from_secs(3)).await; // within the background-task timeout (5 s)
        Ok(())
    });
    let app = app([slow, uow(&log)]).await;
    let late = app
        .run_in_context(async {
            app.get_object::<Audit>().unwrap();
            let phase = tokio::time::timeout(Duration::from_secs(1), tegu_core::scope::complete_scope()).await;
            assert!(phase.is_err(), "the slow hook outlasted the timeout");
            app.get_object::<Uow>()
        })
        .await;
    assert!(late.is_ok(), "{late:?}");
    app.shutdown().await.unwrap();
    assert_eq!(log.lines(), ["complete uow", "destroy uow"]);
}

/// A hold keeps the scope open past its work for as long as it lives, far past the
/// background-task timeout; code entered through it sees the scope's objects; the scope's
/// end (and the App's count of it) waits for it.
#[tokio::test(start_paused = true)]
async fn a_held_scope_ends_when_its_hold_is_dropped() {
    let log = Log::default();
    let app = App::builder()
        .without_inventory()
        .register_all([uow(&log), tracer(&log)])
        .background_task_timeout(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let (tracer, mut hold) = app
        .run_in_context(async { (app.get_object::<Tracer>().unwrap(), tegu_core::scope::hold_scope().unwrap()) })
        .await; // awaited, not in the background: a held scope ends on a task of its own
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(app.scopes_ending(), 1);
    assert!(log.lines().is_empty(), "destroyed under a hold: {:?}", log.lines());
    let same = hold.enter(|| Arc::ptr_eq(&app.get_object::<Tracer>().unwrap(), &tracer));
    assert!(same);
    // The completion phase is over: the hold cannot create a unit of work.
    let late = hold.enter(|| app.get_object::<Uow>());
    assert!(is_late(&late), "{late:?}");
    assert!(!tegu_core::scope::in_scope());
    drop(hold);
    app.shutdown().await.unwrap();
    assert_eq!(log.lines(), ["destroy tracer"]);
}

/// Once the destroy hooks run, a hold could not keep the objects alive: none is given.
#[tokio::test]
async fn no_hold_is_given_once_the_destroy_hooks_have_begun() {
    let log = Log::default();
    let hook_log = log.clone();
    let probe = ProtoDef::context::<Tracer>(|_| Ok(Tracer)).on_destroy(move |_: Arc<Tracer>| {
        hook_log.push(format!("hold in destroy: {}", tegu_core::scope::hold_scope().is_some()));
        async { Ok(()) }
    });
    let app = app([probe]).await;
    app.run_in_context(async { app.get_object::<Tracer>().map(drop) }).await.unwrap();
    assert_eq!(log.lines(), ["hold in destroy: false"]);
    assert!(tegu_core::scope::hold_scope().is_none(), "outside a scope");
}

/// A background task that takes a hold while the scope waits for its tasks: the end waits for
/// the hold too before destroying. (Paused time: the clock moves past the sleep below only
/// once every task is idle, so the scope's end has gone as far as it can.)
#[tokio::test(start_paused = true)]
async fn a_hold_taken_by_a_background_task_is_waited_for() {
    let log = Log::default();
    let app = app([tracer(&log)]).await;
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let in_task = app.clone();
    app.run_in_context(async move {
        in_task.get_object::<Tracer>().unwrap();
        tegu_core::spawn(async move {
            let hold = tegu_core::scope::hold_scope().unwrap();
            tokio::spawn(async move {
                released.await.ok();
                drop(hold);
            });
        });
    })
    .end_in_background()
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(log.lines().is_empty(), "destroyed under a hold");
    assert_eq!(app.scopes_ending(), 1, "the scope's end waits for the hold");
    release.send(()).unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(log.lines(), ["destroy tracer"]);
}

/// `App::hold`: shutdown waits for the work before destroying a singleton, up to its deadline.
#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_an_app_hold_up_to_its_deadline() {
    let log = Log::default();
    let hook_log = log.clone();
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Audit>(|_| Ok(Audit)).on_destroy(move |_: Arc<Audit>| {
            hook_log.push("destroy audit");
            async { Ok(()) }
        }))
        .drain_scopes_timeout(Duration::from_secs(3))
        .build()
        .await
        .unwrap();
    let hold = app.hold().unwrap();
    let started = tokio::time::Instant::now();
    let shutdown = tokio::spawn({
        let app = app.clone();
        async move { app.shutdown().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(log.lines().is_empty(), "destroyed while held");
    shutdown.await.unwrap().unwrap(); // the deadline passes with the hold alive
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(log.lines(), ["destroy audit"]);
    assert!(app.hold().is_none());
    drop(hold);
}

static DROPS: AtomicUsize = AtomicUsize::new(0);

macro_rules! panicking_drop {
    ($($ty:ident),*) => {$(
        #[derive(Default)]
        struct $ty;
        impl Drop for $ty {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::SeqCst);
                panic!(concat!(stringify!($ty), " panicked in drop"));
            }
        }
    )*};
}
panicking_drop!(First, Second, Third, FirstSingleton, SecondSingleton, ThirdSingleton);

/// Three context objects and three singletons whose `Drop` panics: each is dropped on its own
/// (all six drops run), and the process lives on (a second panic while the first unwinds would
/// abort it: hence a child process).
#[test]
fn objects_whose_drop_panics_are_dropped_one_at_a_time() {
    if !in_child("objects_whose_drop_panics_are_dropped_one_at_a_time", &[]) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let app = App::builder()
            .without_inventory()
            .register_all([
                ProtoDef::context::<First>(|_| Ok(First)),
                ProtoDef::context::<Second>(|_| Ok(Second)),
                ProtoDef::context::<Third>(|_| Ok(Third)),
                ProtoDef::singleton::<FirstSingleton>(|_| Ok(FirstSingleton)),
                ProtoDef::singleton::<SecondSingleton>(|_| Ok(SecondSingleton)),
                ProtoDef::singleton::<ThirdSingleton>(|_| Ok(ThirdSingleton)),
            ])
            .build()
            .await
            .unwrap();
        app.run_in_context(async {
            app.get_object::<First>().unwrap();
            app.get_object::<Second>().unwrap();
            app.get_object::<Third>().unwrap();
        })
        .await;
        assert_eq!(DROPS.load(Ordering::SeqCst), 3, "each context object dropped");
        app.shutdown().await.unwrap();
        drop(app);
        assert_eq!(DROPS.load(Ordering::SeqCst), 6, "each singleton dropped");
    });
}
