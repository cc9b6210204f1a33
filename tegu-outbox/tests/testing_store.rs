//! `testing::MemoryStore` does what tegu-sqlx's `OutboxTable` does: the same operations, run on
//! both (SQLite, and PostgreSQL when there is a server), give the same results, row numbers,
//! pending events, set-aside events and dead letters.

use std::sync::Arc;

use tegu_core::App;
use tegu_outbox::testing::MemoryStore;
use tegu_outbox::{DeadLetter, OutboxStore, Stored, Why};
use tegu_sqlx::{Database, OutboxTable, Postgres, Sqlite};

/// Every method of the trait, with the edges: rows it does not have, an empty list, a limit of
/// 0, the bounds of `republish` (inclusive) and `purge` (exclusive), a published row set aside,
/// and a row number after one set aside (never reused); headers kept in their order through a
/// republish and a set-aside. Each result, as text.
async fn script(store: &dyn OutboxStore) -> Vec<String> {
    let mut out = Vec::new();
    let pending = async |limit| {
        let pending: Vec<Stored> = store.pending(limit).await.unwrap();
        format!("pending({limit}) = {pending:?}")
    };
    let (c, d) = (c_headers(), d_headers());
    for (id, payload, headers) in
        [("a", "1", &[][..]), ("b", "22", &[]), ("c", "333", &c), ("d", "4444", &d), ("e", "", &[])]
    {
        let row = store.insert(id, "parcels.shipped", payload.as_bytes(), headers).await.unwrap();
        out.push(format!("insert({id}) = {row}"));
    }
    out.push(pending(2).await);
    store.published(&[1, 2], 1_000).await.unwrap();
    store.published(&[3], 2_000).await.unwrap();
    store.published(&[99], 2_000).await.unwrap();
    store.published(&[], 2_000).await.unwrap();
    out.push(pending(10).await);
    out.push(format!("republish(2001) = {}", store.republish(2_001).await.unwrap()));
    out.push(format!("republish(2000) = {}", store.republish(2_000).await.unwrap()));
    out.push(pending(10).await);
    store.published(&[3, 4], 3_000).await.unwrap();
    store.set_aside(4, "refused: too large").await.unwrap();
    store.set_aside(5, "refused: no such subject").await.unwrap();
    store.set_aside(42, "a row it does not have").await.unwrap();
    out.push(pending(10).await);
    let row = store.insert("f", "parcels.lost", b"{}", &[]).await.unwrap();
    out.push(format!("insert(f) = {row}"));
    out.push(format!("purge(1000) = {}", store.purge(1_000).await.unwrap()));
    out.push(format!("purge(1001) = {}", store.purge(1_001).await.unwrap()));
    out.push(format!("purge(1001) = {}", store.purge(1_001).await.unwrap()));
    out.push(format!("republish(0) = {}", store.republish(0).await.unwrap()));
    out.push(pending(0).await);
    out.push(pending(10).await);
    store.published(&[3, 6], 4_000).await.unwrap();
    out.push(format!("purge(max) = {}", store.purge(i64::MAX).await.unwrap()));
    out.push(pending(10).await);
    // The dead letters: the two set aside above, then a handler's and an unknown type's.
    let mut failed = DeadLetter::new(
        Why::Failed { handler: "app::Mailer::mail".into() },
        "g",
        "parcels.shipped",
        b"7".to_vec(),
        c.clone(),
    );
    (failed.error, failed.attempts, failed.at) = ("smtp down".into(), 3, 5_000);
    out.push(format!("dead_letter(g) = {}", store.dead_letter(&failed).await.unwrap()));
    let mut unknown = DeadLetter::new(Why::Unknown, "h", "parcels.returned", b"{}".to_vec(), Vec::new());
    (unknown.error, unknown.at) = ("no type".into(), 6_000);
    out.push(format!("dead_letter(h) = {}", store.dead_letter(&unknown).await.unwrap()));
    let page = |after, limit| async move {
        let page = store.dead_letters(after, limit).await.unwrap();
        format!("dead_letters({after}, {limit}) = {:?}", page.iter().map(digest).collect::<Vec<_>>())
    };
    out.push(page(0, 2).await);
    out.push(page(2, 10).await);
    out.push(page(4, 10).await);
    out.push(format!("dead_letter_by_id(3) = {:?}", store.dead_letter_by_id(3).await.unwrap().as_ref().map(digest)));
    out.push(format!("dead_letter_by_id(99) = {:?}", store.dead_letter_by_id(99).await.unwrap().as_ref().map(digest)));
    out.push(format!("remove_dead_letter(4) = {}", store.remove_dead_letter(4).await.unwrap()));
    out.push(format!("remove_dead_letter(4) = {}", store.remove_dead_letter(4).await.unwrap()));
    out.push(format!("purge_dead_letters(5000) = {}", store.purge_dead_letters(5_000).await.unwrap()));
    out.push(format!("purge_dead_letters(5001) = {}", store.purge_dead_letters(5_001).await.unwrap()));
    out.push(page(0, 10).await);
    out
}

/// A dead letter as the script shows it: all but the time it was set aside (the store's clock
/// for those set aside).
fn digest(d: &DeadLetter) -> String {
    format!(
        "{} {} {} {} {} {:?} {:?} x{}",
        d.id,
        d.why.kind(),
        d.why.handler().unwrap_or("-"),
        d.event_id,
        d.name,
        String::from_utf8_lossy(&d.payload),
        d.headers,
        d.attempts
    ) + &format!(" {:?}", d.error)
}

/// The headers of row 3 (`c`): one.
fn c_headers() -> Vec<(String, String)> {
    vec![("tegu-tenant".into(), "acme".into())]
}

/// The headers of row 4 (`d`): two, not in alphabetical order.
fn d_headers() -> Vec<(String, String)> {
    vec![("x-request-id".into(), "r-1".into()), ("tegu-tenant".into(), "globex".into())]
}

/// The column `headers` of the row set aside with `d_headers`, as tegu-sqlx stores it.
const D_STORED: &str = r#"{"x-request-id":"r-1","tegu-tenant":"globex"}"#;

/// What `script` expects, whichever store runs it.
fn expected() -> Vec<&'static str> {
    vec![
        "insert(a) = 1",
        "insert(b) = 2",
        "insert(c) = 3",
        "insert(d) = 4",
        "insert(e) = 5",
        r#"pending(2) = [Stored { row: 1, id: "a", name: "parcels.shipped", payload: [49], headers: [] }, Stored { row: 2, id: "b", name: "parcels.shipped", payload: [50, 50], headers: [] }]"#,
        r#"pending(10) = [Stored { row: 4, id: "d", name: "parcels.shipped", payload: [52, 52, 52, 52], headers: [("x-request-id", "r-1"), ("tegu-tenant", "globex")] }, Stored { row: 5, id: "e", name: "parcels.shipped", payload: [], headers: [] }]"#,
        "republish(2001) = 0",
        "republish(2000) = 1",
        r#"pending(10) = [Stored { row: 3, id: "c", name: "parcels.shipped", payload: [51, 51, 51], headers: [("tegu-tenant", "acme")] }, Stored { row: 4, id: "d", name: "parcels.shipped", payload: [52, 52, 52, 52], headers: [("x-request-id", "r-1"), ("tegu-tenant", "globex")] }, Stored { row: 5, id: "e", name: "parcels.shipped", payload: [], headers: [] }]"#,
        "pending(10) = []",
        "insert(f) = 6",
        "purge(1000) = 0",
        "purge(1001) = 2",
        "purge(1001) = 0",
        "republish(0) = 1",
        "pending(0) = []",
        r#"pending(10) = [Stored { row: 3, id: "c", name: "parcels.shipped", payload: [51, 51, 51], headers: [("tegu-tenant", "acme")] }, Stored { row: 6, id: "f", name: "parcels.lost", payload: [123, 125], headers: [] }]"#,
        "purge(max) = 2",
        "pending(10) = []",
        "dead_letter(g) = 3",
        "dead_letter(h) = 4",
        r#"dead_letters(0, 2) = ["1 refused - d parcels.shipped \"4444\" [(\"x-request-id\", \"r-1\"), (\"tegu-tenant\", \"globex\")] x1 \"refused: too large\"", "2 refused - e parcels.shipped \"\" [] x1 \"refused: no such subject\""]"#,
        r#"dead_letters(2, 10) = ["3 failed app::Mailer::mail g parcels.shipped \"7\" [(\"tegu-tenant\", \"acme\")] x3 \"smtp down\"", "4 unknown - h parcels.returned \"{}\" [] x1 \"no type\""]"#,
        "dead_letters(4, 10) = []",
        r#"dead_letter_by_id(3) = Some("3 failed app::Mailer::mail g parcels.shipped \"7\" [(\"tegu-tenant\", \"acme\")] x3 \"smtp down\"")"#,
        "dead_letter_by_id(99) = None",
        "remove_dead_letter(4) = true",
        "remove_dead_letter(4) = false",
        "purge_dead_letters(5000) = 0",
        "purge_dead_letters(5001) = 1",
        r#"dead_letters(0, 10) = ["1 refused - d parcels.shipped \"4444\" [(\"x-request-id\", \"r-1\"), (\"tegu-tenant\", \"globex\")] x1 \"refused: too large\"", "2 refused - e parcels.shipped \"\" [] x1 \"refused: no such subject\""]"#,
    ]
}

/// The events set aside, dead letters of the kind `refused`, as `(id, name, payload, reason)`.
type Aside = Vec<(String, String, Vec<u8>, String)>;

fn expected_aside() -> Aside {
    vec![
        ("d".into(), "parcels.shipped".into(), b"4444".to_vec(), "refused: too large".into()),
        ("e".into(), "parcels.shipped".into(), Vec::new(), "refused: no such subject".into()),
    ]
}

const ASIDE: &str =
    "SELECT event_id, name, payload, error FROM di_outbox_dead_letters WHERE kind = 'refused' ORDER BY id";

/// The headers of the events set aside, as stored.
const ASIDE_HEADERS: &str = "SELECT headers FROM di_outbox_dead_letters ORDER BY id";

#[tokio::test]
async fn the_memory_store_runs_the_script_as_expected() {
    let store = MemoryStore::new();
    assert_eq!(script(&store).await, expected());
    let aside: Aside = store
        .dead()
        .into_iter()
        .filter(|dead| dead.why == tegu_outbox::Why::Refused)
        .map(|dead| (dead.event_id, dead.name, dead.payload, dead.error))
        .collect();
    assert_eq!(aside, expected_aside());
    let headers: Vec<_> = store.dead().into_iter().map(|dead| dead.headers).collect();
    assert_eq!(headers, [d_headers(), Vec::new()], "set aside with their headers");
    assert!(store.rows().is_empty(), "{:?}", store.rows());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_outbox_table_runs_the_script_as_the_memory_store_does() {
    let url = format!("sqlite://{}?mode=rwc", tegu_test_support::fresh_sqlite("testing-store").display());
    let app = App::builder()
        .link::<Database<Sqlite>>()
        .link::<OutboxTable<Sqlite>>()
        .config_value("database.url", &url)
        .build()
        .await
        .unwrap();
    let table: Arc<OutboxTable<Sqlite>> = app.get_object().unwrap();
    assert_eq!(script(&*table).await, expected());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let aside: Aside = sqlx::query_as(ASIDE).fetch_all(&pool).await.unwrap();
    assert_eq!(aside, expected_aside());
    let headers: Vec<Option<String>> = sqlx::query_scalar(ASIDE_HEADERS).fetch_all(&pool).await.unwrap();
    assert_eq!(headers, [Some(D_STORED.to_owned()), None]);
    pool.close().await;
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_outbox_table_runs_the_script_as_the_memory_store_does() {
    let test = "testing_store";
    let url = match tegu_test_support::servers::postgres_database(&format!("outbox_{}_{test}", std::process::id())) {
        Ok(url) => url,
        Err(why) => return tegu_test_support::servers::skip(test, why),
    };
    let app = App::builder()
        .link::<Database<Postgres>>()
        .link::<OutboxTable<Postgres>>()
        .config_value("database.url", &url)
        .build()
        .await
        .unwrap();
    let table: Arc<OutboxTable<Postgres>> = app.get_object().unwrap();
    assert_eq!(script(&*table).await, expected());
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let aside: Aside = sqlx::query_as(ASIDE).fetch_all(&pool).await.unwrap();
    assert_eq!(aside, expected_aside());
    let headers: Vec<Option<String>> = sqlx::query_scalar(ASIDE_HEADERS).fetch_all(&pool).await.unwrap();
    assert_eq!(headers, [Some(D_STORED.to_owned()), None]);
    pool.close().await;
    app.shutdown().await.unwrap();
}
