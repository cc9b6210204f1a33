//! A `COMMIT` whose answer is lost (the connection cut by a proxy once PostgreSQL applied it, or
//! before it reached the server): never a retryable failure for a transaction that committed.
//! Following the guide's retry rule (run it again while `class().retryable()`) stores the order
//! once, with or without `resolve_commits`; with it, the method learns the real outcome.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::Arc;

use sqlx::{Connection, Executor, PgConnection};
use tegu_core::registry::{Dependency, InjectKind};
use tegu_core::{App, ProtoDef, singleton_proto};
use tegu_sqlx::{Database, Postgres};
use tegu_test_support::proxy::{Cut, FaultProxy, Protocol};
use tegu_tx::{ErrorClass, Transactions, TxError, TxSource, transactional};

#[singleton_proto]
pub struct Orders {
    #[inject]
    db: Arc<Database<Postgres>>,
    #[inject]
    events: Arc<tegu_core::events::EventBus>,
}

/// Emitted with each order.
pub struct Placed;

impl Orders {
    /// Stores an order in a transaction of its own, committed before it returns.
    #[transactional(requires_new)]
    pub async fn place(&self) -> Result<(), TxError> {
        let mut conn = self.db.conn().await?;
        let done = sqlx::query("INSERT INTO orders (n) VALUES (1)").execute(&mut *conn).await;
        self.events.emit(Placed);
        done.map(drop).map_err(|e| self.db.error("storing an order", e))
    }
}

/// What the handlers of `Placed` were told.
#[singleton_proto]
#[derive(Default)]
pub struct Told {
    lines: std::sync::Mutex<Vec<&'static str>>,
}

#[tegu_core::handlers]
impl Told {
    #[event_handler]
    async fn committed(&self, _: &Placed) {
        self.lines.lock().unwrap().push("after_commit");
    }

    #[event_handler(after_rollback)]
    async fn rolled_back(&self, _: &Placed) {
        self.lines.lock().unwrap().push("after_rollback");
    }
}

/// A database of its own behind a proxy; `None` where there is no server.
async fn setup(name: &str, resolve: bool) -> Option<(App, FaultProxy, String)> {
    let admin = match tegu_test_support::servers::postgres_database(name) {
        Ok(url) => url,
        Err(why) => {
            tegu_test_support::servers::skip(name, why);
            return None;
        }
    };
    let mut conn = PgConnection::connect(&admin).await.unwrap();
    conn.execute("CREATE TABLE orders (n INT NOT NULL)").await.unwrap();
    let host = admin.split('@').nth(1)?.split('/').next()?.to_owned();
    let upstream = tokio::net::lookup_host(&host).await.ok()?.next()?;
    let proxy = FaultProxy::start(upstream, Protocol::Postgres).unwrap();
    let url = format!("postgres://postgres@{}/{name}?sslmode=disable", proxy.addr());
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let app = App::builder()
        .register(
            ProtoDef::singleton::<Database<Postgres>>(move |r| {
                Ok(Database::new("database", pool.clone(), r.arc::<Transactions>(0)?).resolve_commits(resolve))
            })
            .name("database")
            .dep(Dependency::new::<Transactions>(InjectKind::Arc, None))
            .provides::<Database<Postgres>, dyn TxSource>(|db| db),
        )
        .build()
        .await
        .unwrap();
    Some((app, proxy, admin))
}

/// Places the order as the guide says: again while the failure is retryable. The first
/// failure, if any.
async fn place_with_retries(app: &App) -> Option<TxError> {
    let orders = app.get_object::<Orders>().unwrap();
    let mut first = None;
    for _ in 0..3 {
        match app.run_in_context(orders.place()).await {
            Ok(()) => return first,
            Err(error) => {
                let retryable = error.class().retryable();
                first.get_or_insert(error);
                if !retryable {
                    return first;
                }
            }
        }
    }
    first
}

async fn stored(admin: &str) -> i64 {
    let mut conn = PgConnection::connect(admin).await.unwrap();
    sqlx::query_scalar("SELECT COUNT(*) FROM orders").fetch_one(&mut conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_is_lost_is_an_unknown_outcome_never_retried() {
    let Some((app, proxy, admin)) = setup("commit_answer_lost", false).await else { return };
    proxy.cut_commit(1, Cut::AfterAnswer);
    let failed = place_with_retries(&app).await.expect("the commit's answer was lost");
    assert_eq!(failed.class(), ErrorClass::OutcomeUnknown, "{failed}");
    assert!(!failed.class().retryable());
    assert_eq!(stored(&admin).await, 1, "applied once, never run again");
    app.shutdown().await.unwrap();
    // Neither handler is told a state that may be false.
    assert!(app.get_object::<Told>().unwrap().lines.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_resolve_commits_a_commit_whose_answer_is_lost_succeeds_once_applied() {
    let Some((app, proxy, admin)) = setup("commit_answer_resolved", true).await else { return };
    proxy.cut_commit(1, Cut::AfterAnswer);
    let failed = place_with_retries(&app).await;
    assert!(failed.is_none(), "the database says it committed: {failed:?}");
    assert_eq!(proxy.cuts().len(), 1, "the answer was cut");
    assert_eq!(stored(&admin).await, 1);
    app.shutdown().await.unwrap();
    assert_eq!(*app.get_object::<Told>().unwrap().lines.lock().unwrap(), ["after_commit"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_resolve_commits_a_commit_that_never_reached_the_server_is_retried_and_stored_once() {
    let Some((app, proxy, admin)) = setup("commit_never_sent", true).await else { return };
    proxy.cut_commit(1, Cut::BeforeSend);
    let failed = place_with_retries(&app).await.expect("the first commit was cut");
    assert_eq!(failed.class(), ErrorClass::ConnectionLost, "{failed}");
    assert!(failed.class().retryable());
    assert_eq!(stored(&admin).await, 1, "rolled back, then stored by the retry");
    app.shutdown().await.unwrap();
    let mut told = app.get_object::<Told>().unwrap().lines.lock().unwrap().clone();
    told.sort();
    assert_eq!(told, ["after_commit", "after_rollback"], "the first rolled back, the retry committed");
}
