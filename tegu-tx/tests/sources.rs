//! Which data source a `#[transactional]` method runs on, and the errors that name it: none in
//! the App, several and none named, one named that the App does not have. With a data source
//! whose transactions write to a journal (`Log`), the order of what tegu-tx asks of it.

use std::any::Any;
use std::sync::{Arc, Mutex};

use tegu_core::{App, ProtoDef};
use tegu_tx::{TxConn, TxFuture, TxSource};

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

/// Methods on named data sources.
pub mod orders {
    use tegu_core::{intercept, singleton_proto};
    use tegu_tx::TxError;

    /// A service whose methods run on the data sources `a` and `b` by name.
    #[singleton_proto]
    #[derive(Debug)]
    pub struct Orders;

    /// `#[intercept]` on the block: `build()` knows whose methods these are, also in an App
    /// built by hand.
    #[intercept]
    impl Orders {
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
    }
}

/// A method on the App's one data source.
pub mod unnamed {
    use tegu_core::singleton_proto;
    use tegu_tx::{TxError, transactional};

    /// A method on the App's one data source.
    #[singleton_proto]
    #[derive(Debug)]
    pub struct Unnamed;

    impl Unnamed {
        /// On the one data source.
        #[transactional]
        pub async fn any(&self) -> Result<(), TxError> {
            Ok(())
        }
    }
}

/// A method on a data source no App has.
pub mod misnamed {
    use tegu_core::singleton_proto;
    use tegu_tx::{TxError, transactional};

    /// A method on a data source no App has.
    #[singleton_proto]
    #[derive(Debug)]
    pub struct Misnamed;

    impl Misnamed {
        /// On `nowhere`.
        #[transactional(source = "nowhere")]
        pub async fn nowhere(&self) -> Result<(), TxError> {
            Ok(())
        }
    }
}

/// Methods of a type that is no proto.
pub mod plain {
    use tegu_tx::{TxError, transactional};

    /// Not a proto: its methods are no App's, so `build()` cannot check them, and their call
    /// says what is wrong.
    #[derive(Debug)]
    pub struct Plain;

    impl Plain {
        /// On the one data source.
        #[transactional]
        pub async fn any(&self) -> Result<(), TxError> {
            Ok(())
        }

        /// On `nowhere`.
        #[transactional(source = "nowhere")]
        pub async fn nowhere(&self) -> Result<(), TxError> {
            Ok(())
        }
    }
}

use misnamed::Misnamed;
use orders::Orders;
use plain::Plain;
use unnamed::Unnamed;

#[tokio::test]
async fn an_app_without_the_data_sources_its_methods_need_fails_build_and_check_naming_each_method() {
    let error = App::builder().build().await.expect_err("no data source: refused").to_string();
    for (method, module) in
        [("on_b", "orders"), ("nested_b", "orders"), ("new_a", "orders"), ("any", "unnamed"), ("nowhere", "misnamed")]
    {
        assert!(error.contains(&format!("method `{method}` of module `sources::{module}`")), "{method}: {error}");
    }
    assert!(
        error.contains("needs `dyn tegu_tx::source::TxSource` named \"nowhere\", but this App has none"),
        "{error}"
    );
    assert!(error.contains("`App::builder().link::<Database<Sqlite>>()`"), "{error}");
    assert!(!error.contains("Plain") && !error.contains("`sources::plain`"), "no App's methods: {error}");

    let journal = Arc::default();
    let two = || App::builder().register(log("a", &journal)).register(log("b", &journal));
    let error = two().check().unwrap_err().to_string();
    assert!(
        error.contains("method `any` of module `sources::unnamed`")
            && error.contains("this App has 2 (\"a\", \"b\") and the use names none"),
        "{error}"
    );
    assert!(error.contains("named \"nowhere\", but this App has none of that name (it has \"a\", \"b\")"), "{error}");
    assert!(!error.contains("`on_b`") && !error.contains("`new_a`"), "those name a source the App has: {error}");
    // Without the protos whose uses it cannot meet, the App builds.
    assert!(two().exclude::<Unnamed>().exclude::<Misnamed>().check().is_ok());
}

#[tokio::test]
async fn an_app_without_a_data_source_builds_and_a_method_of_no_proto_says_why_it_cannot_run() {
    let app = App::builder().exclude::<Orders>().exclude::<Unnamed>().exclude::<Misnamed>().build().await;
    let app = app.expect("an App that links tegu-tx and has no data source builds");
    let error = app.run_in_context(Plain.any()).await.unwrap_err().to_string();
    assert!(error.contains("Plain::any") && error.contains("has no data source"), "{error}");
}

#[tokio::test]
async fn a_method_naming_no_source_among_several_fails_listing_them() {
    let journal = Arc::default();
    let app = App::builder().register(log("a", &journal)).register(log("b", &journal));
    let app = app.exclude::<Unnamed>().exclude::<Misnamed>().build().await.unwrap();
    let error = app.run_in_context(Plain.any()).await.unwrap_err().to_string();
    assert!(error.contains("Plain::any") && error.contains("several data sources (it has `a`, `b`)"), "{error}");
    let error = app.run_in_context(Plain.nowhere()).await.unwrap_err().to_string();
    assert!(error.contains("`nowhere` is not in this App (it has `a`, `b`)"), "{error}");
    assert!(journal.lock().unwrap().is_empty(), "nothing begun");
}

#[tokio::test]
async fn each_source_runs_its_own_transactions_in_the_order_the_propagations_say() {
    let journal: Arc<Mutex<Vec<String>>> = Arc::default();
    let app = App::builder().register(log("a", &journal)).register(log("b", &journal));
    let app = app.exclude::<Unnamed>().exclude::<Misnamed>().build().await.unwrap();
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

#[tokio::test]
async fn an_app_built_by_hand_without_the_advice_fails_check_naming_the_method() {
    let error = App::builder().without_inventory().link::<Orders>().check().unwrap_err().to_string();
    assert!(error.contains("method `on_b` of module `sources::orders`"), "{error}");
    assert!(error.contains("is intercepted by `::tegu_tx::Transactional`"), "{error}");
    assert!(error.contains("does not link it: link it and what it needs with `.link::<Transactional>()"), "{error}");
}

#[tokio::test]
async fn an_app_built_by_hand_links_tegu_tx_as_its_errors_say() {
    let app = App::builder()
        .without_inventory()
        .link::<Orders>()
        .link::<tegu_tx::Transactional>()
        .link::<tegu_tx::Transactions>()
        .link::<tegu_tx::TxScope>();
    let error = app.check().unwrap_err().to_string();
    assert!(
        error.contains("method `on_b` of module `sources::orders`")
            && error.contains("named \"b\", but this App has none"),
        "{error}"
    );
}

#[tokio::test]
async fn a_method_level_use_is_checked_only_where_the_app_takes_every_proto() {
    // `Unnamed`'s `#[transactional]` is on the method alone: `build()` cannot tell whose it is,
    // so an App built by hand is not asked for its data source (its call would say).
    let app = App::builder()
        .without_inventory()
        .link::<Unnamed>()
        .link::<tegu_tx::Transactional>()
        .link::<tegu_tx::Transactions>()
        .link::<tegu_tx::TxScope>();
    assert!(app.check().is_ok());
}
