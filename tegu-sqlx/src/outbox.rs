//! `OutboxTable<DB>`: tegu-outbox's outbox, a table of the `database` data source, written in the
//! request's transaction.

use std::sync::Arc;

use tegu_core::error::BoxError;
use tegu_core::futures::BoxFuture;
use tegu_outbox::{OutboxStore, Stored};
use tegu_tx::TxError;

use crate::Database;

/// tegu-outbox's outbox on SQLite or PostgreSQL: the table `di_outbox` (created when the App is
/// built if it does not exist; an event is pending while its `published_at` is null, and kept a
/// while after), with `di_outbox_set_aside`, where the events the broker refused for good are
/// kept with the reason, written through [`Database::conn`], so in the current
/// transaction: the request's, when the request's `#[transactional]` methods began it. An event
/// emitted where no transaction is open is written on its own.
///
/// Link it with the App, next to the `database` data source it uses:
/// `App::builder().link::<Database<Postgres>>().link::<OutboxTable<Postgres>>()`, or build it
/// with [`OutboxTable::new`] for a data source made by hand. It provides
/// `dyn tegu_outbox::OutboxStore`.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use tegu_core::App;
/// use tegu_outbox::OutboxStore;
/// use tegu_sqlx::{Database, OutboxTable, Sqlite};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
/// let app = App::builder()
///     .link::<Database<Sqlite>>()
///     .link::<OutboxTable<Sqlite>>()
///     .config_value("database.url", "sqlite::memory:")
///     .build()
///     .await?;
/// let outbox = app.get_object::<OutboxTable<Sqlite>>()?;
/// // No transaction is open here: written on its own.
/// let row = outbox.insert("5f0c1e2d", "todos.completed", br#"{"id":1}"#).await?;
/// let pending = outbox.pending(10).await?;
/// assert_eq!((pending.len(), pending[0].row), (1, row));
/// // Published at 1000 (ms since the epoch): kept, no longer pending.
/// outbox.published(&[row], 1_000).await?;
/// assert!(outbox.pending(10).await?.is_empty());
/// // The broker lost it: pending again, then published and, later, purged.
/// assert_eq!(outbox.republish(1_000).await?, 1);
/// assert_eq!(outbox.pending(10).await?.len(), 1);
/// outbox.published(&[row], 2_000).await?;
/// assert_eq!(outbox.purge(3_000).await?, 1);
/// # Ok(()) }
/// ```
pub struct OutboxTable<DB: sqlx::Database> {
    db: Arc<Database<DB>>,
}

impl<DB: sqlx::Database> std::fmt::Debug for OutboxTable<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxTable").field("database", &self.db).finish()
    }
}

/// The `UPDATE` marking `rows` published at `$1` (the rows, integers, written into the
/// statement, which both databases take).
fn mark_published(rows: &[i64]) -> String {
    let list: Vec<String> = rows.iter().map(i64::to_string).collect();
    format!("UPDATE di_outbox SET published_at = $1 WHERE id IN ({})", list.join(", "))
}

/// The indexes of the pending events (what the relay reads) and of the published ones (what
/// the purge and a republish read).
const INDEXES: [&str; 2] = [
    "CREATE INDEX IF NOT EXISTS di_outbox_pending ON di_outbox (id) WHERE published_at IS NULL",
    "CREATE INDEX IF NOT EXISTS di_outbox_published ON di_outbox (published_at) WHERE published_at IS NOT NULL",
];

/// `OutboxTable<DB>` as a proto (object name `outboxTable`) on the `database` data source,
/// providing `dyn OutboxStore`.
macro_rules! table {
    ($db:ty, $ddl:expr, $set_aside_ddl:expr, $build:ident, $as_store:ident) => {
        crate::database::on_database!(OutboxTable<$db>, "outboxTable", dyn OutboxStore, $build, $as_store);

        impl OutboxTable<$db> {
            /// The outbox in `db`, creating the tables `di_outbox` and `di_outbox_set_aside`
            /// if they do not exist.
            ///
            /// # Errors
            ///
            /// [`TxError::Database`] if a table cannot be created.
            pub async fn new(db: Arc<Database<$db>>) -> Result<Self, TxError> {
                db.create_if_missing($ddl, "creating the table di_outbox").await?;
                for index in INDEXES {
                    db.create_if_missing(index, "creating an index of di_outbox").await?;
                }
                db.create_if_missing($set_aside_ddl, "creating the table di_outbox_set_aside").await?;
                Ok(OutboxTable { db })
            }
        }

        impl OutboxStore for OutboxTable<$db> {
            fn insert<'a>(
                &'a self,
                id: &'a str,
                name: &'a str,
                payload: &'a [u8],
            ) -> BoxFuture<'a, Result<i64, BoxError>> {
                Box::pin(async move {
                    let mut conn = self.db.conn().await?;
                    let insert = "INSERT INTO di_outbox (event_id, name, payload) VALUES ($1, $2, $3) RETURNING id";
                    let row = sqlx::query_scalar(insert)
                        .bind(id)
                        .bind(name)
                        .bind(payload)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(|e| self.db.error("writing to the outbox", e))?;
                    Ok(row)
                })
            }

            fn pending(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>> {
                Box::pin(async move {
                    let pending = "SELECT id, event_id, name, payload FROM di_outbox WHERE published_at IS NULL ORDER BY id LIMIT $1";
                    let rows: Vec<(i64, String, String, Vec<u8>)> =
                        sqlx::query_as(pending)
                            .bind(i64::from(limit))
                            .fetch_all(self.db.pool())
                            .await
                            .map_err(|e| self.db.error("reading the outbox", e))?;
                    Ok(rows.into_iter().map(|(row, id, name, payload)| Stored { row, id, name, payload }).collect())
                })
            }

            fn published<'a>(&'a self, rows: &'a [i64], at: i64) -> BoxFuture<'a, Result<(), BoxError>> {
                Box::pin(async move {
                    if rows.is_empty() {
                        return Ok(());
                    }
                    sqlx::query(&mark_published(rows))
                        .bind(at)
                        .execute(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("marking events of the outbox published", e))?;
                    Ok(())
                })
            }

            fn republish(&self, since: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
                Box::pin(async move {
                    let done = sqlx::query("UPDATE di_outbox SET published_at = NULL WHERE published_at >= $1")
                        .bind(since)
                        .execute(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("making events of the outbox pending again", e))?;
                    Ok(done.rows_affected())
                })
            }

            fn purge(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
                Box::pin(async move {
                    let done = sqlx::query("DELETE FROM di_outbox WHERE published_at < $1")
                        .bind(before)
                        .execute(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("deleting events of the outbox published long ago", e))?;
                    Ok(done.rows_affected())
                })
            }

            /// Moves the row into `di_outbox_set_aside`, with the reason and the time, in one
            /// transaction.
            fn set_aside<'a>(&'a self, row: i64, reason: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
                Box::pin(async move {
                    let failed = |e| self.db.error("setting an event aside", e);
                    let mut tx = self.db.pool().begin().await.map_err(failed)?;
                    let copy = "INSERT INTO di_outbox_set_aside (id, event_id, name, payload, reason) \
                                SELECT id, event_id, name, payload, $2 FROM di_outbox WHERE id = $1";
                    sqlx::query(copy).bind(row).bind(reason).execute(&mut *tx).await.map_err(failed)?;
                    sqlx::query("DELETE FROM di_outbox WHERE id = $1")
                        .bind(row)
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    tx.commit().await.map_err(failed)?;
                    Ok(())
                })
            }
        }
    };
}

#[cfg(feature = "sqlite")]
table!(
    sqlx::Sqlite,
    "CREATE TABLE IF NOT EXISTS di_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BLOB NOT NULL, published_at INTEGER)",
    "CREATE TABLE IF NOT EXISTS di_outbox_set_aside (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BLOB NOT NULL, reason TEXT NOT NULL, set_aside_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    build_sqlite,
    sqlite_as_store
);
#[cfg(feature = "postgres")]
table!(
    sqlx::Postgres,
    "CREATE TABLE IF NOT EXISTS di_outbox (id BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BYTEA NOT NULL, published_at BIGINT)",
    "CREATE TABLE IF NOT EXISTS di_outbox_set_aside (id BIGINT PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BYTEA NOT NULL, reason TEXT NOT NULL, set_aside_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    build_postgres,
    postgres_as_store
);
