//! The event bus: held until the scope's work has succeeded, dropped when it fails, each
//! handler in its own scope and task, a failing or panicking handler isolated, shutdown drains.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{App, ContextRef, ProtoDef, context_proto, events::EventBus, handlers, singleton_proto};

#[derive(Debug)]
pub struct TodoCompleted {
    pub id: u64,
}

#[derive(Debug)]
pub struct Boom;

/// Unused by any handler.
pub struct Nobody;

/// One per scope: numbered, to tell the handlers' scopes apart.
pub struct Unit {
    log: Arc<Log>,
    id: usize,
}

static UNITS: AtomicUsize = AtomicUsize::new(1);

#[context_proto(destroy = destroyed)]
impl Unit {
    fn new(log: Arc<Log>) -> Unit {
        Unit { log, id: UNITS.fetch_add(1, Ordering::Relaxed) }
    }

    async fn destroyed(&self) {
        self.log.push(format!("unit {} destroyed", self.id));
    }
}

#[singleton_proto]
#[derive(Default)]
pub struct Log {
    lines: Mutex<Vec<String>>,
}

impl Log {
    fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

#[singleton_proto]
pub struct Stats {
    #[inject]
    log: Arc<Log>,
    #[inject]
    unit: ContextRef<Unit>,
    completed: AtomicUsize,
}

#[handlers]
impl Stats {
    #[event_handler]
    async fn on_completed(&self, event: &TodoCompleted) {
        self.completed.fetch_add(1, Ordering::Relaxed);
        self.log.push(format!("stats saw {} in unit {}", event.id, self.unit.get().id));
    }

    #[event_handler]
    async fn on_boom(&self, _: &Boom) -> Result<(), std::io::Error> {
        Err(std::io::Error::other("stats failed on boom"))
    }
}

#[singleton_proto]
pub struct Mailer {
    #[inject]
    log: Arc<Log>,
    #[inject]
    unit: ContextRef<Unit>,
}

#[handlers]
impl Mailer {
    #[event_handler]
    async fn on_completed(&self, event: &TodoCompleted) {
        self.log.push(format!("mailer saw {} in unit {}", event.id, self.unit.get().id));
    }

    #[event_handler]
    async fn on_boom(&self, _: &Boom) {
        panic!("mailer panicked on boom");
    }
}

/// Counts booms, to prove the others' failures do not stop it.
#[singleton_proto]
#[derive(Default)]
pub struct BoomCounter {
    booms: AtomicUsize,
}

#[handlers]
impl BoomCounter {
    #[event_handler]
    async fn on_boom(&self, _: &Boom) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.booms.fetch_add(1, Ordering::Relaxed);
    }
}

#[singleton_proto]
pub struct Todos {
    #[inject]
    events: Arc<EventBus>,
    #[inject]
    unit: ContextRef<Unit>,
}

impl Todos {
    async fn complete(&self, id: u64, fail: bool) -> usize {
        self.events.emit(TodoCompleted { id });
        if fail {
            panic!("the request fails after emitting");
        }
        self.unit.get().id
    }
}

async fn settle(app: &App) {
    // Handlers run on their own tasks: shutdown waits for them (and for ending scopes).
    app.shutdown().await.unwrap();
}

// Paused time: the clock moves past the sleep below only once every task is idle, so a
// handler that had been started would have run by then.
#[tokio::test(start_paused = true)]
async fn events_are_held_until_the_scope_succeeds_and_each_handler_gets_its_own_scope() {
    let app = App::builder().build().await.unwrap();
    let todos = app.get_object::<Todos>().unwrap();
    let log = app.get_object::<Log>().unwrap();
    let request_unit = app
        .run_in_context(async {
            let unit = todos.complete(7, false).await;
            // Still held: the scope has not ended.
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(log.lines().is_empty(), "{:?}", log.lines());
            unit
        })
        .await;
    settle(&app).await;
    let lines = log.lines();
    assert_eq!(app.get_object::<Stats>().unwrap().completed.load(Ordering::Relaxed), 1);
    assert!(lines.contains(&format!("unit {request_unit} destroyed")), "{lines:?}");
    let units: Vec<usize> = lines
        .iter()
        .filter(|l| l.contains(" saw 7 in unit "))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(units.len(), 2, "{lines:?}");
    assert!(!units.contains(&request_unit) && units[0] != units[1], "each handler in a scope of its own: {lines:?}");
    for unit in units {
        assert!(lines.contains(&format!("unit {unit} destroyed")), "the handler's scope ended: {lines:?}");
    }
}

#[tokio::test]
async fn events_of_a_failed_scope_are_dropped() {
    let app = App::builder().build().await.unwrap();
    let todos = app.get_object::<Todos>().unwrap();
    let panicked = tokio::spawn(app.run_in_context(async move { todos.complete(8, true).await })).await;
    assert!(panicked.is_err());
    // A completion hook failing drops them too.
    let app2 = App::builder()
        .register(ProtoDef::context::<u8>(|_| Ok(0)).on_complete(|_: Arc<u8>| async { Err("commit failed".into()) }))
        .build()
        .await
        .unwrap();
    let todos2 = app2.get_object::<Todos>().unwrap();
    let result = app2
        .try_run_in_context(async {
            app2.get_object::<u8>().unwrap();
            todos2.complete(9, false).await
        })
        .await;
    assert!(result.is_err());
    settle(&app).await;
    settle(&app2).await;
    assert_eq!(app.get_object::<Stats>().unwrap().completed.load(Ordering::Relaxed), 0);
    assert_eq!(app2.get_object::<Stats>().unwrap().completed.load(Ordering::Relaxed), 0);
    assert!(app2.get_object::<Log>().unwrap().lines().iter().all(|l| !l.contains("saw")));
}

#[tokio::test]
async fn outside_a_scope_events_go_at_once_and_a_failing_handler_harms_no_other() {
    let app = App::builder().build().await.unwrap();
    let bus = app.events();
    assert_eq!(bus.handler_count::<Boom>(), 3);
    assert_eq!(bus.handler_count::<Nobody>(), 0);
    bus.emit(Nobody);
    for _ in 0..10 {
        bus.emit(Boom);
    }
    settle(&app).await;
    assert_eq!(app.get_object::<BoomCounter>().unwrap().booms.load(Ordering::Relaxed), 10);
}

#[tokio::test]
async fn shutdown_drains_pending_events() {
    let app = App::builder().build().await.unwrap();
    let todos = app.get_object::<Todos>().unwrap();
    for id in 0..100 {
        app.run_in_context(todos.complete(id, false)).end_in_background().await;
    }
    app.events().emit(Boom);
    settle(&app).await;
    assert_eq!(app.get_object::<Stats>().unwrap().completed.load(Ordering::Relaxed), 100);
    assert_eq!(app.get_object::<BoomCounter>().unwrap().booms.load(Ordering::Relaxed), 1);
    // After shutdown, nothing runs: dropped (at once, no task started) and logged.
    let ((), logs) = tegu_test_support::capture_logs(|| app.events().emit(TodoCompleted { id: 1000 }));
    assert!(logs.contains("after shutdown began; dropped"), "{logs}");
    assert_eq!(app.scopes_ending(), 0, "a handler was started after shutdown");
    assert_eq!(app.get_object::<Stats>().unwrap().completed.load(Ordering::Relaxed), 100);
}

#[tokio::test]
async fn an_excluded_proto_handles_nothing() {
    let app = App::builder().exclude::<Mailer>().build().await.unwrap();
    assert_eq!(app.events().handler_count::<TodoCompleted>(), 1);
    assert_eq!(app.events().handler_count::<Boom>(), 2);
}

#[tokio::test]
async fn events_of_a_cancelled_scope_are_dropped() {
    let app = App::builder().build().await.unwrap();
    let todos = app.get_object::<Todos>().unwrap();
    // A request whose client goes away after the event was emitted.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(20),
        app.run_in_context(async {
            todos.complete(10, false).await;
            std::future::pending::<()>().await
        }),
    )
    .await;
    assert!(cancelled.is_err());
    settle(&app).await;
    assert_eq!(app.get_object::<Stats>().unwrap().completed.load(Ordering::Relaxed), 0);
}

/// Emits `Chained` and fails: its own event must not go out.
pub struct Failing;
pub struct Chained;

#[singleton_proto]
pub struct Chain {
    #[inject]
    events: Arc<EventBus>,
    chained: AtomicUsize,
    late: AtomicUsize,
}

pub struct Late;

#[handlers]
impl Chain {
    #[event_handler]
    async fn on_failing(&self, _: &Failing) -> Result<(), std::io::Error> {
        self.events.emit(Chained);
        Err(std::io::Error::other("the handler failed after emitting"))
    }

    #[event_handler]
    async fn on_chained(&self, _: &Chained) {
        self.chained.fetch_add(1, Ordering::Relaxed);
    }

    #[event_handler]
    async fn on_late(&self, _: &Late) {
        self.late.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test]
async fn a_failing_handler_drops_the_events_it_emitted_and_late_events_of_a_good_scope_go_at_once() {
    let app = App::builder().build().await.unwrap();
    app.events().emit(Failing);
    // A background task of a request that succeeded emits after the completion phase.
    let events = app.events();
    app.run_in_context(async move {
        tegu_core::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            events.emit(Late);
        });
    })
    .end_in_background()
    .await;
    settle(&app).await;
    let chain = app.get_object::<Chain>().unwrap();
    assert_eq!(chain.chained.load(Ordering::Relaxed), 0);
    assert_eq!(chain.late.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn events_emitted_after_discard_are_dropped_even_in_a_scope_that_had_emitted_nothing() {
    let app = App::builder().build().await.unwrap();
    app.run_in_context(async {
        tegu_core::events::discard_events(); // nothing held yet
        app.events().emit(TodoCompleted { id: 11 });
    })
    .await;
    settle(&app).await;
    assert_eq!(app.get_object::<Stats>().unwrap().completed.load(Ordering::Relaxed), 0);
}

/// Emitted only by the test below, handled by a lazy singleton.
#[derive(Debug)]
pub struct Shipped(pub u64);

/// Lazy: built by the first event it handles.
#[singleton_proto(lazy)]
#[derive(Default)]
pub struct ShippingLog {
    seen: Mutex<Vec<u64>>,
}

#[handlers]
impl ShippingLog {
    #[event_handler]
    async fn on_shipped(&self, event: &Shipped) {
        self.seen.lock().unwrap().push(event.0);
    }
}

/// Shutdown drains the events committed just before it and those of the scopes it waits for:
/// their handlers reach a lazy singleton as they reach an eager one (it is built then, and
/// destroyed with the others), instead of finding it refused.
#[tokio::test]
async fn shutdown_drains_events_to_a_lazy_singletons_handler() {
    let app = App::builder().build().await.unwrap();
    // Committed just before shutdown: its handler's task runs once shutdown has begun.
    app.run_in_context(async { app.events().emit(Shipped(1)) }).await;
    // Emitted by a scope that shutdown waits for, after shutdown began.
    let (go, wait) = tokio::sync::oneshot::channel::<()>();
    let bus = app.events();
    app.run_in_context(async move {
        tegu_core::spawn(async move {
            wait.await.ok();
            bus.emit(Shipped(2));
        });
    })
    .end_in_background()
    .await;
    // Shutdown begins before either handler's task has run (this runtime has one thread).
    let (shut_down, ()) = tokio::join!(app.shutdown(), async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        go.send(()).unwrap();
    });
    shut_down.unwrap();
    let mut seen = app.get_object::<ShippingLog>().expect("built by its handler").seen.lock().unwrap().clone();
    seen.sort_unstable();
    assert_eq!(seen, [1, 2]);
}

/// Delivered to a handler type registered twice.
pub struct Pinged;

#[derive(Default)]
#[singleton_proto]
pub struct Pinger {
    count: AtomicUsize,
}

#[handlers]
impl Pinger {
    #[event_handler]
    async fn on_ping(&self, _: &Pinged) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }
}

/// Two objects of one handler type: each run has a name of its own (the second `#2`), so that
/// a transport retries, records or replays one without the other.
#[tokio::test]
async fn two_objects_of_one_handler_type_are_told_apart_by_name() {
    use tegu_core::events::DeliverTo;
    use tegu_core::lineage::Lineage;
    let second = ProtoDef::singleton::<Pinger>(|_| Ok(Pinger::default())).name("secondPinger");
    let app = App::builder().register(second).build().await.unwrap();
    let each = app.events().deliver_each(Pinged, &Lineage::new(), DeliverTo::all()).await;
    let names: Vec<&str> = each.runs.iter().map(|run| run.handler.as_str()).collect();
    assert_eq!(names, ["events_bus::Pinger::on_ping", "events_bus::Pinger::on_ping#2"]);
    let one = app.events().deliver_each(Pinged, &Lineage::new(), DeliverTo::only(names[1])).await;
    assert_eq!(one.runs.len(), 1);
    assert_eq!(one.runs[0].handler, names[1]);
    let others = [names[0].to_owned()];
    let rest = app.events().deliver_each(Pinged, &Lineage::new(), DeliverTo::all().except(&others)).await;
    assert_eq!(rest.runs.iter().map(|run| run.handler.as_str()).collect::<Vec<_>>(), [names[1]]);
}
