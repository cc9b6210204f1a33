//! Event phases: `before_commit` handlers run inside the emitting scope, at the start of its
//! completion phase and before its completion hooks, and fail it when they fail;
//! `after_commit` handlers get the events of a scope that succeeded, `after_rollback` ones those
//! of a scope that failed (marked failed, a completion hook or a `before_commit` handler failing,
//! a panic, a cancellation).

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{App, ContextRef, DiError, context_proto, events::EventBus, handlers, singleton_proto};

/// The event. Order 13 makes the `before_commit` handler return an error, 666 makes it panic.
#[derive(Debug)]
pub struct Order {
    pub id: u64,
}

/// Emitted by the `before_commit` handler of an order, so that its own `before_commit` handler
/// runs in the same phase.
#[derive(Debug)]
pub struct Shipped {
    pub id: u64,
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
    fn has(&self, line: &str) -> bool {
        self.lines().iter().any(|l| l == line)
    }
}

static LEDGERS: AtomicUsize = AtomicUsize::new(1);

/// A unit of work: one per scope, numbered; it "commits" the rows written to it in its
/// completion hook, unless the scope was marked failed.
pub struct Ledger {
    log: Arc<Log>,
    id: usize,
    rows: Mutex<Vec<u64>>,
}

#[context_proto(complete = commit)]
impl Ledger {
    fn new(log: Arc<Log>) -> Ledger {
        Ledger { log, id: LEDGERS.fetch_add(1, Ordering::Relaxed), rows: Mutex::default() }
    }

    async fn commit(&self) {
        let verb = if tegu_core::scope::scope_failed() { "rolls back" } else { "commits" };
        self.log.push(format!("ledger {} {verb} {:?}", self.id, self.rows.lock().unwrap()));
    }
}

#[singleton_proto]
pub struct Audit {
    #[inject]
    log: Arc<Log>,
    #[inject]
    ledger: ContextRef<Ledger>,
    #[inject]
    events: Arc<EventBus>,
}

#[handlers]
impl Audit {
    #[event_handler(before_commit)]
    async fn write(&self, order: &Order) -> Result<(), String> {
        // Across an await, as a database write would be.
        tokio::task::yield_now().await;
        match order.id {
            13 => return Err(format!("order {} is unlucky", order.id)),
            666 => panic!("the audit panicked on order {}", order.id),
            _ => {}
        }
        let ledger = self.ledger.get();
        ledger.rows.lock().unwrap().push(order.id);
        self.log.push(format!("before_commit {} in ledger {}", order.id, ledger.id));
        self.events.emit(Shipped { id: order.id });
        Ok(())
    }

    #[event_handler(before_commit)]
    async fn shipped(&self, shipped: &Shipped) {
        self.ledger.get().rows.lock().unwrap().push(shipped.id * 100);
        self.log.push(format!("before_commit shipped {}", shipped.id));
    }

    #[event_handler]
    async fn sent(&self, order: &Order) {
        self.log.push(format!("after_commit {}", order.id));
    }

    #[event_handler(after_rollback)]
    async fn undo(&self, order: &Order) {
        self.log.push(format!("after_rollback {}", order.id));
    }
}

async fn app() -> (App, Arc<Log>, EventBus) {
    let app = App::builder().build().await.unwrap();
    let log = app.get_object::<Log>().unwrap();
    let bus = app.events();
    (app, log, bus)
}

/// The lines after the handlers' tasks have run (shutdown waits for them).
async fn settled(app: &App, log: &Log) -> Vec<String> {
    app.shutdown().await.unwrap();
    log.lines()
}

// Paused time: the clock moves past the sleep below only once every task is idle, so a
// handler that had been started would have run by then.
#[tokio::test(start_paused = true)]
async fn before_commit_handlers_run_in_the_emitting_scope_before_its_completion_hooks() {
    let (app, log, bus) = app().await;
    let ledger = app
        .run_in_context(async {
            let ledger = app.get_object::<Ledger>().unwrap().id;
            bus.emit(Order { id: 1 });
            // Held until the completion phase: nothing ran yet.
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert!(log.lines().is_empty(), "{:?}", log.lines());
            ledger
        })
        .await;
    // Awaited by the scope: done when its output is back, in the order of the phase.
    assert_eq!(
        log.lines(),
        [
            format!("before_commit 1 in ledger {ledger}"),
            "before_commit shipped 1".to_owned(),
            format!("ledger {ledger} commits [1, 100]"),
        ]
    );
    let lines = settled(&app, &log).await;
    assert!(lines.contains(&"after_commit 1".to_owned()), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("after_rollback")), "{lines:?}");
}

#[tokio::test]
async fn a_unit_of_work_first_used_by_a_before_commit_handler_still_completes() {
    let (app, log, bus) = app().await;
    // The scope itself creates no ledger: the handler does, in the phase; it gets a pass.
    app.try_run_in_context(async { bus.emit(Order { id: 2 }) }).await.unwrap();
    let lines = log.lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[2].ends_with("commits [2, 200]"), "{lines:?}");
}

#[tokio::test]
async fn a_failing_or_panicking_before_commit_handler_fails_the_phase_and_its_scope_rolls_back() {
    for (id, says) in [(13, "order 13 is unlucky"), (666, "the audit panicked on order 666")] {
        let (app, log, bus) = app().await;
        let result = app
            .try_run_in_context(async {
                app.get_object::<Ledger>().unwrap();
                bus.emit(Order { id });
            })
            .await;
        match result {
            Err(DiError::EventHandler { event, handler, source }) => {
                assert!(event.ends_with("Order"), "{event}");
                assert!(handler.ends_with("Audit::write"), "{handler}");
                assert!(source.to_string().contains(says), "{source}");
            }
            other => panic!("expected the handler's failure, got {other:?}"),
        }
        let lines = settled(&app, &log).await;
        // No completion hook ran, no after_commit handler; the after_rollback one did.
        assert_eq!(lines, [format!("after_rollback {id}")]);
    }
}

#[tokio::test]
async fn after_rollback_handlers_get_the_events_of_a_scope_marked_failed() {
    let (app, log, bus) = app().await;
    let ledger = app
        .run_in_context(async {
            bus.emit(Order { id: 3 });
            tegu_core::scope::fail_scope();
            // Emitted once the scope has failed: to the after_rollback handlers at once.
            bus.emit(Order { id: 4 });
            app.get_object::<Ledger>().unwrap().id
        })
        .await;
    let mut lines = settled(&app, &log).await;
    lines.sort();
    // The completion phase still runs (the unit of work rolls back in it), without the
    // before_commit handlers.
    assert_eq!(
        lines,
        ["after_rollback 3".to_owned(), "after_rollback 4".into(), format!("ledger {ledger} rolls back []")]
    );
}

#[tokio::test]
async fn after_rollback_handlers_get_the_events_of_a_scope_whose_completion_hook_fails() {
    #[derive(Default)]
    struct Failing;
    let app = App::builder()
        .register(
            tegu_core::ProtoDef::context::<Failing>(|_| Ok(Failing))
                .on_complete(|_: Arc<Failing>| async { Err("the commit failed".into()) }),
        )
        .build()
        .await
        .unwrap();
    let (log, bus) = (app.get_object::<Log>().unwrap(), app.events());
    let result = app
        .try_run_in_context(async {
            app.get_object::<Failing>().unwrap();
            bus.emit(Order { id: 5 });
        })
        .await;
    assert!(matches!(result, Err(DiError::Hook { stage: "complete", .. })), "{result:?}");
    let lines = settled(&app, &log).await;
    // The before_commit handler ran (before the hook), then the hook failed: rolled back.
    assert!(lines.iter().any(|l| l.starts_with("before_commit 5")), "{lines:?}");
    assert!(lines.contains(&"after_rollback 5".to_owned()), "{lines:?}");
    assert!(!lines.contains(&"after_commit 5".to_owned()), "{lines:?}");
}

#[tokio::test]
async fn after_rollback_handlers_get_the_events_of_a_panicking_or_cancelled_scope() {
    let (app, log, bus) = app().await;
    let scope = app.run_in_context({
        let bus = bus.clone();
        async move {
            bus.emit(Order { id: 6 });
            panic!("the request panics after emitting");
        }
    });
    assert!(tokio::spawn(scope).await.is_err());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let cancelled = tokio::spawn(app.run_in_context({
        let bus = bus.clone();
        async move {
            bus.emit(Order { id: 7 });
            drop(tx);
            std::future::pending::<()>().await;
        }
    }));
    let _ = rx.await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    let mut lines = settled(&app, &log).await;
    lines.sort();
    assert_eq!(lines, ["after_rollback 6", "after_rollback 7"]);
}

#[tokio::test]
async fn outside_a_scope_before_and_after_commit_handlers_run_at_once_and_after_rollback_never() {
    let (app, log, bus) = app().await;
    // Outside a scope the handler runs in a scope of its own, so its ledger is its own.
    bus.emit(Order { id: 8 });
    let lines = settled(&app, &log).await;
    assert!(lines.iter().any(|l| l.starts_with("before_commit 8 in ledger")), "{lines:?}");
    assert!(lines.contains(&"after_commit 8".to_owned()), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("after_rollback")), "{lines:?}");
}

#[tokio::test]
async fn before_commit_handlers_of_an_event_emitted_after_the_phase_run_at_once() {
    let (app, log, bus) = app().await;
    app.run_in_context(async {
        let bus = bus.clone();
        // A background task of the scope, emitting after its completion phase succeeded.
        tegu_core::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            bus.emit(Order { id: 9 });
        });
    })
    .await;
    let lines = settled(&app, &log).await;
    assert!(lines.iter().any(|l| l.starts_with("before_commit 9")), "{lines:?}");
    assert!(lines.contains(&"after_commit 9".to_owned()), "{lines:?}");
    assert!(!log.has("after_rollback 9"), "{lines:?}");
}
