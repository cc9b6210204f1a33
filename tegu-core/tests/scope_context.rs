//! Context scopes and `ContextRef`: isolation between concurrent scopes, exactly-once creation,
//! destruction exactly once (also for cancelled and panicking scopes), background tasks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{
    App, ContextRef, DiError, ProtoDef,
    error::BoxError,
    registry::{Dependency, InjectKind},
};

/// Per-request state written and read back by a singleton.
#[derive(Debug, Default)]
struct RequestState {
    value: Mutex<Option<u64>>,
}

/// A singleton that reaches the current request's state.
struct Handler {
    state: ContextRef<RequestState>,
}

#[derive(Default)]
struct Counters {
    created: AtomicUsize,
    destroyed: AtomicUsize,
}

impl Counters {
    fn created(&self) -> usize {
        self.created.load(Ordering::SeqCst)
    }
    fn destroyed(&self) -> usize {
        self.destroyed.load(Ordering::SeqCst)
    }
}

fn context_ref<T: 'static>() -> Dependency {
    Dependency::new::<T>(InjectKind::ContextRef, None)
}

/// An App with `RequestState` (counted, optionally slow to build) and `Handler`.
async fn app_with(counters: &Arc<Counters>, build_delay: Duration, timeout: Duration) -> App {
    let (c1, c2) = (counters.clone(), counters.clone());
    App::builder()
        .without_inventory()
        .background_task_timeout(timeout)
        .register(
            ProtoDef::context::<RequestState>(move |_| {
                c1.created.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(build_delay); // widens the window of a creation race
                Ok(RequestState::default())
            })
            .on_destroy(move |_: Arc<RequestState>| {
                let c = c2.clone();
                async move {
                    c.destroyed.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
            }),
        )
        .register(
            ProtoDef::singleton::<Handler>(|r| Ok(Handler { state: r.context_ref(0)? }))
                .dep(context_ref::<RequestState>()),
        )
        .build()
        .await
        .unwrap()
}

async fn app(counters: &Arc<Counters>) -> App {
    app_with(counters, Duration::ZERO, Duration::from_secs(5)).await
}

/// Waits (up to 5 s) until `done` holds; clean-up of a cancelled scope runs on a spawned task.
async fn eventually(done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached within 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_of_2000_concurrent_scopes_sees_only_its_own_object() {
    let counters = Arc::new(Counters::default());
    let app = app(&counters).await;
    let handler = app.get_object::<Handler>().unwrap();
    let tasks: Vec<_> = (0..2000u64)
        .map(|i| {
            let (app, handler) = (app.clone(), handler.clone());
            tokio::spawn(async move {
                app.run_in_context(async move {
                    *handler.state.get().value.lock().unwrap() = Some(i);
                    for step in 0..3 {
                        if (i + step) % 2 == 0 {
                            tokio::task::yield_now().await;
                        } else {
                            tokio::time::sleep(Duration::from_micros(100 * (i % 7))).await;
                        }
                    }
                    *handler.state.get().value.lock().unwrap()
                })
                .await
                    == Some(i)
            })
        })
        .collect();
    let mut mixups = 0;
    for task in tasks {
        mixups += usize::from(!task.await.unwrap());
    }
    assert_eq!(mixups, 0);
    assert_eq!(counters.created(), 2000);
    assert_eq!(counters.destroyed(), 2000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn context_object_is_created_exactly_once_under_a_race_of_spawned_tasks() {
    let counters = Arc::new(Counters::default());
    let app = app_with(&counters, Duration::from_millis(20), Duration::from_secs(5)).await;
    let handler = app.get_object::<Handler>().unwrap();
    let all_same = app
        .run_in_context(async {
            let start = Arc::new(tokio::sync::Barrier::new(16));
            let tasks: Vec<_> = (0..16)
                .map(|_| {
                    let (handler, start) = (handler.clone(), start.clone());
                    tegu_core::spawn(async move {
                        start.wait().await;
                        handler.state.get()
                    })
                })
                .collect();
            let mut objects = Vec::new();
            for t in tasks {
                objects.push(t.await.unwrap());
            }
            objects.iter().all(|o| Arc::ptr_eq(o, &objects[0])) && Arc::ptr_eq(&objects[0], &handler.state.get())
        })
        .await;
    assert!(all_same);
    assert_eq!(counters.created(), 1);
    assert_eq!(counters.destroyed(), 1);
}

#[tokio::test]
async fn objects_are_destroyed_before_run_in_context_returns() {
    let counters = Arc::new(Counters::default());
    let app = app(&counters).await;
    let handler = app.get_object::<Handler>().unwrap();
    app.run_in_context(async {
        handler.state.get();
        handler.state.get();
        assert_eq!(counters.destroyed(), 0);
    })
    .await;
    assert_eq!((counters.created(), counters.destroyed()), (1, 1));
}

#[tokio::test]
async fn untouched_context_objects_are_never_built() {
    let counters = Arc::new(Counters::default());
    let app = app(&counters).await;
    app.run_in_context(async {}).await;
    assert_eq!((counters.created(), counters.destroyed()), (0, 0));
}

#[tokio::test]
async fn cancelled_scope_destroys_its_objects_exactly_once() {
    let counters = Arc::new(Counters::default());
    let app = app(&counters).await;
    let handler = app.get_object::<Handler>().unwrap();
    let scope = app.run_in_context(async {
        handler.state.get();
        std::future::pending::<()>().await;
    });
    assert!(tokio::time::timeout(Duration::from_millis(20), scope).await.is_err());
    // The cancelled scope ends on a task the App tracks: once shutdown has waited for it, no
    // destroy hook can run again.
    app.shutdown().await.unwrap();
    assert_eq!((counters.created(), counters.destroyed()), (1, 1));
}

#[tokio::test]
async fn panicking_scope_destroys_its_objects_exactly_once_and_others_go_on() {
    let counters = Arc::new(Counters::default());
    let app = app(&counters).await;
    let handler = app.get_object::<Handler>().unwrap();
    let (app2, handler2) = (app.clone(), handler.clone());
    let crashed = tokio::spawn(async move {
        app2.run_in_context(async move {
            handler2.state.get();
            panic!("handler bug");
        })
        .await
    })
    .await;
    assert!(crashed.unwrap_err().is_panic());
    eventually(|| counters.destroyed() == 1).await;
    let ok = app.run_in_context(async { handler.state.get().value.lock().unwrap().is_none() }).await;
    assert!(ok);
    assert_eq!((counters.created(), counters.destroyed()), (2, 2));
}

#[tokio::test]
async fn panicking_background_task_does_not_hold_the_scope() {
    let counters = Arc::new(Counters::default());
    let app = app_with(&counters, Duration::ZERO, Duration::from_secs(30)).await;
    let handler = app.get_object::<Handler>().unwrap();
    let scope = app.run_in_context(async {
        handler.state.get();
        tegu_core::spawn(async { panic!("background bug") });
    });
    tokio::time::timeout(Duration::from_secs(5), scope).await.expect("scope waited for a panicked task");
    assert_eq!(counters.destroyed(), 1);
}

#[test]
fn get_outside_a_scope_panics_naming_the_type_and_the_fix() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let app = rt.block_on(app(&Arc::new(Counters::default())));
    let handler = app.get_object::<Handler>().unwrap();
    let panic = std::panic::catch_unwind(|| handler.state.get()).unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.contains("no context scope is active, so there is no `scope_context::RequestState`"), "{msg}");
    assert!(msg.contains("app.run_in_context"), "{msg}");
}

#[tokio::test]
async fn try_get_outside_a_scope_returns_no_scope() {
    let app = app(&Arc::new(Counters::default())).await;
    let handler = app.get_object::<Handler>().unwrap();
    let err = handler.state.try_get().unwrap_err();
    assert!(matches!(err, DiError::NoScope { wanted } if wanted == "scope_context::RequestState"));
    assert!(handler.state.try_with(|_| ()).is_err());
    assert!(matches!(app.get_object::<RequestState>(), Err(DiError::NoScope { .. })));
}

#[tokio::test]
async fn tokio_spawn_does_not_carry_the_scope_but_tegu_core_spawn_does() {
    let app = app(&Arc::new(Counters::default())).await;
    let handler = app.get_object::<Handler>().unwrap();
    let (plain, carried) = app
        .run_in_context(async {
            let mine = handler.state.get();
            let h1 = handler.clone();
            let plain = tokio::spawn(async move { h1.state.try_get().is_err() }).await.unwrap();
            let h2 = handler.clone();
            let theirs = tegu_core::spawn(async move { h2.state.get() }).await.unwrap();
            (plain, Arc::ptr_eq(&mine, &theirs))
        })
        .await;
    assert!(plain, "tokio::spawn must not see the scope");
    assert!(carried, "tegu_core::spawn must see the same scope");
}

#[tokio::test]
async fn spawn_blocking_sees_the_scope() {
    let app = app(&Arc::new(Counters::default())).await;
    let handler = app.get_object::<Handler>().unwrap();
    let same = app
        .run_in_context(async {
            let mine = handler.state.get();
            let h = handler.clone();
            let theirs = tegu_core::scope::spawn_blocking(move || h.state.get()).await.unwrap();
            Arc::ptr_eq(&mine, &theirs)
        })
        .await;
    assert!(same);
}

#[tokio::test]
async fn background_task_keeps_the_scope_alive_until_it_finishes() {
    let counters = Arc::new(Counters::default());
    let app = app(&counters).await;
    let handler = app.get_object::<Handler>().unwrap();
    let seen_destroyed = Arc::new(Mutex::new(None));
    let seen = seen_destroyed.clone();
    app.run_in_context(async {
        let (h, c) = (handler.clone(), counters.clone());
        tegu_core::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            *h.state.get().value.lock().unwrap() = Some(1);
            *seen.lock().unwrap() = Some(c.destroyed());
        });
    })
    .await;
    assert_eq!(*seen_destroyed.lock().unwrap(), Some(0), "the task ran before the scope was destroyed");
    assert_eq!(counters.destroyed(), 1);
}

#[tokio::test(start_paused = true)]
async fn background_task_timeout_bounds_the_wait_and_closes_the_scope() {
    let counters = Arc::new(Counters::default());
    let app = app_with(&counters, Duration::ZERO, Duration::from_millis(50)).await;
    let handler = app.get_object::<Handler>().unwrap();
    let started = tokio::time::Instant::now();
    #[allow(clippy::async_yields_async)] // the scope hands its background task back on purpose
    let late = app
        .run_in_context(async {
            handler.state.get();
            let h = handler.clone();
            tegu_core::spawn(async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                h.state.try_get().map(|_| ())
            })
        })
        .await;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(50) && waited < Duration::from_secs(60), "{waited:?}");
    assert_eq!(counters.destroyed(), 1);
    // The task still holds the scope, which is closed: it cannot create objects any more...
    assert!(matches!(late.await.unwrap(), Err(DiError::ScopeClosed { .. })));
}

#[tokio::test]
async fn destroy_hooks_run_in_reverse_creation_order() {
    let log = Arc::new(Mutex::new(Vec::new()));
    struct First;
    struct Second;
    struct Third;
    fn logged<T: Send + Sync + 'static>(
        log: &Arc<Mutex<Vec<&'static str>>>,
        tag: &'static str,
        t: fn() -> T,
    ) -> ProtoDef {
        let log = log.clone();
        ProtoDef::context::<T>(move |_| Ok(t())).on_destroy(move |_: Arc<T>| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(tag);
                Ok(())
            }
        })
    }
    struct Touch(ContextRef<First>, ContextRef<Second>, ContextRef<Third>);
    let app = App::builder()
        .without_inventory()
        .register(logged(&log, "first", || First))
        .register(logged(&log, "second", || Second))
        .register(logged(&log, "third", || Third))
        .register(
            ProtoDef::singleton::<Touch>(|r| Ok(Touch(r.context_ref(0)?, r.context_ref(1)?, r.context_ref(2)?)))
                .dep(context_ref::<First>())
                .dep(context_ref::<Second>())
                .dep(context_ref::<Third>()),
        )
        .build()
        .await
        .unwrap();
    let touch = app.get_object::<Touch>().unwrap();
    app.run_in_context(async {
        touch.1.get();
        touch.2.get();
        touch.0.get();
    })
    .await;
    assert_eq!(*log.lock().unwrap(), ["first", "third", "second"]);
}

/// A unit of work built from a connection pool (singleton) and the request's tracer (context).
struct Pool;
#[derive(Default)]
struct Tracer;
struct UnitOfWork {
    tracer: Arc<Tracer>,
}
struct Api {
    uow: ContextRef<UnitOfWork>,
    tracer: ContextRef<Tracer>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_object_built_from_singletons_and_other_context_objects_of_its_scope() {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool)))
        .register(ProtoDef::context::<Tracer>(|_| Ok(Tracer)))
        .register(
            // Resolving the tracer while the unit of work is being built must not deadlock.
            ProtoDef::context::<UnitOfWork>(|r| {
                let _pool: Arc<Pool> = r.arc(0)?;
                Ok(UnitOfWork { tracer: r.arc(1)? })
            })
            .dep(Dependency::new::<Pool>(InjectKind::Arc, None))
            .dep(Dependency::new::<Tracer>(InjectKind::Arc, None)),
        )
        .register(
            ProtoDef::singleton::<Api>(|r| Ok(Api { uow: r.context_ref(0)?, tracer: r.context_ref(1)? }))
                .dep(context_ref::<UnitOfWork>())
                .dep(context_ref::<Tracer>()),
        )
        .build()
        .await
        .unwrap();
    let api = app.get_object::<Api>().unwrap();
    let same = app.run_in_context(async { Arc::ptr_eq(&api.uow.get().tracer, &api.tracer.get()) }).await;
    assert!(same);
}

#[tokio::test]
async fn with_borrows_the_current_object_and_nests() {
    let app = app(&Arc::new(Counters::default())).await;
    let handler = app.get_object::<Handler>().unwrap();
    let value = app
        .run_in_context(async {
            handler.state.with(|s| *s.value.lock().unwrap() = Some(5));
            // Nested accesses inside the callback still work.
            handler.state.with(|outer| {
                let inner = handler.state.get();
                assert!(std::ptr::eq(outer, &*inner));
                handler.state.with(|s| *s.value.lock().unwrap())
            })
        })
        .await;
    assert_eq!(value, Some(5));
}

#[tokio::test]
async fn context_ref_of_one_app_fails_in_a_scope_of_another() {
    let (a, b) = (app(&Arc::new(Counters::default())).await, app(&Arc::new(Counters::default())).await);
    let handler_a = a.get_object::<Handler>().unwrap();
    let err = b.run_in_context(async { handler_a.state.try_get().map(|_| ()) }).await.unwrap_err();
    assert!(matches!(err, DiError::ForeignScope { .. }), "{err:?}");
}

#[tokio::test]
async fn get_object_inside_a_scope_returns_the_scopes_object() {
    let app = app(&Arc::new(Counters::default())).await;
    let handler = app.get_object::<Handler>().unwrap();
    let same = app
        .run_in_context(async { Arc::ptr_eq(&app.get_object::<RequestState>().unwrap(), &handler.state.get()) })
        .await;
    assert!(same);
}

#[derive(Default)]
struct Session {
    user: Mutex<Option<String>>,
}
struct Account {
    session: Arc<Session>,
}
struct Web {
    session: ContextRef<Session>,
    account: ContextRef<Account>,
}

#[tokio::test]
async fn async_init_hook_runs_once_through_get_async_and_get_always_explains_itself() {
    let inits = Arc::new(AtomicUsize::new(0));
    let counter = inits.clone();
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Session>(|_| Ok(Session::default())).on_init(move |s: Arc<Session>| {
            let counter = counter.clone();
            async move {
                tokio::task::yield_now().await; // e.g. load the session from a store
                counter.fetch_add(1, Ordering::SeqCst);
                *s.user.lock().unwrap() = Some("ada".into());
                Ok(())
            }
        }))
        // Account is sync, but built from Session by value: it needs get_async too.
        .register(
            ProtoDef::context::<Account>(|r| Ok(Account { session: r.arc(0)? }))
                .dep(Dependency::new::<Session>(InjectKind::Arc, None)),
        )
        .register(
            ProtoDef::singleton::<Web>(|r| Ok(Web { session: r.context_ref(0)?, account: r.context_ref(1)? }))
                .dep(context_ref::<Session>())
                .dep(context_ref::<Account>()),
        )
        .build()
        .await
        .unwrap();
    let web = app.get_object::<Web>().unwrap();
    app.run_in_context(async {
        assert!(matches!(web.session.try_get(), Err(DiError::AsyncInit { .. })));
        assert!(matches!(web.account.try_get(), Err(DiError::AsyncInit { .. })));
        let account = web.account.get_async().await.unwrap();
        assert_eq!(account.session.user.lock().unwrap().as_deref(), Some("ada"));
        let session = web.session.get_async().await.unwrap();
        assert!(Arc::ptr_eq(&session, &account.session));
        // Built or not, `get` refuses it: whether it works never depends on what ran first.
        assert!(matches!(web.session.try_get(), Err(DiError::AsyncInit { .. })));
        assert!(matches!(web.account.try_get(), Err(DiError::AsyncInit { .. })));
        let spawned = tegu_core::spawn({
            let web = web.clone();
            async move { web.session.try_get().err() }
        });
        assert!(matches!(spawned.await.unwrap(), Some(DiError::AsyncInit { .. })));
    })
    .await;
    assert_eq!(inits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn failing_context_init_hook_is_reported_with_the_object() {
    let app = App::builder()
        .without_inventory()
        .register(
            ProtoDef::context::<Session>(|_| Ok(Session::default()))
                .on_init(|_: Arc<Session>| async { Err::<(), BoxError>("store down".into()) }),
        )
        .register(
            ProtoDef::singleton::<Handler>(|r| Ok(Handler { state: r.context_ref(0)? }))
                .dep(context_ref::<RequestState>()),
        )
        .register(ProtoDef::context::<RequestState>(|_| Ok(RequestState::default())))
        .register(ProtoDef::singleton::<Api2>(|r| Ok(Api2(r.context_ref(0)?))).dep(context_ref::<Session>()))
        .build()
        .await
        .unwrap();
    let api = app.get_object::<Api2>().unwrap();
    let err = app.run_in_context(async { api.0.get_async().await.map(|_| ()) }).await.unwrap_err();
    assert_eq!(err.to_string(), "init of `scope_context::Session` (\"session\") failed: store down");
}
struct Api2(ContextRef<Session>);

#[tokio::test]
async fn failing_context_factory_fails_every_asker_of_that_scope_only() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<RequestState>(move |_| {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(DiError::construction::<RequestState>("requestState", "first request fails"))
            } else {
                Ok(RequestState::default())
            }
        }))
        .register(
            ProtoDef::singleton::<Handler>(|r| Ok(Handler { state: r.context_ref(0)? }))
                .dep(context_ref::<RequestState>()),
        )
        .build()
        .await
        .unwrap();
    let handler = app.get_object::<Handler>().unwrap();
    let first =
        app.run_in_context(async { (handler.state.try_get().is_err(), handler.state.try_get().is_err()) }).await;
    assert_eq!(first, (true, true));
    assert!(app.run_in_context(async { handler.state.try_get().is_ok() }).await);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the failure is remembered within its scope");
}

#[tokio::test]
async fn scope_cancelled_while_destroying_finishes_destroying_exactly_once() {
    let destroyed = Arc::new(AtomicUsize::new(0));
    struct Slow;
    struct Fast;
    struct Both(ContextRef<Slow>, ContextRef<Fast>);
    let (d1, d2) = (destroyed.clone(), destroyed.clone());
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Slow>(|_| Ok(Slow)).on_destroy(move |_: Arc<Slow>| {
            let d = d1.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                d.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        }))
        .register(ProtoDef::context::<Fast>(|_| Ok(Fast)).on_destroy(move |_: Arc<Fast>| {
            let d = d2.clone();
            async move {
                d.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        }))
        .register(
            ProtoDef::singleton::<Both>(|r| Ok(Both(r.context_ref(0)?, r.context_ref(1)?)))
                .dep(context_ref::<Slow>())
                .dep(context_ref::<Fast>()),
        )
        .build()
        .await
        .unwrap();
    let both = app.get_object::<Both>().unwrap();
    // Fast is created last, so destroyed first; Slow's hook is still running at the timeout.
    let scope = app.run_in_context(async {
        both.0.get();
        both.1.get();
    });
    assert!(tokio::time::timeout(Duration::from_millis(30), scope).await.is_err());
    // Shutdown waits for the scope's end on its tracked task: no hook runs after it.
    app.shutdown().await.unwrap();
    assert_eq!(destroyed.load(Ordering::SeqCst), 2);
}

/// Given by whoever opens the scope; its factory must never run.
struct Given(&'static str);
/// A context proto built from the given object.
struct Derived(String);

#[tokio::test]
async fn an_object_given_to_a_scope_reaches_refs_factories_and_spawned_tasks_and_is_not_destroyed() {
    let destroyed = Arc::new(AtomicUsize::new(0));
    let on_destroy = destroyed.clone();
    let app = App::builder()
        .register(
            ProtoDef::context::<Given>(|_| Err(DiError::construction::<Given>("given", "only given by the caller")))
                .on_destroy(move |_: Arc<Given>| {
                    let destroyed = on_destroy.clone();
                    async move {
                        destroyed.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), BoxError>(())
                    }
                }),
        )
        .register(
            ProtoDef::context::<Derived>(|r| Ok(Derived(format!("from {}", r.arc::<Given>(0)?.0))))
                .dep(Dependency::new::<Given>(InjectKind::Arc, None)),
        )
        .build()
        .await
        .unwrap();
    let slot = app.context_slot::<Given>().unwrap();
    let seen = app
        .run_in_context_with(slot, Arc::new(Given("ada")), async {
            let direct = app.get_object::<Given>().unwrap().0;
            let spawned_app = app.clone();
            // A task that resolves a factory depending on the given object, before the request
            // task ever did.
            let derived = tegu_core::spawn(async move { spawned_app.get_object::<Derived>().unwrap().0.clone() });
            (direct, derived.await.unwrap())
        })
        .await;
    assert_eq!(seen, ("ada", "from ada".to_owned()));
    assert_eq!(destroyed.load(Ordering::SeqCst), 0, "the scope destroys only what it built");
    // Without a given object, the factory runs and says why it fails.
    let err = app.run_in_context(async { app.get_object::<Given>().map(|_| ()) }).await.unwrap_err();
    assert!(err.to_string().contains("only given by the caller"), "{err}");
}

#[tokio::test]
async fn a_context_slot_exists_only_for_one_context_proto() {
    let app = App::builder()
        .register(ProtoDef::context::<Given>(|_| Ok(Given("built"))))
        .register(ProtoDef::singleton::<Derived>(|_| Ok(Derived(String::new()))))
        .build()
        .await
        .unwrap();
    assert!(app.context_slot::<Given>().is_ok());
    assert!(matches!(app.context_slot::<Derived>(), Err(DiError::NotFound { .. })), "a singleton has no slot");
    assert!(matches!(app.context_slot::<String>(), Err(DiError::NotFound { .. })));
}
