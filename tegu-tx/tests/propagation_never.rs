//! A `never` method runs with no transaction for its whole call: a transaction another task of
//! the request begins meanwhile is not its (its statements run outside any, each committed on
//! its own), as a `required` method keeps the transaction it joined.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::{Arc, Mutex};

use tegu_core::{App, singleton_proto};
use tegu_tx::testing::JournalSource;
use tegu_tx::{Transactions, TxError, transactional};

#[singleton_proto]
pub struct Steps {
    #[inject]
    transactions: Arc<Transactions>,
}

/// The journal of what runs outside any transaction (one test in this binary).
static OUTSIDE: Mutex<Vec<String>> = Mutex::new(Vec::new());

impl Steps {
    /// Journals `what`, in the current transaction or outside any.
    async fn write(&self, what: &str) -> Result<(), TxError> {
        match self.transactions.current("journal") {
            Some(_) => JournalSource::write(&self.transactions, "journal", what).await,
            None => {
                OUTSIDE.lock().unwrap().push(format!("{what} outside any transaction"));
                Ok(())
            }
        }
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
    let journal = JournalSource::new();
    let app = App::builder().register(journal.proto("journal")).build().await.unwrap();
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
    assert_eq!(journal.journal(), ["BEGIN", "write order", "COMMIT"]);
    assert_eq!(*OUTSIDE.lock().unwrap(), ["audit outside any transaction"]);
}
