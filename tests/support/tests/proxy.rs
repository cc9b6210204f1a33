//! The fault-injecting proxy against a real PostgreSQL: a `COMMIT` cut before it is sent rolls
//! the transaction back, one cut after its answer is applied; down refuses connections.

use sqlx::{Connection, Executor, PgConnection};
use tegu_test_support::proxy::{Cut, FaultProxy, Protocol};
use tegu_test_support::servers;

async fn setup(table: &str) -> Option<(FaultProxy, String, String)> {
    let admin = match servers::postgres_database(table) {
        Ok(url) => url,
        Err(why) => {
            servers::skip(table, why);
            return None;
        }
    };
    let host = admin.split('@').nth(1)?.split('/').next()?.to_owned();
    let upstream = tokio::net::lookup_host(&host).await.ok()?.next()?;
    let proxy = FaultProxy::start(upstream, Protocol::Postgres).expect("a proxy");
    let mut conn = PgConnection::connect(&admin).await.expect("the server");
    conn.execute("CREATE TABLE t (n INT)").await.expect("a table");
    let url = format!("postgres://postgres@{}/{table}?sslmode=disable", proxy.addr());
    Some((proxy, url, admin))
}

async fn count(admin: &str) -> i64 {
    let mut conn = PgConnection::connect(admin).await.expect("the server");
    sqlx::query_scalar("SELECT COUNT(*) FROM t").fetch_one(&mut conn).await.expect("a count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_cut_after_its_answer_is_applied_and_the_client_hears_nothing() {
    let Some((proxy, url, admin)) = setup("proxy_after_answer").await else { return };
    let mut conn = PgConnection::connect(&url).await.expect("through the proxy");
    proxy.cut_commit(1, Cut::AfterAnswer);
    conn.execute("BEGIN").await.unwrap();
    conn.execute("INSERT INTO t VALUES (1)").await.unwrap();
    let committed = conn.execute("COMMIT").await;
    assert!(committed.is_err(), "the answer was cut: {committed:?}");
    assert_eq!(count(&admin).await, 1, "applied");
    assert_eq!(proxy.cuts().len(), 1);
    assert_eq!(proxy.commits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_cut_before_it_is_sent_rolls_back() {
    let Some((proxy, url, admin)) = setup("proxy_before_send").await else { return };
    let mut conn = PgConnection::connect(&url).await.expect("through the proxy");
    proxy.cut_commit(1, Cut::BeforeSend);
    conn.execute("BEGIN").await.unwrap();
    conn.execute("INSERT INTO t VALUES (1)").await.unwrap();
    assert!(conn.execute("SELECT 1; COMMIT; BEGIN").await.is_err());
    // The server sees the connection go, and rolls the transaction back.
    let mut waited = 0;
    while count(&admin).await != 0 && waited < 50 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        waited += 1;
    }
    assert_eq!(count(&admin).await, 0);
    // The next connection commits through the proxy.
    let mut conn = PgConnection::connect(&url).await.expect("through the proxy");
    conn.execute("BEGIN; INSERT INTO t VALUES (2); COMMIT").await.unwrap();
    assert_eq!(count(&admin).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_down_cuts_and_refuses_connections_until_it_is_up() {
    let Some((proxy, url, _)) = setup("proxy_down").await else { return };
    let mut conn = PgConnection::connect(&url).await.expect("through the proxy");
    proxy.set_down(true);
    assert!(conn.execute("SELECT 1").await.is_err(), "cut");
    assert!(PgConnection::connect(&url).await.is_err(), "refused");
    proxy.set_down(false);
    let mut conn = PgConnection::connect(&url).await.expect("up again");
    conn.execute("SELECT 1").await.unwrap();
}
