//! A `nested` method cancelled while its savepoint is being released (a timeout around it)
//! leaves no savepoint behind: the transaction's next statement and its commit go on, without
//! what the savepoint held. With a data source whose transactions journal what is done to them,
//! and whose `RELEASE` waits to be let go.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tegu_core::{App, ProtoDef, singleton_proto};
use tegu_tx::{Transactions, TxConn, TxError, TxFuture, TxSource, transactional};

/// Journals; its first `RELEASE` never ends (a statement the caller gives up on).
struct Gated {
    journal: Arc<Mutex<Vec<String>>>,
    first: Arc<std::sync::atomic::AtomicBool>,
}

struct GatedTx {
    journal: Arc<Mutex<Vec<String>>>,
    first: Arc<std::sync::atomic::AtomicBool>,
}

impl TxSource for Gated {
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        self.journal.lock().unwrap().push("BEGIN".into());
        let tx = GatedTx { journal: Arc::clone(&self.journal), first: Arc::clone(&self.first) };
        Box::pin(async move { Ok(Box::new(tx) as Box<dyn TxConn>) })
    }
}

impl GatedTx {
    fn say(&self, what: String) -> TxFuture<'static, ()> {
        self.journal.lock().unwrap().push(what);
        Box::pin(async { Ok(()) })
    }
}

impl TxConn for GatedTx {
    fn commit(self: Box<Self>) -> TxFuture<'static, ()> {
        self.say("COMMIT".into())
    }
    fn rollback(self: Box<Self>) -> TxFuture<'static, ()> {
        self.say("ROLLBACK".into())
    }
    fn savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
        self.say(format!("SAVEPOINT {name}"))
    }
    fn release_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
        let (journal, first) = (Arc::clone(&self.journal), self.first.swap(false, std::sync::atomic::Ordering::SeqCst));
        Box::pin(async move {
            if first {
                std::future::pending::<()>().await;
            }
            journal.lock().unwrap().push(format!("RELEASE {name}"));
            Ok(())
        })
    }
    fn rollback_to_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
        self.say(format!("ROLLBACK TO {name}"))
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Writes (journals) through the current transaction, as an adapter's statement would.
#[singleton_proto]
pub struct Steps {
    #[inject]
    transactions: Arc<Transactions>,
}

impl Steps {
    async fn write(&self, what: &str) -> Result<(), TxError> {
        let tx = self.transactions.current("gated").expect("a transaction");
        let mut conn = tx.lock().await?;
        let conn: &mut GatedTx = conn.as_any_mut().downcast_mut().unwrap();
        conn.journal.lock().unwrap().push(format!("write {what}"));
        Ok(())
    }

    /// Writes, calls `inner` and gives up on it while its savepoint is released, writes again.
    #[transactional]
    pub async fn outer(&self) -> Result<(), TxError> {
        self.write("outer").await?;
        let cut = tokio::time::timeout(Duration::from_millis(50), self.inner()).await;
        assert!(cut.is_err(), "cancelled while its savepoint was being released");
        self.write("after").await
    }

    /// Writes, in a savepoint.
    #[transactional(nested)]
    pub async fn inner(&self) -> Result<(), TxError> {
        self.write("inner").await
    }
}

impl std::fmt::Debug for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Steps")
    }
}

#[tokio::test]
async fn a_nested_method_cancelled_while_its_savepoint_ends_leaves_no_savepoint_behind() {
    let journal: Arc<Mutex<Vec<String>>> = Arc::default();
    let j = Arc::clone(&journal);
    let app = App::builder()
        .register(
            ProtoDef::singleton::<Gated>(move |_| {
                Ok(Gated { journal: Arc::clone(&j), first: Arc::new(std::sync::atomic::AtomicBool::new(true)) })
            })
            .name("gated")
            .provides::<Gated, dyn TxSource>(|g| g),
        )
        .build()
        .await
        .unwrap();
    let steps = app.get_object::<Steps>().unwrap();
    let done = tokio::time::timeout(Duration::from_secs(10), app.run_in_context(steps.outer())).await;
    let done = done.expect("the transaction's next statement waited for a savepoint nobody holds");
    done.unwrap();
    assert_eq!(
        *journal.lock().unwrap(),
        [
            "BEGIN",
            "write outer",
            "SAVEPOINT di_sp_1",
            "write inner",
            "ROLLBACK TO di_sp_1",
            "RELEASE di_sp_1",
            "write after",
            "COMMIT"
        ]
    );
}
