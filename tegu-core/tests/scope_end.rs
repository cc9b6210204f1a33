//! The end of a context scope, under every fault: completion hooks, destroy hooks inside the
//! scope and isolated from each other, background work after the output, shutdown waiting for
//! scopes still ending, eager `ContextRef` cycles, deep by-value chains.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tegu_core::{
    App, AppBuilder, ContextRef, DiError, ProtoDef,
    error::BoxError,
    registry::{Dependency, InjectKind},
};

/// What happened, in order.
use tegu_test_support::Lines as Log;

/// How a hook behaves.
#[derive(Clone, Copy)]
enum Hook {
    Logs,
    Fails,
    Panics,
}

impl Hook {
    fn run(self, log: &Log, line: String) -> Result<(), BoxError> {
        match self {
            Hook::Logs => {
                log.push(line);
                Ok(())
            }
            Hook::Fails => Err(format!("{line}: refused").into()),
            Hook::Panics => panic!("{line}: boom"),
        }
    }
}

fn context_ref<T: 'static>() -> Dependency {
    Dependency::new::<T>(InjectKind::ContextRef, None)
}

/// A context proto of type `T`, whose completion and destroy hooks (if given) behave as asked
/// and log `complete {name}` / `destroy {name}`.
fn proto<T: Default + Send + Sync + 'static>(
    log: &Log,
    name: &'static str,
    complete: Option<Hook>,
    destroy: Option<Hook>,
) -> ProtoDef {
    let mut def = ProtoDef::context::<T>(|_| Ok(T::default()));
    if let Some(hook) = complete {
        let log = log.clone();
        def = def.on_complete(move |_: Arc<T>| {
            let result = hook.run(&log, format!("complete {name}"));
            async move { result }
        });
    }
    if let Some(hook) = destroy {
        let log = log.clone();
        def = def.on_destroy(move |_: Arc<T>| {
            let log = log.clone();
            async move {
                tokio::task::yield_now().await; // a real await before the outcome
                hook.run(&log, format!("destroy {name}"))
            }
        });
    }
    def
}

#[derive(Default)]
struct A;
#[derive(Default)]
struct B;
#[derive(Default)]
struct C;
#[derive(Default)]
struct D;

/// Touches A, B, C, D in that order.
struct Touch(ContextRef<A>, ContextRef<B>, ContextRef<C>, ContextRef<D>);

impl Touch {
    fn all(&self) {
        self.0.get();
        self.1.get();
        self.2.get();
        self.3.get();
    }
}

fn touch() -> ProtoDef {
    ProtoDef::singleton::<Touch>(|r| {
        Ok(Touch(r.context_ref(0)?, r.context_ref(1)?, r.context_ref(2)?, r.context_ref(3)?))
    })
    .dep(context_ref::<A>())
    .dep(context_ref::<B>())
    .dep(context_ref::<C>())
    .dep(context_ref::<D>())
}

fn builder() -> AppBuilder {
    App::builder().without_inventory()
}

/// An App of exactly `defs`.
async fn app_of(defs: impl IntoIterator<Item = ProtoDef>) -> App {
    builder().register_all(defs).build().await.unwrap()
}

/// Per scope: its number.
struct Tracer(usize);
/// Logs through the current scope's tracer: a singleton, as in tegg.
struct Logger {
    tracer: ContextRef<Tracer>,
}
/// A context object whose destroy hook logs through the singleton `Logger`.
struct Work {
    logger: Arc<Logger>,
}

/// Tracer (numbered per scope), Logger, and Work, whose destroy hook logs the tracer's number.
async fn traced_app(log: &Log) -> App {
    let next = Arc::new(AtomicUsize::new(0));
    let log = log.clone();
    builder()
        .register(ProtoDef::context::<Tracer>(move |_| Ok(Tracer(next.fetch_add(1, Ordering::SeqCst)))))
        .register(
            ProtoDef::singleton::<Logger>(|r| Ok(Logger { tracer: r.context_ref(0)? })).dep(context_ref::<Tracer>()),
        )
        .register(
            ProtoDef::context::<Work>(|r| Ok(Work { logger: r.arc(0)? }))
                .dep(Dependency::new::<Logger>(InjectKind::Arc, None))
                .on_destroy(move |work: Arc<Work>| {
                    let log = log.clone();
                    async move {
                        tokio::task::yield_now().await;
                        log.push(format!("destroyed in scope {}", work.logger.tracer.try_get()?.0));
                        Ok(())
                    }
                }),
        )
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_hooks_run_inside_the_scope_and_see_its_objects() {
    let log = Log::default();
    let app = traced_app(&log).await;
    let logger = app.get_object::<Logger>().unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (app, logger) = (app.clone(), logger.clone());
            tokio::spawn(async move {
                app.run_in_context(async {
                    app.get_object::<Work>().unwrap();
                    logger.tracer.get().0
                })
                .await
            })
        })
        .collect();
    let mut expected = Vec::new();
    for task in tasks {
        expected.push(format!("destroyed in scope {}", task.await.unwrap()));
    }
    let mut lines = log.take();
    lines.sort();
    expected.sort();
    assert_eq!(lines, expected, "each destroy hook saw its own scope's tracer");
}

#[tokio::test]
async fn a_destroy_hook_may_create_an_object_which_is_destroyed_too() {
    let log = Log::default();
    let app = traced_app(&log).await;
    // Work is created, the Tracer is not: the destroy hook creates it, then it is dropped.
    app.run_in_context(async { app.get_object::<Work>().unwrap() }).await;
    assert_eq!(log.take(), ["destroyed in scope 0"]);
}

#[tokio::test]
async fn a_failing_or_panicking_destroy_hook_is_isolated_and_the_others_still_run() {
    let log = Log::default();
    let app = app_of([
        proto::<A>(&log, "a", None, Some(Hook::Logs)),
        proto::<B>(&log, "b", None, Some(Hook::Panics)),
        proto::<C>(&log, "c", None, Some(Hook::Fails)),
        proto::<D>(&log, "d", None, Some(Hook::Logs)),
        touch(),
    ])
    .await;
    let touch = app.get_object::<Touch>().unwrap();
    for round in 0..3 {
        let answer = app.try_run_in_context(async { touch.all() }).await;
        assert!(answer.is_ok(), "round {round}: a destroy hook's failure never replaces the output");
        assert_eq!(log.take(), ["destroy d", "destroy a"], "round {round}: newest first, failures skipped");
    }
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn completion_hooks_run_newest_first_inside_the_scope_before_the_output() {
    let log = Log::default();
    let app = app_of([
        proto::<A>(&log, "a", Some(Hook::Logs), Some(Hook::Logs)),
        proto::<B>(&log, "b", None, Some(Hook::Logs)),
        proto::<C>(&log, "c", Some(Hook::Logs), None),
        proto::<D>(&log, "d", Some(Hook::Logs), None),
        touch(),
    ])
    .await;
    let touch = app.get_object::<Touch>().unwrap();
    let seen = log.clone();
    let out = app.try_run_in_context(async {
        touch.all();
        seen.lines().len()
    });
    assert_eq!(out.await.unwrap(), 0, "nothing completed while the scope's future ran");
    assert_eq!(log.take(), ["complete d", "complete c", "complete a", "destroy b", "destroy a"]);
}

#[tokio::test]
async fn a_failing_completion_hook_fails_the_scope_and_skips_the_older_ones() {
    for (hook, message) in
        [(Hook::Fails, "failed: complete c: refused"), (Hook::Panics, "failed: panicked: complete c: boom")]
    {
        let log = Log::default();
        let app = builder()
            .register(proto::<A>(&log, "a", Some(Hook::Logs), Some(Hook::Logs)))
            .register(proto::<B>(&log, "b", Some(Hook::Logs), Some(Hook::Logs)))
            .register(proto::<C>(&log, "c", Some(hook), Some(Hook::Logs)))
            .register(proto::<D>(&log, "d", Some(Hook::Logs), Some(Hook::Logs)))
            .register(touch())
            .build()
            .await
            .unwrap();
        let touch = app.get_object::<Touch>().unwrap();
        let error = app.try_run_in_context(async { touch.all() }).await.unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("complete of `") && text.contains("::C` (\"c\")"), "{text}");
        assert!(text.ends_with(message), "{text}");
        let expected = ["complete d", "destroy d", "destroy c", "destroy b", "destroy a"];
        assert_eq!(log.take(), expected, "b and a are not completed after c failed; every object is destroyed");
        // Without `try_`, the output comes back and the failure is logged.
        assert_eq!(
            app.run_in_context(async {
                touch.all();
                7
            })
            .await,
            7
        );
        assert_eq!(log.take(), expected);
    }
}

struct TouchAb(ContextRef<A>, ContextRef<B>);

fn touch_ab() -> ProtoDef {
    ProtoDef::singleton::<TouchAb>(|r| Ok(TouchAb(r.context_ref(0)?, r.context_ref(1)?)))
        .dep(context_ref::<A>())
        .dep(context_ref::<B>())
}

#[tokio::test]
async fn complete_scope_runs_the_phase_once_and_reports_to_its_caller() {
    let log = Log::default();
    let app = app_of([
        proto::<A>(&log, "a", Some(Hook::Fails), None),
        proto::<B>(&log, "b", Some(Hook::Logs), None),
        touch_ab(),
    ])
    .await;
    let ab = app.get_object::<TouchAb>().unwrap();
    let inside = app.try_run_in_context(async {
        ab.0.get();
        let first = tegu_core::scope::complete_scope().await.map_err(|e| e.to_string());
        // After the phase, b (which has a completion hook) would never be completed: refused.
        let late = ab.1.try_get().map(drop);
        let second = tegu_core::scope::complete_scope().await;
        (first, late, second.is_ok())
    });
    let (first, late, second) = inside.await.expect("the caller of complete_scope received the failure, not the scope");
    assert!(first.unwrap_err().ends_with("complete a: refused"));
    assert!(matches!(late, Err(DiError::LateCompletion { .. })), "{late:?}");
    assert!(second, "the phase ran once");
    assert_eq!(log.take(), Vec::<String>::new(), "b was never created");
    assert!(tegu_core::scope::complete_scope().await.is_ok(), "outside a scope there is nothing to complete");
}

#[tokio::test]
async fn a_cancelled_or_panicking_scope_is_not_completed_but_destroyed() {
    let log = Log::default();
    let app = app_of([
        proto::<A>(&log, "a", Some(Hook::Logs), Some(Hook::Logs)),
        proto::<B>(&log, "b", Some(Hook::Logs), Some(Hook::Logs)),
        touch_ab(),
    ])
    .await;
    let ab = app.get_object::<TouchAb>().unwrap();
    let cancelled = app.run_in_context(async {
        ab.0.get();
        std::future::pending::<()>().await;
    });
    assert!(tokio::time::timeout(Duration::from_millis(20), cancelled).await.is_err());
    let panicked = tokio::spawn({
        let (app, ab) = (app.clone(), ab.clone());
        async move {
            app.run_in_context(async {
                ab.1.get();
                panic!("the handler failed");
            })
            .await
        }
    });
    assert!(panicked.await.is_err());
    app.shutdown().await.unwrap(); // waits for both ends
    let mut lines = log.take();
    lines.sort();
    assert_eq!(lines, ["destroy a", "destroy b"]);
}

#[tokio::test(start_paused = true)]
async fn ending_in_background_returns_the_output_before_background_tasks_and_destroy_hooks() {
    let finished = Arc::new(AtomicBool::new(false));
    let saw_finished = Arc::new(AtomicBool::new(false));
    let (seen, task_done) = (saw_finished.clone(), finished.clone());
    let app = builder()
        .register(ProtoDef::context::<A>(|_| Ok(A)).on_destroy(move |_: Arc<A>| {
            let (seen, finished) = (seen.clone(), task_done.clone());
            async move {
                seen.store(finished.load(Ordering::SeqCst), Ordering::SeqCst);
                Ok(())
            }
        }))
        .build()
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let flag = finished.clone();
    let out = app
        .run_in_context(async {
            app.get_object::<A>().unwrap();
            tegu_core::spawn(async move {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                flag.store(true, Ordering::SeqCst);
            });
            "answered"
        })
        .end_in_background()
        .await;
    assert_eq!((out, started.elapsed()), ("answered", Duration::ZERO), "the output did not wait for the task");
    assert_eq!(app.scopes_ending(), 1);
    app.shutdown().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(1500), "shutdown waited for the task");
    assert!(saw_finished.load(Ordering::SeqCst), "the destroy hook ran after the background task");
    assert_eq!(app.scopes_ending(), 0);
}

/// A singleton whose destroy hook logs: shutdown must run it after every scope's end.
struct Pool;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_fifty_cancelled_scopes_before_destroying_singletons() {
    let log = Log::default();
    let (context_log, singleton_log) = (log.clone(), log.clone());
    let app = builder()
        .register(ProtoDef::context::<A>(|_| Ok(A)).on_destroy(move |_: Arc<A>| {
            let log = context_log.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                log.push("context");
                Ok(())
            }
        }))
        .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool)).on_destroy(move |_: Arc<Pool>| {
            let log = singleton_log.clone();
            async move {
                log.push("singleton");
                Ok(())
            }
        }))
        .build()
        .await
        .unwrap();
    let (started_tx, mut started) = tokio::sync::mpsc::channel::<()>(50);
    let requests: Vec<_> = (0..50)
        .map(|_| {
            let (app, started_tx) = (app.clone(), started_tx.clone());
            tokio::spawn(async move {
                app.run_in_context(async {
                    app.get_object::<A>().unwrap();
                    started_tx.send(()).await.unwrap();
                    std::future::pending::<()>().await;
                })
                .await
            })
        })
        .collect();
    for _ in 0..50 {
        started.recv().await.unwrap();
    }
    for request in &requests {
        request.abort(); // the client went away
    }
    for request in requests {
        assert!(request.await.unwrap_err().is_cancelled());
    }
    app.shutdown().await.unwrap();
    let lines = log.take();
    assert_eq!(lines.len(), 51, "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("singleton"), "singletons are destroyed last: {lines:?}");
}

#[tokio::test(start_paused = true)]
async fn shutdown_gives_up_on_a_scope_that_never_ends_at_its_deadline() {
    let destroyed = Arc::new(AtomicBool::new(false));
    let flag = destroyed.clone();
    let app = builder()
        .drain_scopes_timeout(Duration::from_secs(3))
        .register(ProtoDef::context::<A>(|_| Ok(A)).on_destroy(|_: Arc<A>| std::future::pending()))
        .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool)).on_destroy(move |_: Arc<Pool>| {
            let flag = flag.clone();
            async move {
                flag.store(true, Ordering::SeqCst);
                Ok(())
            }
        }))
        .build()
        .await
        .unwrap();
    app.run_in_context(async { app.get_object::<A>().unwrap() }).end_in_background().await;
    let started = tokio::time::Instant::now();
    app.shutdown().await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert!(destroyed.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_singleton_with_a_completion_hook_is_refused_at_build() {
    let error = builder()
        .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool)).on_complete(|_: Arc<Pool>| async { Ok(()) }))
        .build()
        .await
        .unwrap_err();
    assert!(matches!(error, DiError::CompleteOnSingleton { .. }), "{error}");
    assert!(error.to_string().contains("Pool") && error.to_string().contains("make it a context proto"), "{error}");
}

/// Two context protos whose construction dereferences the other.
#[derive(Debug)]
struct Hen(ContextRef<Egg>);
#[derive(Debug)]
struct Egg(ContextRef<Hen>);
/// A singleton holding both references, for the test to start from either side.
struct Farm(ContextRef<Hen>, ContextRef<Egg>);

/// One side of the cycle: a context proto `T` holding `ContextRef<U>` (`wrap`, `other`), whose
/// factory (`in_factory`) or async init hook dereferences it; with `both_claimed`, the init
/// hook first waits until both sides are being built.
fn eager_side<T: Send + Sync + 'static, U: Send + Sync + 'static>(
    wrap: fn(ContextRef<U>) -> T,
    other: fn(&T) -> ContextRef<U>,
    in_factory: bool,
    both_claimed: Option<Arc<tokio::sync::Barrier>>,
) -> ProtoDef {
    let def = ProtoDef::context::<T>(move |r| {
        let other = r.context_ref::<U>(0)?;
        if in_factory {
            other.try_get()?;
        }
        Ok(wrap(other))
    })
    .dep(context_ref::<U>());
    if in_factory {
        return def;
    }
    def.on_init(move |this: Arc<T>| {
        let barrier = both_claimed.clone();
        async move {
            tokio::task::yield_now().await;
            if let Some(barrier) = barrier {
                barrier.wait().await;
            }
            other(&this).get_async().await?;
            Ok(())
        }
    })
}

/// Hen and Egg, each dereferencing the other while being built (see `eager_side`).
async fn eager_cycle(in_factory: bool, both_claimed: Option<Arc<tokio::sync::Barrier>>) -> (App, Arc<Farm>) {
    let hen = eager_side(Hen, |hen: &Hen| hen.0, in_factory, both_claimed.clone());
    let egg = eager_side(Egg, |egg: &Egg| egg.0, in_factory, both_claimed);
    let farm = ProtoDef::singleton::<Farm>(|r| Ok(Farm(r.context_ref(0)?, r.context_ref(1)?)))
        .dep(context_ref::<Hen>())
        .dep(context_ref::<Egg>());
    let app = builder().register(hen).register(egg).register(farm).build().await.unwrap();
    let farm = app.get_object::<Farm>().unwrap();
    (app, farm)
}

fn assert_names_both(error: &str) {
    assert!(error.contains("context objects need each other while being built"), "{error}");
    assert!(error.contains("::Hen` (\"hen\")") || error.contains("::Hen (\"hen\")"), "{error}");
    assert!(error.contains("::Egg (\"egg\")"), "{error}");
}

const WITHIN: Duration = Duration::from_secs(1);

#[tokio::test]
async fn an_eager_context_ref_cycle_fails_fast_from_try_get_and_get() {
    let (app, farm) = eager_cycle(true, None).await;
    let error = tokio::time::timeout(WITHIN, app.run_in_context(async { farm.0.try_get().err() }))
        .await
        .expect("no hang")
        .expect("an error");
    assert!(matches!(&error, DiError::EagerCycle { chain } if chain.len() == 3), "{error:?}");
    assert_names_both(&error.to_string());

    let farm_for_get = farm.clone();
    let get = tokio::spawn({
        let app = app.clone();
        async move { app.run_in_context(async { farm_for_get.1.get() }).await }
    });
    let panic = tokio::time::timeout(WITHIN, get).await.expect("no hang").unwrap_err().into_panic();
    assert_names_both(panic.downcast_ref::<String>().expect("a message"));
}

#[tokio::test]
async fn an_eager_context_ref_cycle_in_init_hooks_fails_fast_from_get_async() {
    let (app, farm) = eager_cycle(false, None).await;
    let error = tokio::time::timeout(WITHIN, app.run_in_context(async { farm.0.get_async().await.err() }))
        .await
        .expect("no hang")
        .expect("an error");
    assert_names_both(&error.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eager_cycle_split_across_two_tasks_fails_instead_of_deadlocking() {
    for _ in 0..20 {
        // Each task builds one side; both are being built before either asks for the other.
        let (app, farm) = eager_cycle(false, Some(Arc::new(tokio::sync::Barrier::new(2)))).await;
        let outcome = app.run_in_context(async {
            let hen = tegu_core::spawn({
                let farm = farm.clone();
                async move { farm.0.get_async().await.err().map(|e| e.to_string()) }
            });
            let egg = farm.1.get_async().await.err().map(|e| e.to_string());
            (hen.await.unwrap(), egg)
        });
        let (hen, egg) = tokio::time::timeout(WITHIN, outcome).await.expect("no deadlock");
        for error in [hen, egg] {
            assert_names_both(&error.expect("both sides fail: each needs the other"));
        }
    }
}

/// A link of a by-value chain of context objects: `link{i}` takes `link{i-1}`.
struct Link {
    depth: usize,
    _next: Option<Arc<Link>>,
}
/// Holds the chain's top through a `ContextRef`.
struct Top(ContextRef<Link>);

fn chain(depth: usize, init_at_bottom: bool) -> AppBuilder {
    let mut builder = builder();
    for i in 0..depth {
        let mut def = ProtoDef::context::<Link>(move |r| {
            let next = if i == 0 { None } else { Some(r.arc::<Link>(0)?) };
            Ok(Link { depth: i, _next: next })
        })
        .name(format!("link{i}"));
        if i > 0 {
            def = def.dep(Dependency::named::<Link>(InjectKind::Arc, format!("link{}", i - 1)));
        } else if init_at_bottom {
            def = def.on_init(|_: Arc<Link>| async {
                tokio::task::yield_now().await;
                Ok(())
            });
        }
        builder = builder.register(def);
    }
    builder.register(
        ProtoDef::singleton::<Top>(|r| Ok(Top(r.context_ref(0)?)))
            .dep(Dependency::named::<Link>(InjectKind::ContextRef, format!("link{}", depth - 1))),
    )
}

#[test]
fn a_5000_deep_by_value_chain_builds_on_a_small_stack() {
    // A 256 KiB thread: about 1 KB a level would need 5 MB if construction recursed.
    let run = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                for init_at_bottom in [false, true] {
                    let app = chain(5000, init_at_bottom).build().await.unwrap();
                    let top = app.get_object::<Top>().unwrap();
                    let depth = app
                        .run_in_context(async {
                            let link = if init_at_bottom { top.0.get_async().await.unwrap() } else { top.0.get() };
                            link.depth
                        })
                        .await;
                    assert_eq!(depth, 4999);
                }
            })
        })
        .unwrap();
    run.join().expect("no stack overflow");
}

#[tokio::test]
async fn a_panicking_factory_frees_its_object_for_the_next_asker() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let app = builder()
        .register(ProtoDef::context::<A>(move |_| {
            if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("first build fails");
            }
            Ok(A)
        }))
        .build()
        .await
        .unwrap();
    let built = app
        .run_in_context(async {
            let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| app.get_object::<A>()));
            (first.is_err(), app.get_object::<A>().is_ok())
        })
        .await;
    assert_eq!(built, (true, true), "the panic left the slot free, not stuck");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_task_waiting_for_an_object_when_its_scope_ends_is_woken_with_scope_closed() {
    let app = builder()
        .background_task_timeout(Duration::from_millis(50))
        .register(ProtoDef::context::<A>(|_| {
            std::thread::sleep(Duration::from_millis(400)); // a slow, blocking factory
            Ok(A)
        }))
        .build()
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.run_in_context(async {
        let builder = app.clone();
        tegu_core::spawn(async move { builder.get_object::<A>().map(drop) });
        tokio::time::sleep(Duration::from_millis(20)).await; // A is being built
        let waiter = app.clone();
        tegu_core::scope::spawn_blocking(move || {
            let _ = tx.send(waiter.get_object::<A>().map(drop));
        });
    })
    .await; // ends after the 50 ms timeout, while A is still being built
    let waited = tokio::time::timeout(Duration::from_secs(3), rx).await.expect("the waiter was woken").unwrap();
    let error = waited.unwrap_err();
    assert!(matches!(error, DiError::ScopeClosed { .. }), "{error}");
}

#[tokio::test]
async fn a_complete_scope_future_dropped_unpolled_leaves_the_phase_to_the_end() {
    let log = Log::default();
    let app = app_of([proto::<A>(&log, "a", Some(Hook::Logs), None)]).await;
    app.try_run_in_context(async {
        app.get_object::<A>().unwrap();
        drop(tegu_core::scope::complete_scope()); // never polled: nothing started
    })
    .await
    .unwrap();
    assert_eq!(log.take(), ["complete a"]);
}

/// A unit of work whose commit (its completion hook) waits to be let go, as a `COMMIT` on a
/// slow database does; it logs `committed`, and `destroyed` after.
#[derive(Default)]
struct SlowCommit;

/// Emitted in the scope: which of its handlers ran tells how the scope ended.
#[derive(Debug)]
pub struct Ordered;

/// Records which handlers of `Ordered` ran.
#[tegu_core::singleton_proto]
#[derive(Debug, Default)]
pub struct OrderDesk {
    phases: Log,
}

#[tegu_core::handlers]
impl OrderDesk {
    #[event_handler]
    async fn confirmed(&self, _: &Ordered) {
        self.phases.push("after_commit");
    }

    #[event_handler(after_rollback)]
    async fn voided(&self, _: &Ordered) {
        self.phases.push("after_rollback");
    }
}

/// A request cancelled during its completion phase (the client gone during a `COMMIT`): the
/// phase is not cut at an unknown point but finishes on a task of its own, before the destroy
/// hooks, and the scope's events follow the outcome it reaches (the commit's). Both ways of
/// running the phase: after the scope's future, and from inside it (`complete_scope`, as
/// tegu-http does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_phase_cut_off_by_a_cancelled_request_finishes_on_its_own() {
    for from_inside in [false, true] {
        let log = Log::default();
        let go = Arc::new(tokio::sync::Notify::new());
        let (hook_log, hook_go) = (log.clone(), go.clone());
        let destroy_log = log.clone();
        let app = App::builder()
            .register(
                ProtoDef::context::<SlowCommit>(|_| Ok(SlowCommit))
                    .on_complete(move |_: Arc<SlowCommit>| {
                        let (log, go) = (hook_log.clone(), hook_go.clone());
                        async move {
                            log.push("committing");
                            go.notified().await;
                            log.push("committed");
                            Ok(())
                        }
                    })
                    .on_destroy(move |_: Arc<SlowCommit>| {
                        let log = destroy_log.clone();
                        async move {
                            log.push("destroyed");
                            Ok(())
                        }
                    }),
            )
            .build()
            .await
            .unwrap();
        let request = app.run_in_context(async {
            app.get_object::<SlowCommit>().unwrap();
            app.events().emit(Ordered);
            if from_inside {
                tegu_core::scope::complete_scope().await.unwrap();
            }
        });
        let mut request = Box::pin(request);
        tokio::select! {
            () = &mut request => panic!("the commit was not let go yet"),
            _ = log.eventually(|lines| lines.contains(&"committing".to_owned())) => {}
        }
        drop(request); // the client went away
        go.notify_one();
        app.shutdown().await.unwrap();
        assert_eq!(log.lines(), ["committing", "committed", "destroyed"], "from inside: {from_inside}");
        let desk = app.get_object::<OrderDesk>().unwrap();
        assert_eq!(desk.phases.lines(), ["after_commit"], "from inside: {from_inside}");
    }
}
