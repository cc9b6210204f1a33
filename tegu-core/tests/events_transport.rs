//! An event transport: the types it carries are sent in the emitting scope's completion phase
//! (before its commit; a failed send fails it), reach no `after_commit` handler from there, and
//! come back through `EventBus::deliver`; the others stay in the process.

#![allow(missing_docs, missing_debug_implementations)]

use std::any::{Any, TypeId};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::futures::UnitFuture;
use tegu_core::{App, DiError, ProtoDef, events::EventTransport, handlers, singleton_proto};

/// Carried. Order 13 makes the transport fail.
#[derive(Debug)]
pub struct Order(pub u64);

/// Not carried.
#[derive(Debug)]
pub struct Local(pub u64);

/// Not carried; its `before_commit` handler refuses it.
#[derive(Debug)]
pub struct Refused;

#[singleton_proto(provides(dyn EventTransport))]
#[derive(Default)]
pub struct Wire {
    /// What was sent, and whether each send ran inside a scope.
    sent: Mutex<Vec<(u64, bool)>>,
    committed: AtomicUsize,
    rolled_back: AtomicUsize,
}

impl EventTransport for Wire {
    fn carries(&self, event: TypeId) -> bool {
        event == TypeId::of::<Order>()
    }

    fn send(&self, event: Arc<dyn Any + Send + Sync>, _: &tegu_core::lineage::Lineage) -> UnitFuture {
        let order = event.downcast_ref::<Order>().expect("only orders are carried").0;
        if order == 13 {
            return Box::pin(async { Err("the wire is cut".into()) });
        }
        self.sent.lock().unwrap().push((order, tegu_core::scope::in_scope()));
        Box::pin(async { Ok(()) })
    }

    fn released(&self, _event: std::any::TypeId, committed: bool) {
        let count = if committed { &self.committed } else { &self.rolled_back };
        count.fetch_add(1, Ordering::SeqCst);
    }
}

#[singleton_proto]
#[derive(Default)]
pub struct Seen {
    lines: Mutex<Vec<String>>,
}

impl Seen {
    fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
    }
    fn lines(&self) -> Vec<String> {
        let mut lines = self.lines.lock().unwrap().clone();
        lines.sort();
        lines
    }
}

#[handlers]
impl Seen {
    #[event_handler(before_commit)]
    async fn checked(&self, order: &Order) {
        self.push(format!("before_commit {}", order.0));
    }

    #[event_handler]
    async fn handled(&self, order: &Order) -> Result<(), String> {
        self.push(format!("after_commit {}", order.0));
        if order.0 == 99 { Err("the handler failed".into()) } else { Ok(()) }
    }

    #[event_handler(after_rollback)]
    async fn undone(&self, order: &Order) {
        self.push(format!("after_rollback {}", order.0));
    }

    #[event_handler]
    async fn local(&self, local: &Local) {
        self.push(format!("local {}", local.0));
    }

    #[event_handler(before_commit)]
    async fn refuse(&self, _: &Refused) -> Result<(), String> {
        Err("refused before the commit".into())
    }
}

async fn app() -> (App, Arc<Wire>, Arc<Seen>) {
    let app = App::builder().build().await.unwrap();
    let (wire, seen) = (app.get_object::<Wire>().unwrap(), app.get_object::<Seen>().unwrap());
    (app, wire, seen)
}

#[tokio::test]
async fn a_carried_event_is_sent_before_the_commit_and_comes_back_through_deliver_only() {
    let (app, wire, seen) = app().await;
    let bus = app.events();
    app.try_run_in_context(async {
        bus.emit(Order(1));
        bus.emit(Local(2));
    })
    .await
    .unwrap();
    assert_eq!(*wire.sent.lock().unwrap(), [(1, true)], "sent once, inside the scope");
    assert_eq!((wire.committed.load(Ordering::SeqCst), wire.rolled_back.load(Ordering::SeqCst)), (1, 0));
    let delivery = bus.deliver(Order(1)).await;
    assert_eq!((delivery.handlers, delivery.failed), (1, 0));
    app.shutdown().await.unwrap();
    // The after_commit handler ran once: delivered, not from the emitting scope.
    assert_eq!(seen.lines(), ["after_commit 1", "before_commit 1", "local 2"]);
}

#[tokio::test]
async fn a_failed_send_fails_the_phase_and_the_event_goes_to_after_rollback() {
    let (app, wire, seen) = app().await;
    let bus = app.events();
    let result = app.try_run_in_context(async { bus.emit(Order(13)) }).await;
    match result {
        Err(DiError::EventTransport { source }) => assert_eq!(source.to_string(), "the wire is cut"),
        other => panic!("expected the transport's failure, got {other:?}"),
    }
    app.shutdown().await.unwrap();
    assert!(wire.sent.lock().unwrap().is_empty());
    assert_eq!((wire.committed.load(Ordering::SeqCst), wire.rolled_back.load(Ordering::SeqCst)), (0, 1));
    assert_eq!(seen.lines(), ["after_rollback 13", "before_commit 13"]);
}

/// A scope without a transaction: the transport's write would commit on its own, so nothing
/// is sent while another event's `before_commit` handler may still fail the phase.
#[tokio::test]
async fn nothing_is_sent_before_every_before_commit_handler_of_the_scope_has_run() {
    let (app, wire, seen) = app().await;
    let bus = app.events();
    let result = app
        .try_run_in_context(async {
            bus.emit(Order(1));
            bus.emit(Refused);
        })
        .await;
    assert!(matches!(result, Err(DiError::EventHandler { .. })), "{result:?}");
    app.shutdown().await.unwrap();
    assert_eq!(*wire.sent.lock().unwrap(), [], "an event of a failed phase was sent");
    assert_eq!((wire.committed.load(Ordering::SeqCst), wire.rolled_back.load(Ordering::SeqCst)), (0, 1));
    assert_eq!(seen.lines(), ["after_rollback 1", "before_commit 1"]);
}

#[tokio::test]
async fn a_failed_scope_sends_nothing() {
    let (app, wire, seen) = app().await;
    let bus = app.events();
    app.run_in_context(async {
        bus.emit(Order(3));
        tegu_core::scope::fail_scope();
    })
    .await;
    app.shutdown().await.unwrap();
    assert!(wire.sent.lock().unwrap().is_empty());
    assert_eq!(wire.rolled_back.load(Ordering::SeqCst), 1);
    assert_eq!(seen.lines(), ["after_rollback 3"]);
}

#[tokio::test]
async fn outside_a_scope_a_carried_event_is_sent_at_once_in_a_scope_of_its_own() {
    let (app, wire, seen) = app().await;
    app.events().emit(Order(4));
    app.shutdown().await.unwrap(); // waits for the send's task
    assert_eq!(*wire.sent.lock().unwrap(), [(4, true)]);
    assert_eq!(wire.committed.load(Ordering::SeqCst), 1);
    assert_eq!(seen.lines(), ["before_commit 4"], "no after_commit handler but through deliver");
}

#[tokio::test]
async fn deliver_counts_the_handlers_that_failed() {
    let (app, _wire, seen) = app().await;
    let delivery = app.events().deliver(Order(99)).await;
    assert_eq!((delivery.handlers, delivery.failed), (1, 1));
    // Nothing handles it: nothing runs.
    let delivery = app.events().deliver(String::from("nobody")).await;
    assert_eq!((delivery.handlers, delivery.failed), (0, 0));
    app.shutdown().await.unwrap();
    assert_eq!(seen.lines(), ["after_commit 99"]);
}

#[tokio::test]
async fn two_transports_are_an_error_naming_both() {
    struct Other;
    impl EventTransport for Other {
        fn carries(&self, _: TypeId) -> bool {
            false
        }
        fn send(&self, _: Arc<dyn Any + Send + Sync>, _: &tegu_core::lineage::Lineage) -> UnitFuture {
            Box::pin(async { Ok(()) })
        }
    }
    let other = ProtoDef::singleton::<Other>(|_| Ok(Other)).provides::<Other, dyn EventTransport>(|o| o);
    let error = App::builder().register(other).build().await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, DiError::OneOfRole { role: "dyn EventTransport", .. }), "{message}");
    assert!(message.contains("Wire") && message.contains("Other"), "{message}");
}

#[tokio::test]
async fn a_lazy_transport_fails_the_build_rather_than_leave_the_app_without_it() {
    struct Sleepy;
    impl EventTransport for Sleepy {
        fn carries(&self, _: TypeId) -> bool {
            true
        }
        fn send(&self, _: Arc<dyn Any + Send + Sync>, _: &tegu_core::lineage::Lineage) -> UnitFuture {
            Box::pin(async { Ok(()) })
        }
    }
    let sleepy = ProtoDef::singleton::<Sleepy>(|_| Ok(Sleepy)).provides::<Sleepy, dyn EventTransport>(|s| s).lazy();
    let error = App::builder().exclude::<Wire>().register(sleepy).build().await.unwrap_err();
    assert!(matches!(error, DiError::Lazy { .. }), "{error}");
    assert!(error.to_string().contains("Sleepy") && error.to_string().contains("dyn EventTransport"), "{error}");
}
