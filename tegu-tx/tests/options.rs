//! The options of the transaction a method begins, with a data source whose transactions
//! journal what is done in them: how each propagation applies them (to a transaction it
//! begins, never to one it joins), the timeout of the request's transaction, the rollback
//! rule on the request's transaction and on a savepoint, the order of a retry's tries, and a
//! data source that cannot set a transaction up refusing rather than running a weaker one.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tegu_core::{App, ProtoDef, singleton_proto};
use tegu_tx::testing::JournalSource;
use tegu_tx::{ErrorClass, Transactions, TxConn, TxError, TxFuture, TxSource, transactional};

#[derive(Debug)]
pub enum ShopError {
    Tx(TxError),
    /// Recorded all the same (the rollback rule).
    OutOfStock,
    Other,
}

impl From<TxError> for ShopError {
    fn from(e: TxError) -> Self {
        ShopError::Tx(e)
    }
}

fn out_of_stock(e: &ShopError) -> bool {
    matches!(e, ShopError::OutOfStock)
}

#[singleton_proto]
pub struct Shop {
    #[inject]
    transactions: Arc<Transactions>,
    tries: AtomicUsize,
}

impl Shop {
    async fn write(&self, what: &str) -> Result<(), TxError> {
        JournalSource::write(&self.transactions, "journal", what).await
    }

    #[transactional(isolation = "serializable", read_only, timeout_ms = 500)]
    pub async fn report(&self) -> Result<(), ShopError> {
        self.write("report").await?;
        self.join().await
    }

    /// Joins the current transaction: its own options set nothing up.
    #[transactional(isolation = "repeatable_read")]
    pub async fn join(&self) -> Result<(), ShopError> {
        Ok(self.write("joined").await?)
    }

    #[transactional(timeout_ms = 100)]
    pub async fn slow(&self) -> Result<(), ShopError> {
        self.write("slow").await?;
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok(())
    }

    #[transactional(commit_on = out_of_stock)]
    pub async fn order(&self, stock: bool) -> Result<(), ShopError> {
        self.write("order").await?;
        if stock { Err(ShopError::Other) } else { Err(ShopError::OutOfStock) }
    }

    #[transactional]
    pub async fn outer(&self, stock: bool) -> Result<(), ShopError> {
        self.write("outer").await?;
        let inner = self.reserve(stock).await;
        assert!(inner.is_err());
        Ok(())
    }

    #[transactional(nested, commit_on = out_of_stock)]
    pub async fn reserve(&self, stock: bool) -> Result<(), ShopError> {
        self.write("reserve").await?;
        if stock { Err(ShopError::Other) } else { Err(ShopError::OutOfStock) }
    }

    /// Its own transaction, with a rule; joined inside it, a method with a rule of its own
    /// fails `OutOfStock`, taken in stride, then this one fails `Other`: rolled back.
    #[transactional(requires_new, commit_on = out_of_stock)]
    pub async fn checkout(&self) -> Result<(), ShopError> {
        self.write("checkout").await?;
        assert!(matches!(self.order(false).await, Err(ShopError::OutOfStock)));
        Err(ShopError::Other)
    }

    /// Conflicts on its first two tries, then succeeds.
    #[transactional(requires_new, retry = 3, backoff_ms = 1)]
    pub async fn retried(&self, label: &str) -> Result<usize, ShopError> {
        let attempt = self.tries.fetch_add(1, Ordering::SeqCst) + 1;
        self.write(&format!("{label} try {attempt}")).await?;
        if attempt < 3 {
            let tx = self.transactions.current("journal").expect("the method's transaction");
            tx.note_failure(ErrorClass::SerializationFailure);
            return Err(ShopError::Other);
        }
        Ok(attempt)
    }

    /// Fails with a class that is no conflict: never retried.
    #[transactional(requires_new, retry = 3, backoff_ms = 1)]
    pub async fn unique_violation(&self) -> Result<(), ShopError> {
        self.tries.fetch_add(1, Ordering::SeqCst);
        let tx = self.transactions.current("journal").expect("the method's transaction");
        tx.note_failure(ErrorClass::UniqueViolation);
        Err(ShopError::Other)
    }
}

async fn app(source: &JournalSource) -> (App, Arc<Shop>) {
    let app = App::builder().register(source.proto("journal")).build().await.expect("the App builds");
    let shop = app.get_object::<Shop>().unwrap();
    (app, shop)
}

#[tokio::test]
async fn the_options_set_up_the_transaction_a_method_begins_and_not_one_it_joins() {
    let source = JournalSource::new();
    let (app, shop) = app(&source).await;
    app.run_in_context(shop.report()).await.unwrap();
    assert_eq!(
        source.journal(),
        ["BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY TIMEOUT 500ms", "write report", "write joined", "COMMIT"]
    );
}

#[tokio::test]
async fn the_request_s_transaction_past_the_timeout_of_the_method_that_began_it_rolls_back() {
    let source = JournalSource::new();
    let (app, shop) = app(&source).await;
    let out = app.run_in_context(shop.slow()).await;
    let Err(ShopError::Tx(TxError::TimedOut { after, .. })) = out else { panic!("{out:?}") };
    assert_eq!(after, Duration::from_millis(100));
    assert_eq!(source.journal(), ["BEGIN TIMEOUT 100ms", "write slow", "ROLLBACK"]);
    // The next request begins a transaction of its own, set up as its method says.
    app.run_in_context(shop.join()).await.unwrap();
    assert_eq!(source.journal()[3..], ["BEGIN ISOLATION LEVEL REPEATABLE READ", "write joined", "COMMIT"]);
}

#[tokio::test]
async fn a_rollback_rule_keeps_the_request_s_transaction_and_the_savepoint() {
    let source = JournalSource::new();
    let (app, shop) = app(&source).await;
    assert!(matches!(app.run_in_context(shop.order(false)).await, Err(ShopError::OutOfStock)));
    assert_eq!(source.journal(), ["BEGIN", "write order", "COMMIT"]);
    source.clear();
    assert!(matches!(app.run_in_context(shop.order(true)).await, Err(ShopError::Other)));
    assert_eq!(source.journal(), ["BEGIN", "write order", "ROLLBACK"]);
    source.clear();
    app.run_in_context(shop.outer(false)).await.unwrap();
    assert_eq!(source.journal(), ["BEGIN", "write outer", "SAVEPOINT", "write reserve", "RELEASE", "COMMIT"]);
    source.clear();
    app.run_in_context(shop.outer(true)).await.unwrap();
    assert_eq!(
        source.journal(),
        ["BEGIN", "write outer", "SAVEPOINT", "write reserve", "ROLLBACK TO", "RELEASE", "COMMIT"]
    );
}

/// The rule of a method that joined decides nothing, and never the method around it.
#[tokio::test]
async fn a_joined_method_s_rule_does_not_decide_for_the_method_around_it() {
    let source = JournalSource::new();
    let (app, shop) = app(&source).await;
    assert!(matches!(app.run_in_context(shop.checkout()).await, Err(ShopError::Other)));
    assert_eq!(source.journal(), ["BEGIN", "write checkout", "write order", "ROLLBACK"]);
}

#[tokio::test]
async fn a_retried_method_runs_whole_in_a_new_transaction_each_try() {
    let source = JournalSource::new();
    let (app, shop) = app(&source).await;
    assert_eq!(app.run_in_context(shop.retried("pay")).await.unwrap(), 3);
    assert_eq!(
        source.journal(),
        [
            "BEGIN",
            "write pay try 1",
            "ROLLBACK",
            "BEGIN",
            "write pay try 2",
            "ROLLBACK",
            "BEGIN",
            "write pay try 3",
            "COMMIT"
        ]
    );
    source.clear();
    shop.tries.store(0, Ordering::SeqCst);
    assert!(matches!(app.run_in_context(shop.unique_violation()).await, Err(ShopError::Other)));
    assert_eq!(shop.tries.load(Ordering::SeqCst), 1);
    assert_eq!(source.journal(), ["BEGIN", "ROLLBACK"]);
}

/// A data source with `begin` alone.
struct Plain;

impl TxSource for Plain {
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        Box::pin(async { Ok(Box::new(PlainTx) as Box<dyn TxConn>) })
    }
}

struct PlainTx;

impl TxConn for PlainTx {
    fn commit(self: Box<Self>) -> TxFuture<'static, ()> {
        Box::pin(async { Ok(()) })
    }
    fn rollback(self: Box<Self>) -> TxFuture<'static, ()> {
        Box::pin(async { Ok(()) })
    }
    fn savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn release_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn rollback_to_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[singleton_proto]
pub struct Reports;

impl Reports {
    #[transactional(read_only)]
    pub async fn read(&self) -> Result<(), TxError> {
        Ok(())
    }

    #[transactional(timeout_ms = 1000)]
    pub async fn bounded(&self) -> Result<(), TxError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_source_that_cannot_set_a_transaction_up_refuses_rather_than_run_a_weaker_one() {
    let app = App::builder()
        .register(ProtoDef::singleton::<Plain>(|_| Ok(Plain)).name("plain").provides::<Plain, dyn TxSource>(|p| p))
        .build()
        .await
        .unwrap();
    let reports = app.get_object::<Reports>().unwrap();
    let refused = app.run_in_context(reports.read()).await.unwrap_err();
    assert!(refused.to_string().contains("begin_with"), "{refused}");
    // The timeout needs nothing of the source: tegu-tx enforces it.
    app.run_in_context(reports.bounded()).await.unwrap();
}
