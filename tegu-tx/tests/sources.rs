//! Which data source a `#[transactional]` method runs on, and the errors that name it: none in
//! the App, several and none named, one named that the App does not have. With a data source
//! whose transactions write to a journal (`Log`), the order of what tegu-tx asks of it.

use std::any::Any;
use std::sync::{Arc, Mutex};

use tegu_core::{App, ProtoDef, singleton_proto};
use tegu_tx::{TxConn, TxError, TxFuture, TxSource, transactional};

/// A data source whose transactions write what is done to them into a shared journal.
struct Log {
    name: &'static str,
    journal: Arc<Mutex<Vec<String>>>,
}

struct LogTx {
    name: &'static str,
    journal: Arc<Mutex<Vec<String>>>,
}

impl TxSource for Log {
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        self.journal.lock().unwrap().push(format!("{}: BEGIN", self.name));
        let tx = LogTx { name: self.name, journal: Arc::clone(&self.journal) };
        Box::pin(async move { Ok(Box::new(tx) as Box<dyn TxConn>) })
    }
}

impl LogTx {
    fn say(&self, what: &str) -> TxFuture<'static, ()> {
        self.journal.lock().unwrap().push(format!("{}: {what}", self.name));
        Box::pin(async { Ok(()) })
    }
}

impl TxConn for LogTx {
    fn commit(self: Box<Self>) -> TxFuture<'static, ()> {
        self.say("COMMIT")
    }
    fn rollback(self: Box<Self>) -> TxFuture<'static, ()> {
        self.say("ROLLBACK")
    }
    fn savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
        self.say(&format!("SAVEPOINT {name}"))
    }
    fn release_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
        self.say(&format!("RELEASE {name}"))
    }
    fn rollback_to_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
        self.say(&format!("ROLLBACK TO {name}"))
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Data source `name`, writing to `journal`.
fn log(name: &'static str, journal: &Arc<Mutex<Vec<String>>>) -> ProtoDef {
    let journal = Arc::clone(journal);
    ProtoDef::singleton::<Log>(move |_| Ok(Log { name, journal: Arc::clone(&journal) }))
        .name(name)
        .provides::<Log, dyn TxSource>(|l| l)
}

/// A service whose methods run on the data sources by name.
#[singleton_proto]
#[derive(Debug)]
pub struct Orders;

impl Orders {
    /// On the App's one data source.
    #[transactional]
    pub async fn any(&self) -> Result<(), TxError> {
        Ok(())
    }

    /// On `b`, with a savepoint in it on `b`, and a transaction of its own on `a`.
    #[transactional(source = "b")]
    pub async fn on_b(&self) -> Result<(), TxError> {
        self.nested_b().await?;
        self.new_a().await
    }

    /// A savepoint on `b`.
    #[transactional(nested, source = "b")]
    pub async fn nested_b(&self) -> Result<(), TxError> {
        Ok(())
    }

    /// A transaction of its own on `a`.
    #[transactional(requires_new, source = "a")]
    pub async fn new_a(&self) -> Result<(), TxError> {
        Ok(())
    }

    /// On a data source no App has.
    #[transactional(source = "nowhere")]
    pub async fn nowhere(&self) -> Result<(), TxError> {
        Ok(())
    }
}

#[tokio::test]
async fn an_app_without_a_data_source_builds_and_its_transactional_methods_say_why_they_cannot_run() {
    let app = App::builder().build().await.expect("an App that links tegu-tx and has no data source builds");
    let orders = app.get_object::<Orders>().unwrap();
    let error = app.run_in_context(orders.any()).await.unwrap_err().to_string();
    assert!(error.contains("Orders::any") && error.contains("has no data source"), "{error}");
}

#[tokio::test]
async fn a_method_naming_no_source_among_several_fails_listing_them() {
    let journal = Arc::default();
    let app = App::builder().register(log("a", &journal)).register(log("b", &journal)).build().await.unwrap();
    let orders = app.get_object::<Orders>().unwrap();
    let error = app.run_in_context(orders.any()).await.unwrap_err().to_string();
    assert!(error.contains("Orders::any") && error.contains("several data sources (it has `a`, `b`)"), "{error}");
    let error = app.run_in_context(orders.nowhere()).await.unwrap_err().to_string();
    assert!(error.contains("`nowhere` is not in this App (it has `a`, `b`)"), "{error}");
    assert!(journal.lock().unwrap().is_empty(), "nothing begun");
}

#[tokio::test]
async fn each_source_runs_its_own_transactions_in_the_order_the_propagations_say() {
    let journal: Arc<Mutex<Vec<String>>> = Arc::default();
    let app = App::builder().register(log("a", &journal)).register(log("b", &journal)).build().await.unwrap();
    let orders = app.get_object::<Orders>().unwrap();
    app.run_in_context(orders.on_b()).await.unwrap();
    assert_eq!(
        *journal.lock().unwrap(),
        [
            "b: BEGIN",
            "b: SAVEPOINT di_sp_1",
            "b: RELEASE di_sp_1",
            "a: BEGIN",
            "a: COMMIT",
            // The scope's transaction, in its completion phase.
            "b: COMMIT",
        ]
    );
}
