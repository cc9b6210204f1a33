//! Operating an App: hosted services (start after `build()`, stop before what they use is
//! destroyed, failure policies, the stop deadline), the start and stop deadlines, the warning
//! of an App dropped without `shutdown()`, and the start-up timeline.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tegu_core::{
    App, DiError, ProtoDef,
    error::BoxError,
    futures::UnitFuture,
    hosted::{HostedService, OnFailure, ServiceState, Stop},
    registry::{Dependency, InjectKind, Lifetime},
};
use tegu_test_support::{Lines, capture_logs};

/// What a test's services do; `journal` records the order of events.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Runs until told to stop.
    Obedient,
    /// Fails at once.
    Fails,
    /// Panics at once.
    Panics,
    /// Never returns, stop or not.
    Stubborn,
}

struct Db {
    journal: Lines,
}

struct Consumer {
    db: Arc<Db>,
    journal: Lines,
    behaviour: Behaviour,
    runs: AtomicUsize,
    policy: OnFailure,
}

impl HostedService for Consumer {
    fn run(self: Arc<Self>, stop: Stop) -> UnitFuture {
        Box::pin(async move {
            self.runs.fetch_add(1, Ordering::SeqCst);
            self.journal.push("consumer started");
            match self.behaviour {
                Behaviour::Obedient => {
                    stop.stopped().await;
                    // Its database is still open: destroyed only after this returns.
                    self.db.journal.push("consumer stopped, db still open");
                    Ok(())
                }
                Behaviour::Fails => Err::<(), BoxError>("the queue is gone".into()),
                Behaviour::Panics => panic!("the consumer broke"),
                Behaviour::Stubborn => std::future::pending().await,
            }
        })
    }

    fn on_failure(&self) -> OnFailure {
        self.policy
    }
}

fn db(journal: &Lines) -> ProtoDef {
    let (built, destroyed) = (journal.clone(), journal.clone());
    ProtoDef::singleton::<Db>(move |_| {
        built.push("db built");
        Ok(Db { journal: built.clone() })
    })
    .on_destroy(move |_: Arc<Db>| {
        let destroyed = destroyed.clone();
        async move {
            destroyed.push("db destroyed");
            Ok(())
        }
    })
}

fn consumer(journal: &Lines, behaviour: Behaviour, policy: OnFailure) -> ProtoDef {
    let journal = journal.clone();
    ProtoDef::singleton::<Consumer>(move |r| {
        journal.push("consumer built");
        Ok(Consumer { db: r.arc::<Db>(0)?, journal: journal.clone(), behaviour, runs: AtomicUsize::new(0), policy })
    })
    .dep(Dependency::new::<Db>(InjectKind::Arc, None))
    .provides::<Consumer, dyn HostedService>(|c| c)
}

async fn app_with(journal: &Lines, behaviour: Behaviour, policy: OnFailure) -> App {
    App::builder()
        .without_inventory()
        .register(db(journal))
        .register(consumer(journal, behaviour, policy))
        .stop_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn hosted_services_start_after_build_and_stop_before_what_they_use_is_destroyed() {
    let journal = Lines::default();
    let app = app_with(&journal, Behaviour::Obedient, OnFailure::StopApp).await;
    journal.eventually(|l| l.iter().any(|l| l == "consumer started")).await;
    assert_eq!(journal.lines(), ["db built", "consumer built", "consumer started"]);
    let services = app.hosted_services();
    assert_eq!(services.len(), 1);
    assert!(services[0].name.contains("Consumer"), "{:?}", services[0].name);
    assert_eq!(services[0].state, ServiceState::Running);
    assert!(app.health().await.ready);

    app.shutdown().await.unwrap();
    assert_eq!(
        journal.lines()[3..],
        ["consumer stopped, db still open", "db destroyed"],
        "the service stopped before its database was destroyed"
    );
    assert_eq!(app.hosted_services()[0].state, ServiceState::Stopped);
}

#[tokio::test]
async fn a_failing_service_stops_the_app_with_its_name() {
    for behaviour in [Behaviour::Fails, Behaviour::Panics] {
        let journal = Lines::default();
        let app = app_with(&journal, behaviour, OnFailure::StopApp).await;
        let error = tokio::time::timeout(Duration::from_secs(10), app.stop_requested()).await.expect("stop requested");
        let message = error.to_string();
        assert!(matches!(error, DiError::Hosted { .. }), "{message}");
        assert!(message.contains("Consumer"), "{message}");
        let why = if matches!(behaviour, Behaviour::Fails) { "the queue is gone" } else { "the consumer broke" };
        assert!(message.contains(why), "{message}");
        let health = app.health().await;
        assert!(!health.live && !health.ready, "{health:?}");
        assert_eq!(health.services[0].state, ServiceState::Failed);
        app.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_service_with_a_restart_policy_runs_again_and_never_stops_the_app() {
    let journal = Lines::default();
    let policy = OnFailure::Restart { first: Duration::from_millis(1), max: Duration::from_millis(4) };
    let app = app_with(&journal, Behaviour::Panics, policy).await;
    journal.eventually(|l| l.iter().filter(|l| *l == "consumer started").count() >= 4).await;
    assert!(app.get_object::<Consumer>().unwrap().runs.load(Ordering::SeqCst) >= 4);
    tokio::select! {
        error = app.stop_requested() => panic!("a restarted service stopped the App: {error}"),
        () = tokio::time::sleep(Duration::from_millis(20)) => {}
    }
    assert!(app.health().await.live);
    app.shutdown().await.unwrap();
    assert_eq!(app.hosted_services()[0].state, ServiceState::Stopped);
}

#[tokio::test]
async fn a_failure_with_the_log_policy_leaves_the_service_failed_and_the_app_live() {
    let journal = Lines::default();
    let app = app_with(&journal, Behaviour::Fails, OnFailure::Log).await;
    journal.eventually(|l| l.iter().any(|l| l == "consumer started")).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let health = app.health().await;
    assert!(health.live && !health.ready, "{health:?}");
    assert_eq!(health.services[0].state, ServiceState::Failed);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_service_that_ignores_its_stop_is_cut_at_the_deadline_and_named() {
    let journal = Lines::default();
    let app = app_with(&journal, Behaviour::Stubborn, OnFailure::StopApp).await;
    journal.eventually(|l| l.iter().any(|l| l == "consumer started")).await;
    let error = tokio::time::timeout(Duration::from_secs(10), app.shutdown()).await.expect("cut").unwrap_err();
    match &error {
        DiError::StopTimeout { cut, timeout } => {
            assert_eq!(*timeout, Duration::from_millis(200));
            assert_eq!(cut.len(), 1, "{cut:?}");
            assert!(cut[0].contains("Consumer"), "{cut:?}");
        }
        other => panic!("not a stop timeout: {other}"),
    }
    // The singletons were destroyed all the same.
    assert_eq!(journal.lines().last().map(String::as_str), Some("db destroyed"));
}

#[tokio::test]
async fn an_app_built_without_hosted_services_leaves_them_idle_and_not_ready() {
    let journal = Lines::default();
    let app = App::builder()
        .without_inventory()
        .register(db(&journal))
        .register(consumer(&journal, Behaviour::Obedient, OnFailure::StopApp))
        .without_hosted_services()
        .build()
        .await
        .unwrap();
    // Idle: not started, so no task exists that could log "consumer started".
    assert_eq!(app.hosted_services()[0].state, ServiceState::Idle);
    assert!(!journal.lines().iter().any(|l| l == "consumer started"));
    assert!(!app.health().await.ready);
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_context_proto_cannot_be_a_hosted_service() {
    struct PerRequest;
    impl HostedService for PerRequest {
        fn run(self: Arc<Self>, _: Stop) -> UnitFuture {
            Box::pin(async { Ok(()) })
        }
    }
    let error = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<PerRequest>(|_| Ok(PerRequest)).provides::<PerRequest, dyn HostedService>(|p| p))
        .build()
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, DiError::MustBeSingleton { .. }), "{message}");
    assert!(message.contains("PerRequest") && message.contains("dyn HostedService"), "{message}");
}

struct Broker;
struct Cache;

#[tokio::test]
async fn an_init_hook_that_never_finishes_fails_build_within_the_start_timeout_naming_it() {
    let journal = Lines::default();
    let error = tokio::time::timeout(
        Duration::from_secs(10),
        App::builder()
            .without_inventory()
            .register(db(&journal))
            .register(
                ProtoDef::singleton::<Broker>(|_| Ok(Broker))
                    .on_init(|_: Arc<Broker>| async { std::future::pending().await }),
            )
            .start_timeout(Duration::from_millis(100))
            .build(),
    )
    .await
    .expect("build returned")
    .unwrap_err();
    let message = error.to_string();
    match &error {
        DiError::StartTimeout { running, .. } => {
            assert_eq!(running.len(), 1, "{running:?}");
            assert!(running[0].contains("Broker") && running[0].contains("init hook"), "{running:?}");
        }
        other => panic!("not a start timeout: {other}"),
    }
    assert!(message.contains("start_timeout"), "{message}");
    // What was built is destroyed.
    assert_eq!(journal.lines(), ["db built", "db destroyed"]);
}

#[tokio::test]
async fn an_async_constructor_that_never_finishes_is_named_too() {
    let error = App::builder()
        .without_inventory()
        .register(ProtoDef::new_async::<Broker, _, _>(Lifetime::Singleton, |_| {
            Ok(async { std::future::pending::<Result<Broker, BoxError>>().await })
        }))
        .start_timeout(Duration::from_millis(50))
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(&error, DiError::StartTimeout { running, .. } if running[0].contains("Broker") && running[0].contains("constructor")),
        "{error}"
    );
}

#[tokio::test]
async fn a_destroy_hook_that_never_finishes_is_cut_and_named_and_those_after_it_are_listed() {
    let journal = Lines::default();
    let destroyed = journal.clone();
    let app = App::builder()
        .without_inventory()
        // Level 0, registered first: destroyed last, after the stuck hook.
        .register(db(&journal))
        .register(
            ProtoDef::singleton::<Broker>(|_| Ok(Broker))
                .on_destroy(|_: Arc<Broker>| async { std::future::pending().await }),
        )
        .register(
            ProtoDef::singleton::<Cache>(|r| {
                r.arc::<Broker>(0)?;
                Ok(Cache)
            })
            .dep(Dependency::new::<Broker>(InjectKind::Arc, None))
            .on_destroy(move |_: Arc<Cache>| {
                let destroyed = destroyed.clone();
                async move {
                    destroyed.push("cache destroyed");
                    Ok(())
                }
            }),
        )
        .stop_timeout(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let error = tokio::time::timeout(Duration::from_secs(10), app.shutdown()).await.expect("cut").unwrap_err();
    let DiError::StopTimeout { cut, .. } = &error else { panic!("not a stop timeout: {error}") };
    assert_eq!(cut.len(), 2, "{cut:?}");
    assert!(cut[0].contains("Broker") && cut[0].ends_with("(destroy hook)"), "{cut:?}");
    assert!(cut[1].contains("Db") && cut[1].ends_with("(destroy hook not run)"), "{cut:?}");
    assert_eq!(journal.lines(), ["db built", "cache destroyed"]);
}

#[test]
fn an_app_dropped_without_shutdown_logs_the_singletons_whose_destroy_hooks_never_ran() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let journal = Lines::default();
    let ((), logs) = capture_logs(|| {
        runtime.block_on(async {
            let app = App::builder().without_inventory().register(db(&journal)).build().await.unwrap();
            drop(app);
        })
    });
    assert!(logs.contains("WARN") && logs.contains("without `App::shutdown()`"), "{logs}");
    assert!(logs.contains("Db"), "{logs}");

    let ((), logs) = capture_logs(|| {
        runtime.block_on(async {
            let app = App::builder().without_inventory().register(db(&journal)).build().await.unwrap();
            app.shutdown().await.unwrap();
            drop(app);
        })
    });
    assert!(!logs.contains("without `App::shutdown()`"), "{logs}");
}

struct Fast;
struct Slow;
struct Dependent;

#[test]
fn the_startup_report_names_the_slowest_proto_and_the_critical_path() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (app, logs) = capture_logs(|| {
        runtime.block_on(async {
            App::builder()
                .without_inventory()
                .register(ProtoDef::singleton::<Fast>(|_| Ok(Fast)))
                .register(ProtoDef::new_async::<Slow, _, _>(Lifetime::Singleton, |_| {
                    Ok(async {
                        tokio::time::sleep(Duration::from_millis(60)).await;
                        Ok::<_, BoxError>(Slow)
                    })
                }))
                .register(
                    ProtoDef::singleton::<Dependent>(|r| {
                        r.arc::<Slow>(0)?;
                        Ok(Dependent)
                    })
                    .dep(Dependency::new::<Slow>(InjectKind::Arc, None))
                    .on_init(|_: Arc<Dependent>| async {
                        tracing::info!("warming up");
                        Ok(())
                    }),
                )
                .slow_start_warning(Duration::from_millis(50))
                .build()
                .await
                .unwrap()
        })
    });
    let report = app.startup_report();
    assert_eq!(report.protos().len(), 3);
    assert_eq!(report.levels().len(), 2);
    let slowest = report.slowest().unwrap();
    assert!(slowest.proto.contains("Slow") && slowest.construct >= Duration::from_millis(60), "{slowest:?}");
    let path: Vec<&str> = report.critical_path().iter().map(|p| p.proto.as_str()).collect();
    assert_eq!(path.len(), 2, "{path:?}");
    assert!(path[0].contains("Slow") && path[1].contains("Dependent"), "{path:?}");
    assert!(report.total() >= slowest.total());
    let table = report.to_string();
    assert!(table.starts_with("started 3 singletons") && table.contains("critical path: "), "{table}");
    // The warning names the slow proto; the init hook's log line is inside its span.
    assert!(logs.contains("a singleton was slow to start") && logs.contains("Slow"), "{logs}");
    assert!(logs.contains("init{proto=") && logs.contains("warming up"), "{logs}");
    runtime.block_on(app.shutdown()).unwrap();
}

/// What the services of the stop-order test emit while they stop.
#[derive(Debug)]
pub struct Flushed(&'static str);

/// Counts the `Flushed` events it handles.
#[tegu_core::singleton_proto]
#[derive(Debug, Default)]
pub struct FlushLog {
    flushed: std::sync::Mutex<Vec<&'static str>>,
}

#[tegu_core::handlers]
impl FlushLog {
    #[event_handler]
    async fn on_flushed(&self, event: &Flushed) {
        self.flushed.lock().unwrap().push(event.0);
    }
}

/// Stops slowly: notes when told, flushes (an event) and returns 50 ms later.
struct Flusher {
    name: &'static str,
    journal: Lines,
    events: Arc<tegu_core::events::EventBus>,
}

impl HostedService for Flusher {
    fn run(self: Arc<Self>, stop: Stop) -> UnitFuture {
        Box::pin(async move {
            stop.stopped().await;
            self.journal.push(format!("{} told to stop", self.name));
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.events.emit(Flushed(self.name));
            self.journal.push(format!("{} returns", self.name));
            Ok(())
        })
    }
}

#[tokio::test]
async fn services_are_told_to_stop_newest_first_one_at_a_time_and_may_emit_while_stopping() {
    let journal = Lines::default();
    let flusher = |name: &'static str, journal: &Lines| {
        let journal = journal.clone();
        move |r: &tegu_core::Resolver<'_>| {
            Ok(Flusher { name, journal: journal.clone(), events: r.arc::<tegu_core::events::EventBus>(0)? })
        }
    };
    let bus = || Dependency::new::<tegu_core::events::EventBus>(InjectKind::Arc, None);
    let app = App::builder()
        .without_inventory()
        .link::<tegu_core::events::EventBus>()
        .link::<FlushLog>()
        .register(
            ProtoDef::singleton::<Flusher>(flusher("first", &journal))
                .name("first")
                .dep(bus())
                .provides::<Flusher, dyn HostedService>(|f| f),
        )
        .register(
            ProtoDef::singleton::<Flusher>(flusher("second", &journal))
                .name("second")
                .dep(bus())
                .provides::<Flusher, dyn HostedService>(|f| f),
        )
        .build()
        .await
        .unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(
        journal.lines(),
        ["second told to stop", "second returns", "first told to stop", "first returns"],
        "newest first, the older one told only once the newer has returned"
    );
    let log = app.get_object::<FlushLog>().unwrap();
    let mut flushed = log.flushed.lock().unwrap().clone();
    flushed.sort_unstable();
    assert_eq!(flushed, ["first", "second"], "the events emitted while stopping were handled");
}

/// A hosted service another one depends on: runs until told to stop.
struct Upstream {
    journal: Lines,
    running: std::sync::atomic::AtomicBool,
}

impl HostedService for Upstream {
    fn run(self: Arc<Self>, stop: Stop) -> UnitFuture {
        Box::pin(async move {
            self.running.store(true, Ordering::SeqCst);
            self.journal.push("upstream started");
            stop.stopped().await;
            self.journal.push("upstream told to stop");
            self.running.store(false, Ordering::SeqCst);
            Ok(())
        })
    }
}

/// A hosted service that depends on `Upstream` (it reads from it while it runs).
struct Downstream {
    upstream: Arc<Upstream>,
    journal: Lines,
}

impl HostedService for Downstream {
    fn run(self: Arc<Self>, stop: Stop) -> UnitFuture {
        Box::pin(async move {
            self.journal.push(format!(
                "downstream started, upstream running: {}",
                self.upstream.running.load(Ordering::SeqCst)
            ));
            stop.stopped().await;
            let running = self.upstream.running.load(Ordering::SeqCst);
            self.journal.push(format!("downstream told to stop, upstream running: {running}"));
            Ok(())
        })
    }
}

/// A hosted service that depends on another starts after it and is told to stop before it,
/// whatever the order they were registered in: it never runs without what it depends on.
#[tokio::test]
async fn a_hosted_service_starts_after_and_stops_before_the_one_it_depends_on() {
    let journal = Lines::default();
    let (up, down) = (journal.clone(), journal.clone());
    let app = App::builder()
        .without_inventory()
        // Registered first, built (and started) second: it depends on `Upstream`.
        .register(
            ProtoDef::singleton::<Downstream>(move |r| Ok(Downstream { upstream: r.arc(0)?, journal: down.clone() }))
                .dep(Dependency::new::<Upstream>(InjectKind::Arc, None))
                .provides::<Downstream, dyn HostedService>(|d| d),
        )
        .register(
            ProtoDef::singleton::<Upstream>(move |_| {
                Ok(Upstream { journal: up.clone(), running: std::sync::atomic::AtomicBool::new(false) })
            })
            .provides::<Upstream, dyn HostedService>(|u| u),
        )
        .build()
        .await
        .unwrap();
    journal.eventually(|lines| lines.len() == 2).await;
    app.shutdown().await.unwrap();
    assert_eq!(
        journal.lines(),
        [
            "upstream started",
            "downstream started, upstream running: true",
            "downstream told to stop, upstream running: true",
            "upstream told to stop",
        ]
    );
}

/// A hook stuck in blocking code (it never yields to the runtime), until the test lets it go
/// (at most 10 s): `released` says whether it was let go.
struct Stuck {
    go: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    released: std::sync::atomic::AtomicBool,
}

impl Stuck {
    fn new() -> (Arc<Stuck>, std::sync::mpsc::Sender<()>) {
        let (go, wait) = std::sync::mpsc::channel();
        let stuck =
            Stuck { go: std::sync::Mutex::new(Some(wait)), released: std::sync::atomic::AtomicBool::new(false) };
        (Arc::new(stuck), go)
    }

    /// Blocks the thread it runs on.
    fn block(&self) {
        let wait = self.go.lock().unwrap().take().expect("blocks once");
        let _ = wait.recv_timeout(Duration::from_secs(10));
        self.released.store(true, Ordering::SeqCst);
    }
}

struct BlockingPool;

/// A destroy hook stuck in blocking code is abandoned at the stop deadline: `shutdown` returns
/// `StopTimeout` naming it while it still blocks, on a current-thread runtime too, whose one
/// thread the hook would otherwise hold (it took 6 s past a 300 ms deadline, and said `Ok`).
#[test]
fn a_destroy_hook_stuck_in_blocking_code_is_abandoned_at_the_stop_deadline() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (stuck, go) = Stuck::new();
    let hook = Arc::clone(&stuck);
    let app = runtime.block_on(async {
        App::builder()
            .without_inventory()
            .register(ProtoDef::singleton::<BlockingPool>(|_| Ok(BlockingPool)).on_destroy(
                move |_: Arc<BlockingPool>| {
                    let hook = Arc::clone(&hook);
                    async move {
                        hook.block();
                        Ok(())
                    }
                },
            ))
            .stop_timeout(Duration::from_millis(300))
            .build()
            .await
            .unwrap()
    });
    let stopped = runtime.block_on(app.shutdown());
    let still_blocked = !stuck.released.load(Ordering::SeqCst);
    go.send(()).ok();
    let error = stopped.unwrap_err();
    let DiError::StopTimeout { cut, .. } = &error else { panic!("{error}") };
    assert!(cut[0].contains("BlockingPool") && cut[0].contains("blocking its thread"), "{cut:?}");
    assert!(still_blocked, "shutdown returned only once the hook let go");
}

/// An init hook stuck in blocking code fails `build()` at the start deadline, named as blocking,
/// while it still blocks.
#[test]
fn an_init_hook_stuck_in_blocking_code_fails_the_build_at_its_deadline() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (stuck, go) = Stuck::new();
    let hook = Arc::clone(&stuck);
    let built = runtime.block_on(async {
        App::builder()
            .without_inventory()
            .register(ProtoDef::singleton::<BlockingPool>(|_| Ok(BlockingPool)).on_init(move |_: Arc<BlockingPool>| {
                let hook = Arc::clone(&hook);
                async move {
                    hook.block();
                    Ok(())
                }
            }))
            .start_timeout(Duration::from_millis(300))
            .build()
            .await
    });
    let still_blocked = !stuck.released.load(Ordering::SeqCst);
    go.send(()).ok();
    let Err(error) = built else { panic!("the build succeeded") };
    let DiError::StartTimeout { running, .. } = &error else { panic!("{error}") };
    assert!(
        running[0].contains("BlockingPool") && running[0].contains("init hook, blocking its thread"),
        "{running:?}"
    );
    assert!(still_blocked, "build returned only once the hook let go");
}
