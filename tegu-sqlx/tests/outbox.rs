//! `OutboxTable`'s column `headers` on SQLite and PostgreSQL: an event's headers are stored as
//! a JSON object (null for none), given back in their order, and set aside with the event; the
//! tables an earlier version made, without the column, get it when the App is built (by two
//! instances starting at once too), and their rows come out without headers; what they set
//! aside moves to the dead letters, once.

mod common;

use tegu_core::App;
use tegu_outbox::OutboxStore;
use tegu_sqlx::{Database, OutboxTable, Postgres, Sqlite};

/// The tables as the version before the column `headers` made them, and a row it wrote.
const OLD_SQLITE: [&str; 4] = [
    "CREATE TABLE di_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BLOB NOT NULL, published_at INTEGER)",
    "CREATE TABLE di_outbox_set_aside (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BLOB NOT NULL, reason TEXT NOT NULL, set_aside_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    "INSERT INTO di_outbox (event_id, name, payload) VALUES ('old', 'parcels.shipped', x'7b7d')",
    "INSERT INTO di_outbox_set_aside (id, event_id, name, payload, reason) VALUES (7, 'refused-old', 'parcels.shipped', x'7b7d', 'too large')",
];

/// The same on PostgreSQL.
const OLD_POSTGRES: [&str; 4] = [
    "CREATE TABLE di_outbox (id BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BYTEA NOT NULL, published_at BIGINT)",
    "CREATE TABLE di_outbox_set_aside (id BIGINT PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BYTEA NOT NULL, reason TEXT NOT NULL, set_aside_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    "INSERT INTO di_outbox (event_id, name, payload) VALUES ('old', 'parcels.shipped', '\\x7b7d')",
    "INSERT INTO di_outbox_set_aside (id, event_id, name, payload, reason) VALUES (7, 'refused-old', 'parcels.shipped', '\\x7b7d', 'too large')",
];

/// The headers of the event the tests write: not in alphabetical order.
fn headers() -> Vec<(String, String)> {
    vec![
        ("traceparent".to_owned(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned()),
        ("tegu-tenant".to_owned(), "acme".to_owned()),
    ]
}

/// How `headers()` is stored.
const STORED: &str =
    r#"{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tegu-tenant":"acme"}"#;

/// The tests for database `$db` (pool `$pool`), the earlier version's tables made by `$old`, a
/// fresh database's URL from `$url`.
macro_rules! tests {
    ($module:ident, $db:ty, $pool:ty, $old:expr, $url:path) => {
        mod $module {
            use super::*;

            /// An App with the outbox table on `url`.
            async fn app(url: &str) -> App {
                App::builder()
                    .link::<Database<$db>>()
                    .link::<OutboxTable<$db>>()
                    .config_value("database.url", url)
                    .build()
                    .await
                    .expect("the App with the outbox table")
            }

            /// The column `headers` of each row of `table`, by row.
            async fn stored(pool: &$pool, table: &str) -> Vec<(i64, Option<String>)> {
                let select = format!("SELECT id, headers FROM {table} ORDER BY id");
                sqlx::query_as(&select).fetch_all(pool).await.unwrap()
            }

            /// A new event with `headers()`, one without, and one set aside with its headers:
            /// as stored, and as given back.
            async fn round_trip(app: &App, pool: &$pool, first: i64) {
                let table = app.get_object::<OutboxTable<$db>>().unwrap();
                let with = table.insert("with", "parcels.shipped", b"{}", &headers()).await.unwrap();
                let without = table.insert("without", "parcels.shipped", b"{}", &[]).await.unwrap();
                let aside = table.insert("aside", "parcels.shipped", b"{}", &headers()).await.unwrap();
                assert_eq!((with, without, aside), (first, first + 1, first + 2));
                let stored_rows = stored(pool, "di_outbox").await;
                assert_eq!(
                    stored_rows[stored_rows.len() - 3..],
                    [(with, Some(STORED.to_owned())), (without, None), (aside, Some(STORED.to_owned()))]
                );
                let pending = table.pending(10).await.unwrap();
                let pending: Vec<_> =
                    pending.into_iter().filter(|e| e.row >= first).map(|e| (e.id, e.headers)).collect();
                assert_eq!(
                    pending,
                    [
                        ("with".to_owned(), headers()),
                        ("without".to_owned(), Vec::new()),
                        ("aside".to_owned(), headers())
                    ]
                );
                // Published, then published again: the headers stay with the row.
                table.published(&[with], 1_000).await.unwrap();
                assert_eq!(table.republish(1_000).await.unwrap(), 1);
                let again =
                    table.pending(10).await.unwrap().into_iter().find(|e| e.row == with).expect("pending again");
                assert_eq!(again.headers, headers());
                table.set_aside(aside, "refused").await.unwrap();
                let dead: Vec<Option<String>> =
                    sqlx::query_scalar("SELECT headers FROM di_outbox_dead_letters WHERE event_id = 'aside'")
                        .fetch_all(pool)
                        .await
                        .unwrap();
                assert_eq!(dead, [Some(STORED.to_owned())]);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn headers_are_stored_with_the_event_and_given_back_in_their_order() {
                let Some(url) = $url("outbox_headers").await else { return };
                let app = app(&url).await;
                let pool = <$pool>::connect(&url).await.unwrap();
                round_trip(&app, &pool, 1).await;
                pool.close().await;
                app.shutdown().await.unwrap();
            }

            /// Tables of the earlier version, with a row: two instances start at once on them,
            /// and both get the column (one adds it, the other finds it added); the old row
            /// comes out without headers, and new rows have theirs. A third start finds the
            /// column there and changes nothing.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tables_of_the_earlier_version_get_the_column_at_start() {
                let Some(url) = $url("outbox_upgrade").await else { return };
                let pool = <$pool>::connect(&url).await.unwrap();
                for statement in $old {
                    sqlx::query(statement).execute(&pool).await.unwrap();
                }
                let (a, b) = tokio::join!(app(&url), app(&url));
                let table = a.get_object::<OutboxTable<$db>>().unwrap();
                let pending = table.pending(10).await.unwrap();
                assert_eq!(pending.len(), 1);
                assert_eq!((pending[0].id.as_str(), &pending[0].headers[..]), ("old", &[][..]));
                assert_eq!(stored(&pool, "di_outbox").await, [(1, None)]);
                assert!(stored(&pool, "di_outbox_set_aside").await.is_empty(), "the column is there, the row moved");
                // What the earlier version set aside is a dead letter now, once, though two
                // instances started at once.
                let dead = table.dead_letters(0, 10).await.unwrap();
                let dead: Vec<_> = dead.iter().map(|d| (d.event_id.as_str(), d.error.as_str(), &d.why)).collect();
                assert_eq!(dead, [("refused-old", "too large", &tegu_outbox::Why::Refused)]);
                round_trip(&b, &pool, 2).await;
                let c = app(&url).await;
                assert_eq!(stored(&pool, "di_outbox").await.len(), 3, "started again: nothing changed");
                for app in [a, b, c] {
                    app.shutdown().await.unwrap();
                }
                pool.close().await;
            }
        }
    };
}

tests!(sqlite, Sqlite, sqlx::SqlitePool, OLD_SQLITE, common::urls::sqlite);
tests!(postgres, Postgres, sqlx::PgPool, OLD_POSTGRES, common::urls::postgres);
