//! Events emitted in a transaction while its commit waits: a method that joined the
//! transaction from another task of the request emits after the completion phase has begun
//! (the handler returned, the commit waits for the method). Its `before_commit` handler runs
//! inside the transaction, before the `COMMIT`, and a failure there rolls the transaction back
//! and fails the request. A task spawned in a method is part of the method's transaction. With
//! a data source whose transactions journal what is done in them.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::error::BoxError;
use tegu_core::events::EventBus;
use tegu_core::{App, handlers, singleton_proto};
use tegu_tx::testing::JournalSource;
use tegu_tx::{Transactions, TxError, transactional};

/// Writes `what` in the current transaction of the journal (`write {what}`), or says there
/// is none.
async fn write(transactions: &Transactions, what: &str) -> Result<(), TxError> {
    JournalSource::write(transactions, "journal", what).await
}

/// Paid: its `before_commit` handler records the payment in the ledger, in the transaction.
pub struct Paid {
    fail: bool,
}

#[singleton_proto]
pub struct Payments {
    #[inject]
    transactions: Arc<Transactions>,
    #[inject]
    events: Arc<EventBus>,
}

impl Payments {
    /// Begins the request's transaction with the order.
    #[transactional]
    async fn order(&self) -> Result<(), TxError> {
        write(&self.transactions, "order").await
    }

    /// Joins the request's transaction from a task of its own, and emits once the handler
    /// has returned and the completion phase waits for it.
    #[transactional]
    async fn pay_later(&self, fail: bool, joined: tokio::sync::oneshot::Sender<()>) -> Result<(), TxError> {
        write(&self.transactions, "payment").await?;
        let _ = joined.send(());
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.events.emit(Paid { fail });
        Ok(())
    }
}

#[singleton_proto]
pub struct Ledger {
    #[inject]
    transactions: Arc<Transactions>,
}

#[handlers]
impl Ledger {
    #[event_handler(before_commit)]
    async fn on_paid(&self, paid: &Paid) -> Result<(), BoxError> {
        write(&self.transactions, "ledger").await?;
        if paid.fail { Err("the ledger refuses the payment".into()) } else { Ok(()) }
    }
}

async fn app(journal: &JournalSource) -> App {
    App::builder().register(journal.proto("journal")).build().await.expect("the App")
}

async fn request(app: &App, fail: bool) -> Result<(), tegu_core::DiError> {
    let payments = app.get_object::<Payments>().unwrap();
    app.try_run_in_context(async move {
        payments.order().await.unwrap();
        let later = Arc::clone(&payments);
        let (joined, has_joined) = tokio::sync::oneshot::channel();
        // Not awaited: the handler returns once the method has joined the transaction, and
        // the commit waits for the method.
        drop(tegu_core::spawn(async move { later.pay_later(fail, joined).await.unwrap() }));
        has_joined.await.unwrap();
    })
    .await
}

#[tokio::test]
async fn an_event_a_joined_method_emits_while_the_commit_waits_is_prepared_in_the_transaction() {
    let journal = JournalSource::new();
    let app = app(&journal).await;
    request(&app, false).await.unwrap();
    assert_eq!(journal.journal(), ["BEGIN", "write order", "write payment", "write ledger", "COMMIT"]);
}

#[tokio::test]
async fn a_before_commit_handler_that_fails_while_the_commit_waits_rolls_the_request_back() {
    let journal = JournalSource::new();
    let app = app(&journal).await;
    let failed = request(&app, true).await;
    assert!(failed.is_err(), "the request was acknowledged: {failed:?}");
    assert_eq!(journal.journal(), ["BEGIN", "write order", "write payment", "write ledger", "ROLLBACK"]);
}

/// What a task spawned in a method did.
pub struct Shipped;

#[singleton_proto]
pub struct Shipping {
    #[inject]
    transactions: Arc<Transactions>,
    #[inject]
    events: Arc<EventBus>,
    #[inject]
    seen: Arc<Seen>,
}

#[singleton_proto]
#[derive(Default)]
pub struct Seen {
    lines: Mutex<Vec<String>>,
}

#[handlers]
impl Seen {
    #[event_handler]
    async fn shipped(&self, _: &Shipped) {
        self.lines.lock().unwrap().push("after_commit".into());
    }

    #[event_handler(after_rollback)]
    async fn not_shipped(&self, _: &Shipped) {
        self.lines.lock().unwrap().push("after_rollback".into());
    }
}

impl Shipping {
    /// A transaction of its own that fails after a task it spawned emitted and wrote.
    #[transactional(requires_new)]
    async fn ship(&self) -> Result<(), TxError> {
        let (transactions, events) = (Arc::clone(&self.transactions), Arc::clone(&self.events));
        let task = tegu_core::spawn(async move {
            let in_methods = transactions.current("journal").is_some();
            events.emit(Shipped);
            in_methods
        });
        let task_saw_the_methods_transaction = task.await.unwrap();
        self.seen.lines.lock().unwrap().push(format!("task in the transaction: {task_saw_the_methods_transaction}"));
        Err(TxError::Ended { data_source: "journal".into(), how: "the method gives up" })
    }
}

/// A task spawned in a method (`tegu_core::spawn`) is part of the method's work: its
/// statements run in the method's transaction and its events follow it (here, rolled back).
#[tokio::test]
async fn a_task_spawned_in_a_method_is_part_of_the_methods_transaction() {
    let journal = JournalSource::new();
    let app = app(&journal).await;
    let shipping = app.get_object::<Shipping>().unwrap();
    app.try_run_in_context(async { shipping.ship().await.unwrap_err() }).await.unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(journal.journal()[..], ["BEGIN", "ROLLBACK"]);
    let seen = app.get_object::<Seen>().unwrap();
    assert_eq!(*seen.lines.lock().unwrap(), ["task in the transaction: true", "after_rollback"]);
}

impl Payments {
    /// A savepoint whose method awaits a task it spawned, which writes in the transaction.
    #[transactional(nested)]
    async fn audit_in_a_task(self: &Arc<Self>) -> Result<(), TxError> {
        let me = Arc::clone(self);
        tegu_core::spawn(async move { me.audit_step().await }).await.unwrap()
    }

    #[transactional(nested)]
    async fn audit_step(&self) -> Result<(), TxError> {
        write(&self.transactions, "audit").await
    }
}

/// A `nested` method that awaits a task it spawned, whose statements use the transaction: the
/// task holds the method's savepoint (statements of other tasks wait for a savepoint to end,
/// and this one's method waits for the task), so both finish.
#[tokio::test]
async fn a_savepoints_method_awaiting_a_task_that_writes_does_not_wait_for_itself() {
    let journal = JournalSource::new();
    let app = app(&journal).await;
    let payments = app.get_object::<Payments>().unwrap();
    let done = tokio::time::timeout(
        Duration::from_secs(5),
        app.try_run_in_context(async {
            payments.order().await.unwrap();
            payments.audit_in_a_task().await.unwrap();
        }),
    )
    .await;
    done.expect("the method waited for its own task").unwrap();
    assert_eq!(
        journal.journal(),
        ["BEGIN", "write order", "SAVEPOINT", "SAVEPOINT", "write audit", "RELEASE", "RELEASE", "COMMIT"]
    );
}

impl Payments {
    /// A savepoint whose method calls a `required` method that emits, then fails.
    #[transactional(nested)]
    async fn refund(&self) -> Result<(), TxError> {
        self.note_refund().await?;
        Err(TxError::Ended { data_source: "journal".into(), how: "the refund gives up" })
    }

    #[transactional]
    async fn note_refund(&self) -> Result<(), TxError> {
        write(&self.transactions, "refund").await?;
        self.events.emit(Refunded);
        Ok(())
    }
}

/// Emitted by a method joined inside a savepoint.
pub struct Refunded;

#[singleton_proto]
#[derive(Default)]
pub struct Refunds {
    lines: Mutex<Vec<&'static str>>,
}

#[handlers]
impl Refunds {
    #[event_handler]
    async fn refunded(&self, _: &Refunded) {
        self.lines.lock().unwrap().push("after_commit");
    }

    #[event_handler(after_rollback)]
    async fn not_refunded(&self, _: &Refunded) {
        self.lines.lock().unwrap().push("after_rollback");
    }
}

/// An event a `required` method emits inside a `nested` method's savepoint follows the
/// savepoint: rolled back to, it goes to `after_rollback`, though the transaction commits.
#[tokio::test]
async fn an_event_a_joined_method_emits_in_a_savepoint_follows_the_savepoint() {
    let journal = JournalSource::new();
    let app = app(&journal).await;
    let payments = app.get_object::<Payments>().unwrap();
    app.try_run_in_context(async {
        payments.order().await.unwrap();
        payments.refund().await.unwrap_err();
    })
    .await
    .unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(
        journal.journal(),
        ["BEGIN", "write order", "SAVEPOINT", "write refund", "ROLLBACK TO", "RELEASE", "COMMIT"]
    );
    assert_eq!(*app.get_object::<Refunds>().unwrap().lines.lock().unwrap(), ["after_rollback"]);
}

impl Payments {
    /// A savepoint inside a savepoint: the inner one, released, hands its event to the outer
    /// one, which then fails.
    #[transactional(nested)]
    async fn refund_twice(&self) -> Result<(), TxError> {
        self.refund_inner().await?;
        Err(TxError::Ended { data_source: "journal".into(), how: "the outer refund gives up" })
    }

    #[transactional(nested)]
    async fn refund_inner(&self) -> Result<(), TxError> {
        write(&self.transactions, "inner refund").await?;
        self.events.emit(Refunded);
        Ok(())
    }
}

/// A savepoint released inside another hands its events to the other, not to the transaction:
/// the outer one rolled back to, they go to `after_rollback`.
#[tokio::test]
async fn a_savepoint_released_inside_another_hands_its_events_to_it() {
    let journal = JournalSource::new();
    let app = app(&journal).await;
    let payments = app.get_object::<Payments>().unwrap();
    app.try_run_in_context(async {
        payments.order().await.unwrap();
        payments.refund_twice().await.unwrap_err();
    })
    .await
    .unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(*app.get_object::<Refunds>().unwrap().lines.lock().unwrap(), ["after_rollback"]);
}

/// Noted outside any transaction: the scope holds it, and its `before_commit` handler runs in
/// the completion phase, in the scope's transaction.
pub struct Noted;

/// The steps of the request below, one after the other.
#[singleton_proto]
#[derive(Default)]
pub struct Steps {
    /// The handler has written in the transaction.
    prepared: tokio::sync::Notify,
    /// The method that began the transaction has failed.
    failed: tokio::sync::Notify,
    lines: Mutex<Vec<String>>,
}

#[singleton_proto]
pub struct Notes {
    #[inject]
    transactions: Arc<Transactions>,
    #[inject]
    steps: Arc<Steps>,
}

impl Notes {
    /// Begins the request's transaction on a task of the request's, and fails (or panics)
    /// once the completion phase has prepared the scope's events in it, or the request has
    /// written in it.
    #[transactional]
    async fn begin_then_fail(&self, began: tokio::sync::oneshot::Sender<()>, panics: bool) -> Result<(), TxError> {
        write(&self.transactions, "work").await?;
        let _ = began.send(());
        self.steps.prepared.notified().await;
        if panics {
            panic!("the method panics");
        }
        Err(TxError::Ended { data_source: "journal".into(), how: "the method gives up" })
    }
}

#[handlers]
impl Notes {
    #[event_handler(before_commit)]
    async fn note(&self, _: &Noted) -> Result<(), BoxError> {
        write(&self.transactions, "note").await?;
        self.steps.prepared.notify_one();
        self.steps.failed.notified().await;
        Ok(())
    }

    #[event_handler]
    async fn noted(&self, _: &Noted) {
        self.steps.lines.lock().unwrap().push("after_commit".into());
    }

    #[event_handler(after_rollback)]
    async fn not_noted(&self, _: &Noted) {
        self.steps.lines.lock().unwrap().push("after_rollback".into());
    }
}

/// The method that began the request's transaction fails after the completion phase has
/// prepared the events the scope holds in it (a `before_commit` handler wrote there): the
/// transaction is rolled back, so the request fails and the events go to `after_rollback`,
/// rather than the phase committing nothing and calling them committed.
#[tokio::test]
async fn a_method_that_began_the_transaction_failing_after_the_phase_prepared_in_it_fails_the_request() {
    for panics in [false, true] {
        let journal = JournalSource::new();
        let app = app(&journal).await;
        let notes = app.get_object::<Notes>().unwrap();
        let events = app.get_object::<EventBus>().unwrap();
        let done = tokio::time::timeout(
            Duration::from_secs(5),
            app.try_run_in_context(async move {
                let (began, has_begun) = tokio::sync::oneshot::channel();
                let method = Arc::clone(&notes);
                let steps = Arc::clone(&notes.steps);
                drop(tegu_core::spawn(async move {
                    let _failed = Notify(steps);
                    let _ = method.begin_then_fail(began, panics).await;
                }));
                has_begun.await.unwrap();
                events.emit(Noted);
            }),
        )
        .await
        .expect("the request ended");
        app.shutdown().await.unwrap();
        assert!(done.is_err(), "panics {panics}: the request was acknowledged: {done:?}");
        assert_eq!(journal.journal(), ["BEGIN", "write work", "write note", "ROLLBACK"], "panics {panics}");
        assert_eq!(*app.get_object::<Steps>().unwrap().lines.lock().unwrap(), ["after_rollback"], "panics {panics}");
    }
}

/// Tells the steps that the method failed once its task is done with it, panic or not.
struct Notify(Arc<Steps>);

impl Drop for Notify {
    fn drop(&mut self) {
        self.0.failed.notify_one();
    }
}

/// The method that began the request's transaction fails on a task of the request after the
/// request wrote in that transaction outside any method: the write is gone with it, so the
/// request fails rather than answer success for it.
#[tokio::test]
async fn a_method_that_began_the_transaction_failing_after_the_request_wrote_in_it_fails_the_request() {
    let journal = JournalSource::new();
    let app = app(&journal).await;
    let notes = app.get_object::<Notes>().unwrap();
    let transactions = app.get_object::<Transactions>().unwrap();
    let done = tokio::time::timeout(
        Duration::from_secs(5),
        app.try_run_in_context(async move {
            let (began, has_begun) = tokio::sync::oneshot::channel();
            let method = Arc::clone(&notes);
            let task = tegu_core::spawn(async move { method.begin_then_fail(began, false).await });
            has_begun.await.unwrap();
            write(&transactions, "request").await.unwrap();
            notes.steps.prepared.notify_one();
            // The handler takes the method's failure in stride.
            task.await.unwrap().unwrap_err();
        }),
    )
    .await
    .expect("the request ended");
    app.shutdown().await.unwrap();
    assert!(done.is_err(), "the request was acknowledged: {done:?}");
    assert_eq!(journal.journal(), ["BEGIN", "write work", "write request", "ROLLBACK"]);
}

/// A method that began the request's transaction and fails, with nothing else of the request
/// in it, rolls back its own work only: the request goes on, and its next method begins another.
#[tokio::test]
async fn a_method_that_began_the_transaction_alone_failing_leaves_the_request_to_go_on() {
    let journal = JournalSource::new();
    let app = app(&journal).await;
    let payments = app.get_object::<Payments>().unwrap();
    let shipping = app.get_object::<Shipping>().unwrap();
    app.try_run_in_context(async {
        shipping.ship_in_the_request().await.unwrap_err();
        payments.order().await.unwrap();
    })
    .await
    .unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(journal.journal(), ["BEGIN", "write shipment", "ROLLBACK", "BEGIN", "write order", "COMMIT"]);
}

impl Shipping {
    /// Begins the request's transaction, writes, and fails.
    #[transactional]
    async fn ship_in_the_request(&self) -> Result<(), TxError> {
        write(&self.transactions, "shipment").await?;
        Err(TxError::Ended { data_source: "journal".into(), how: "the method gives up" })
    }
}
