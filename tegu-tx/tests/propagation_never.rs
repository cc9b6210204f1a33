//! A `never` method runs with no transaction for its whole call: a transaction another task of
//! the request begins meanwhile is not its (its statements run outside any, each committed on
//! its own), as a `required` method keeps the transaction it joined.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::any::Any;
use std::sync::{Arc, Mutex};

use tegu_core::{App, ProtoDef, singleton_proto};
use tegu_tx::{Transactions, TxConn, TxError, TxFuture, TxSource, transactional};

type Journal = Arc<Mutex<Vec<String>>>;

struct Journaled(Journal);
struct JournaledTx(Journal);

impl TxSource for Journaled {
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        self.0.lock().unwrap().push("BEGIN".into());
        let tx = JournaledTx(Arc::clone(&self.0));
        Box::pin(async move { Ok(Box::new(tx) as Box<dyn TxConn>) })
    }
}

impl JournaledTx {
    fn say(&self, what: &str) -> TxFuture<'static, ()> {
        self.0.lock().unwrap().push(what.to_owned());
        Box::pin(async { Ok(()) })
    }
}

impl TxConn for JournaledTx {
    fn commit(self: Box<Self>) -> TxFuture<'static, ()> {
        self.say("COMMIT")
    }
    fn rollback(self: Box<Self>) -> TxFuture<'static, ()> {
        self.say("ROLLBACK")
    }
    fn savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        self.say("SAVEPOINT")
    }
    fn release_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        self.say("RELEASE")
    }
    fn rollback_to_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        self.say("ROLLBACK TO")
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[singleton_proto]
pub struct Steps {
    #[inject]
    transactions: Arc<Transactions>,
}

/// The test's journal (one test in this binary).
static JOURNAL: std::sync::LazyLock<Journal> = std::sync::LazyLock::new(Journal::default);

impl Steps {
    /// Journals `what`, in the current transaction or outside any.
    async fn write(&self, what: &str) -> Result<(), TxError> {
        match self.transactions.current("journal") {
            Some(tx) => {
                let mut conn = tx.lock().await?;
                let conn: &mut JournaledTx = conn.as_any_mut().downcast_mut().expect("the journal's");
                conn.0.lock().unwrap().push(format!("{what} in the transaction"));
            }
            None => JOURNAL.lock().unwrap().push(format!("{what} outside any transaction")),
        }
        Ok(())
    }

    #[transactional]
    async fn order(&self, begun: tokio::sync::oneshot::Sender<()>) -> Result<(), TxError> {
        self.write("order").await?;
        let _ = begun.send(());
        Ok(())
    }

    #[transactional(never)]
    async fn audit(&self, begun: tokio::sync::oneshot::Receiver<()>) -> Result<(), TxError> {
        // Another task of the request begins the request's transaction while this runs.
        begun.await.unwrap();
        self.write("audit").await
    }
}

#[tokio::test]
async fn a_never_methods_statements_stay_outside_a_transaction_begun_meanwhile() {
    let journal = Arc::clone(&JOURNAL);
    let source = Arc::clone(&journal);
    let app = App::builder()
        .register(
            ProtoDef::singleton::<Journaled>(move |_| Ok(Journaled(Arc::clone(&source))))
                .name("journal")
                .provides::<Journaled, dyn TxSource>(|j| j),
        )
        .build()
        .await
        .unwrap();
    let steps = app.get_object::<Steps>().unwrap();
    app.try_run_in_context(async {
        let (begun, has_begun) = tokio::sync::oneshot::channel();
        let other = Arc::clone(&steps);
        let task = tegu_core::spawn(async move { other.order(begun).await.unwrap() });
        steps.audit(has_begun).await.unwrap();
        task.await.unwrap();
    })
    .await
    .unwrap();
    assert_eq!(
        *journal.lock().unwrap(),
        ["BEGIN", "order in the transaction", "audit outside any transaction", "COMMIT"]
    );
}
