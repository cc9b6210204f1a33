//! `OutboxTable<DB>`: tegu-outbox's outbox, a table of the `database` data source, written in the
//! request's transaction.

use std::sync::Arc;

use tegu_core::error::BoxError;
use tegu_core::futures::BoxFuture;
use tegu_outbox::{DeadLetter, OutboxStore, Recorded, Stored, Why};
use tegu_tx::TxError;

use crate::Database;

/// tegu-outbox's outbox on SQLite or PostgreSQL: the table `di_outbox` (created when the App is
/// built if it does not exist; an event is pending while its `published_at` is null, and kept a
/// while after), with `di_outbox_dead_letters`, where the events the outbox could not bring to
/// their end are kept (refused by the broker, failed by a handler on every try, undecodable, of
/// an unknown type), written through [`Database::conn`], so in the current
/// transaction: the request's, when the request's `#[transactional]` methods began it. An event
/// emitted where no transaction is open is written on its own.
///
/// `di_outbox_inbox` records which handler handled which event, for which receiver (the
/// instance's consumer): written the same way, in the handler's transaction, so that what a
/// `#[transactional]` handler writes in this database and the record commit together.
///
/// The table `di_outbox_set_aside` holds what an earlier version set aside: its rows move to
/// the dead letters when the App is built.
///
/// An event's headers (the emitting request's lineage: its tenant, trace context, request id)
/// are the column `headers` of the tables: a JSON object of header name to value
/// (`{"tegu-tenant":"acme"}`), or null when it has none. A table made by an earlier version,
/// without the column, gets it when the App is built (`ALTER TABLE .. ADD COLUMN headers
/// TEXT`, once: only where the column is missing); its rows have no headers.
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
/// // No transaction is open here: written on its own, with the emitting request's lineage.
/// let headers = [("tegu-tenant".to_owned(), "acme".to_owned())];
/// let row = outbox.insert("5f0c1e2d", "todos.completed", br#"{"id":1}"#, &headers).await?;
/// let pending = outbox.pending(10).await?;
/// assert_eq!((pending.len(), pending[0].row), (1, row));
/// assert_eq!(pending[0].headers, headers);
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

/// The column `headers` of a row, as stored: a JSON object of header name to value, in their
/// order; `None` (null) for none.
fn encode_headers(headers: &[(String, String)]) -> Option<String> {
    struct AsObject<'a>(&'a [(String, String)]);
    impl serde::Serialize for AsObject<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_map(self.0.iter().map(|(name, value)| (name, value)))
        }
    }
    if headers.is_empty() {
        return None;
    }
    // Strings only: serializing cannot fail.
    serde_json::to_string(&AsObject(headers)).ok()
}

/// The headers of row `row` from its column `headers`, in their order: none for null, and none
/// (with a warning) for what is no JSON object of strings, an edit by hand gone wrong, so that
/// the event still goes out.
fn decode_headers(row: i64, headers: Option<&str>) -> Vec<(String, String)> {
    struct Pairs(Vec<(String, String)>);
    impl<'de> serde::Deserialize<'de> for Pairs {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Pairs;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object of header names and values")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
                    let mut pairs = Vec::new();
                    while let Some(pair) = map.next_entry()? {
                        pairs.push(pair);
                    }
                    Ok(Pairs(pairs))
                }
            }
            deserializer.deserialize_map(Visit)
        }
    }
    let Some(headers) = headers else { return Vec::new() };
    match serde_json::from_str::<Pairs>(headers) {
        Ok(Pairs(pairs)) => pairs,
        Err(error) => {
            tracing::warn!(row, %error, "an outbox row's headers are no JSON object of strings; it is published without them");
            Vec::new()
        }
    }
}

/// The tables of the outbox, each with the column `headers`: a table made before it had one
/// gets it when the outbox starts.
const TABLES: [&str; 2] = ["di_outbox", "di_outbox_set_aside"];

/// The indexes of the pending events (what the relay reads) and of the published ones (what
/// the purge and a republish read).
const INDEXES: [&str; 2] = [
    "CREATE INDEX IF NOT EXISTS di_outbox_pending ON di_outbox (id) WHERE published_at IS NULL",
    "CREATE INDEX IF NOT EXISTS di_outbox_published ON di_outbox (published_at) WHERE published_at IS NOT NULL",
];

/// The inbox: who handled which event; the last number of each key's events; how far each
/// once-per-cluster handler is with each key's (the same statements on SQLite and PostgreSQL).
const INBOX: [&str; 6] = [
    "CREATE TABLE IF NOT EXISTS di_outbox_skips (key TEXT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (key, seq))",
    "CREATE TABLE IF NOT EXISTS di_outbox_inbox (receiver TEXT NOT NULL, event_id TEXT NOT NULL, handler TEXT NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (receiver, event_id, handler))",
    "CREATE INDEX IF NOT EXISTS di_outbox_inbox_at ON di_outbox_inbox (at)",
    "CREATE TABLE IF NOT EXISTS di_outbox_keys (key TEXT PRIMARY KEY, seq BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS di_outbox_order (receiver TEXT NOT NULL, handler TEXT NOT NULL, key TEXT NOT NULL, seq BIGINT NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (receiver, handler, key))",
    "CREATE INDEX IF NOT EXISTS di_outbox_order_at ON di_outbox_order (at)",
];

/// `OutboxTable<DB>` as a proto (object name `outboxTable`) on the `database` data source,
/// providing `dyn OutboxStore`.
macro_rules! table {
    (
        $db:ty,
        $ddl:expr,
        $set_aside_ddl:expr,
        $dead_ddl:expr,
        $move_set_aside:expr,
        $move_in_tx:expr,
        $has_headers:expr,
        $add_headers:expr,
        $build:ident,
        $as_store:ident
    ) => {
        crate::database::on_database!(OutboxTable<$db>, "outboxTable", dyn OutboxStore, $build, $as_store);

        impl OutboxTable<$db> {
            /// The outbox in `db`, creating the tables `di_outbox` and `di_outbox_set_aside`
            /// if they do not exist, and adding the column `headers` to those an earlier
            /// version made without it.
            ///
            /// # Errors
            ///
            /// [`TxError::Database`] if a table cannot be created or given its column.
            pub async fn new(db: Arc<Database<$db>>) -> Result<Self, TxError> {
                db.create_if_missing($ddl, "creating the table di_outbox").await?;
                for index in INDEXES {
                    db.create_if_missing(index, "creating an index of di_outbox").await?;
                }
                db.create_if_missing($set_aside_ddl, "creating the table di_outbox_set_aside").await?;
                for table in TABLES {
                    Self::add_headers(&db, table).await?;
                }
                db.create_if_missing($dead_ddl, "creating the table di_outbox_dead_letters").await?;
                for ddl in INBOX {
                    db.create_if_missing(ddl, "creating the table di_outbox_inbox").await?;
                }
                // What an earlier version set aside: dead letters now, moved in one statement
                // (PostgreSQL) or one transaction (SQLite), so that two instances starting at
                // once move each row once; looked for first, so that a start writes nothing
                // when there is none (the common case).
                let legacy: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM di_outbox_set_aside")
                    .fetch_one(db.pool())
                    .await
                    .map_err(|e| db.error("looking for events set aside", e))?;
                if legacy > 0 {
                    let moved = |e| db.error("moving the events set aside to the dead letters", e);
                    if $move_in_tx {
                        // Immediate: two instances starting at once take turns, neither finds
                        // the other's write in its way.
                        let mut tx = db.pool().begin_with("BEGIN IMMEDIATE").await.map_err(moved)?;
                        sqlx::Executor::execute(&mut *tx, $move_set_aside).await.map_err(moved)?;
                        tx.commit().await.map_err(moved)?;
                    } else {
                        sqlx::Executor::execute(db.pool(), $move_set_aside).await.map_err(moved)?;
                    }
                }
                Ok(OutboxTable { db })
            }

            /// Adds the column `headers` to `table` if it has none (made by an earlier
            /// version). Looked up first, so that a table that has it is not locked for an
            /// `ALTER TABLE` at every start; an instance that starts beside this one may add it
            /// first, which is taken as done.
            async fn add_headers(db: &Database<$db>, table: &'static str) -> Result<(), TxError> {
                let has = || async {
                    let count: i64 = sqlx::query_scalar($has_headers)
                        .bind(table)
                        .fetch_one(db.pool())
                        .await
                        .map_err(|e| db.error("looking for the column headers of the outbox", e))?;
                    Ok::<bool, TxError>(count > 0)
                };
                if has().await? {
                    return Ok(());
                }
                let alter = format!($add_headers, table);
                match sqlx::query(&alter).execute(db.pool()).await {
                    Ok(_) => {
                        tracing::info!(table, "the outbox's table had no column headers (an earlier version's); added");
                        Ok(())
                    }
                    Err(_) if has().await? => Ok(()),
                    Err(e) => Err(db.error("adding the column headers to the outbox", e)),
                }
            }
        }

        impl OutboxStore for OutboxTable<$db> {
            /// Writes the row, its headers as a JSON object (null for none).
            fn insert<'a>(
                &'a self,
                id: &'a str,
                name: &'a str,
                payload: &'a [u8],
                headers: &'a [(String, String)],
            ) -> BoxFuture<'a, Result<i64, BoxError>> {
                Box::pin(async move {
                    let mut conn = self.db.conn().await?;
                    let insert =
                        "INSERT INTO di_outbox (event_id, name, payload, headers) VALUES ($1, $2, $3, $4) RETURNING id";
                    let row = sqlx::query_scalar(insert)
                        .bind(id)
                        .bind(name)
                        .bind(payload)
                        .bind(encode_headers(headers))
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(|e| self.db.error("writing to the outbox", e))?;
                    Ok(row)
                })
            }

            fn pending(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>> {
                Box::pin(async move {
                    let pending = "SELECT id, event_id, name, payload, headers FROM di_outbox WHERE published_at IS NULL ORDER BY id LIMIT $1";
                    let rows: Vec<(i64, String, String, Vec<u8>, Option<String>)> =
                        sqlx::query_as(pending)
                            .bind(i64::from(limit))
                            .fetch_all(self.db.pool())
                            .await
                            .map_err(|e| self.db.error("reading the outbox", e))?;
                    Ok(rows
                        .into_iter()
                        .map(|(row, id, name, payload, headers)| Stored {
                            row,
                            id,
                            name,
                            payload,
                            headers: decode_headers(row, headers.as_deref()),
                        })
                        .collect())
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

            /// Moves the row into `di_outbox_dead_letters` (`refused`, the reason as its error),
            /// in one transaction.
            fn set_aside<'a>(&'a self, row: i64, reason: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
                Box::pin(async move {
                    let failed = |e| self.db.error("setting an event aside", e);
                    let mut tx = self.db.pool().begin().await.map_err(failed)?;
                    let copy = "INSERT INTO di_outbox_dead_letters (kind, event_id, name, payload, headers, error, attempts, at) \
                                SELECT 'refused', event_id, name, payload, headers, $2, 1, $3 FROM di_outbox WHERE id = $1";
                    sqlx::query(copy)
                        .bind(row)
                        .bind(reason)
                        .bind(tegu_outbox_now())
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    sqlx::query("DELETE FROM di_outbox WHERE id = $1")
                        .bind(row)
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    tx.commit().await.map_err(failed)?;
                    Ok(())
                })
            }

            fn dead_letter<'a>(&'a self, letter: &'a DeadLetter) -> BoxFuture<'a, Result<i64, BoxError>> {
                Box::pin(async move {
                    let insert = "INSERT INTO di_outbox_dead_letters (kind, handler, event_id, name, payload, headers, error, attempts, at, receiver) \
                                  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id";
                    let id = sqlx::query_scalar(insert)
                        .bind(letter.why.kind())
                        .bind(letter.why.handler())
                        .bind(&letter.event_id)
                        .bind(&letter.name)
                        .bind(&letter.payload)
                        .bind(encode_headers(&letter.headers))
                        .bind(&letter.error)
                        .bind(i64::from(letter.attempts))
                        .bind(letter.at)
                        .bind(&letter.receiver)
                        .fetch_one(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("keeping a dead letter", e))?;
                    Ok(id)
                })
            }

            fn dead_letters(&self, after: i64, limit: u32) -> BoxFuture<'_, Result<Vec<DeadLetter>, BoxError>> {
                Box::pin(async move {
                    let select = format!("{DEAD_COLUMNS} WHERE id > $1 ORDER BY id LIMIT $2");
                    let rows: Vec<DeadRow> = sqlx::query_as(&select)
                        .bind(after)
                        .bind(i64::from(limit))
                        .fetch_all(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("reading the dead letters", e))?;
                    Ok(rows.into_iter().filter_map(dead_letter).collect())
                })
            }

            fn dead_letter_by_id(&self, id: i64) -> BoxFuture<'_, Result<Option<DeadLetter>, BoxError>> {
                Box::pin(async move {
                    let select = format!("{DEAD_COLUMNS} WHERE id = $1");
                    let row: Option<DeadRow> = sqlx::query_as(&select)
                        .bind(id)
                        .fetch_optional(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("reading a dead letter", e))?;
                    Ok(row.and_then(dead_letter))
                })
            }

            fn remove_dead_letter(&self, id: i64) -> BoxFuture<'_, Result<bool, BoxError>> {
                Box::pin(async move {
                    let done = sqlx::query("DELETE FROM di_outbox_dead_letters WHERE id = $1")
                        .bind(id)
                        .execute(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("removing a dead letter", e))?;
                    Ok(done.rows_affected() > 0)
                })
            }

            /// Inserts the row into `di_outbox_inbox` unless it is there, through the current
            /// transaction's connection: a delivery beside this one that inserted it first
            /// makes this one wait for its commit (PostgreSQL), or for the write lock (SQLite),
            /// then find it.
            fn record_handled<'a>(
                &'a self,
                receiver: &'a str,
                event_id: &'a str,
                handler: &'a str,
                at: i64,
            ) -> BoxFuture<'a, Result<Recorded, BoxError>> {
                Box::pin(async move {
                    let mut conn = self.db.conn().await?;
                    let insert = "INSERT INTO di_outbox_inbox (receiver, event_id, handler, at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";
                    let done = sqlx::query(insert)
                        .bind(receiver)
                        .bind(event_id)
                        .bind(handler)
                        .bind(at)
                        .execute(&mut *conn)
                        .await
                        .map_err(|e| self.db.error("recording a handled event in the inbox", e))?;
                    Ok(if done.rows_affected() == 1 { Recorded::Written } else { Recorded::Already })
                })
            }

            fn in_writable_transaction(&self) -> bool {
                self.db.in_writable_transaction()
            }

            fn handled<'a>(&'a self, receiver: &'a str, event_id: &'a str) -> BoxFuture<'a, Result<Vec<String>, BoxError>> {
                Box::pin(async move {
                    let handlers = sqlx::query_scalar("SELECT handler FROM di_outbox_inbox WHERE receiver = $1 AND event_id = $2")
                        .bind(receiver)
                        .bind(event_id)
                        .fetch_all(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("reading the inbox", e))?;
                    Ok(handlers)
                })
            }

            fn purge_handled(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
                Box::pin(async move {
                    let done = sqlx::query("DELETE FROM di_outbox_inbox WHERE at < $1")
                        .bind(before)
                        .execute(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("deleting the inbox's old records", e))?;
                    sqlx::query("DELETE FROM di_outbox_order WHERE at < $1")
                        .bind(before)
                        .execute(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("deleting the old order records", e))?;
                    Ok(done.rows_affected())
                })
            }

            fn keeps_order(&self) -> bool {
                true
            }

            /// `di_outbox_keys`' row of `key`, made or counted up, through the current
            /// transaction's connection: a second transaction numbering the same key waits for
            /// the first's commit (PostgreSQL's row lock, SQLite's write lock).
            fn sequence<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<u64, BoxError>> {
                Box::pin(async move {
                    let mut conn = self.db.conn().await?;
                    let next = "INSERT INTO di_outbox_keys (key, seq) VALUES ($1, 1) ON CONFLICT (key) DO UPDATE SET seq = di_outbox_keys.seq + 1 RETURNING seq";
                    let seq: i64 = sqlx::query_scalar(next)
                        .bind(key)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(|e| self.db.error("numbering an event of a key", e))?;
                    Ok(u64::try_from(seq).unwrap_or(0))
                })
            }

            fn done_upto<'a>(
                &'a self,
                receiver: &'a str,
                handler: &'a str,
                key: &'a str,
            ) -> BoxFuture<'a, Result<Option<u64>, BoxError>> {
                Box::pin(async move {
                    let seq: Option<i64> = sqlx::query_scalar(
                        "SELECT seq FROM di_outbox_order WHERE receiver = $1 AND handler = $2 AND key = $3",
                    )
                    .bind(receiver)
                    .bind(handler)
                    .bind(key)
                    .fetch_optional(self.db.pool())
                    .await
                    .map_err(|e| self.db.error("reading how far a handler is with a key's events", e))?;
                    let done = seq.and_then(|seq| u64::try_from(seq).ok());
                    // The numbers the broker refused right after it count as done.
                    let skipped: Vec<i64> =
                        sqlx::query_scalar("SELECT seq FROM di_outbox_skips WHERE key = $1 AND seq > $2 ORDER BY seq LIMIT 1000")
                            .bind(key)
                            .bind(seq.unwrap_or(0))
                            .fetch_all(self.db.pool())
                            .await
                            .map_err(|e| self.db.error("reading the numbers of a key the broker refused", e))?;
                    let mut upto = done.unwrap_or(0);
                    for skipped in skipped {
                        if u64::try_from(skipped).ok() != Some(upto + 1) {
                            break;
                        }
                        upto += 1;
                    }
                    Ok((done.is_some() || upto > 0).then_some(upto))
                })
            }

            fn skip<'a>(&'a self, key: &'a str, seq: u64) -> BoxFuture<'a, Result<(), BoxError>> {
                Box::pin(async move {
                    sqlx::query("INSERT INTO di_outbox_skips (key, seq) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                        .bind(key)
                        .bind(i64::try_from(seq).unwrap_or(i64::MAX))
                        .execute(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("recording a number of a key the broker refused", e))?;
                    Ok(())
                })
            }

            fn advance<'a>(
                &'a self,
                receiver: &'a str,
                handler: &'a str,
                key: &'a str,
                seq: u64,
                at: i64,
            ) -> BoxFuture<'a, Result<(), BoxError>> {
                Box::pin(async move {
                    let mut conn = self.db.conn().await?;
                    let upsert = "INSERT INTO di_outbox_order (receiver, handler, key, seq, at) VALUES ($1, $2, $3, $4, $5) \
                                  ON CONFLICT (receiver, handler, key) DO UPDATE SET \
                                  seq = CASE WHEN excluded.seq > di_outbox_order.seq THEN excluded.seq ELSE di_outbox_order.seq END, \
                                  at = excluded.at";
                    sqlx::query(upsert)
                        .bind(receiver)
                        .bind(handler)
                        .bind(key)
                        .bind(i64::try_from(seq).unwrap_or(i64::MAX))
                        .bind(at)
                        .execute(&mut *conn)
                        .await
                        .map_err(|e| self.db.error("recording how far a handler is with a key's events", e))?;
                    Ok(())
                })
            }

            fn purge_dead_letters(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
                Box::pin(async move {
                    let done = sqlx::query("DELETE FROM di_outbox_dead_letters WHERE at < $1")
                        .bind(before)
                        .execute(self.db.pool())
                        .await
                        .map_err(|e| self.db.error("deleting old dead letters", e))?;
                    Ok(done.rows_affected())
                })
            }
        }
    };
}

/// The columns of a dead letter, as `DeadRow` reads them.
const DEAD_COLUMNS: &str = "SELECT id, kind, handler, event_id, name, payload, headers, error, attempts, at, receiver FROM di_outbox_dead_letters";

/// A row of `di_outbox_dead_letters`.
type DeadRow = (i64, String, Option<String>, String, String, Vec<u8>, Option<String>, String, i64, i64, String);

/// The dead letter of a row; none (with a warning) for a kind this version does not know.
fn dead_letter(row: DeadRow) -> Option<DeadLetter> {
    let (id, kind, handler, event_id, name, payload, headers, error, attempts, at, receiver) = row;
    let Some(why) = Why::from_kind(&kind, handler.as_deref()) else {
        tracing::warn!(id, kind, "a dead letter of a kind this version does not know; left out");
        return None;
    };
    let mut letter = DeadLetter::new(why, event_id, name, payload, decode_headers(id, headers.as_deref()));
    letter.id = id;
    letter.error = error;
    letter.attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
    letter.at = at;
    letter.receiver = receiver;
    Some(letter)
}

/// Now, in milliseconds since the Unix epoch, as the outbox's times are.
fn tegu_outbox_now() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(feature = "sqlite")]
table!(
    sqlx::Sqlite,
    "CREATE TABLE IF NOT EXISTS di_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BLOB NOT NULL, published_at INTEGER, headers TEXT)",
    "CREATE TABLE IF NOT EXISTS di_outbox_set_aside (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BLOB NOT NULL, reason TEXT NOT NULL, set_aside_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, headers TEXT)",
    "CREATE TABLE IF NOT EXISTS di_outbox_dead_letters (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, handler TEXT, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BLOB NOT NULL, headers TEXT, error TEXT NOT NULL, attempts INTEGER NOT NULL, at INTEGER NOT NULL, receiver TEXT NOT NULL DEFAULT '')",
    "INSERT INTO di_outbox_dead_letters (kind, event_id, name, payload, headers, error, attempts, at) \
     SELECT 'refused', event_id, name, payload, headers, reason, 1, CAST(strftime('%s', set_aside_at) AS INTEGER) * 1000 FROM di_outbox_set_aside ORDER BY id; \
     DELETE FROM di_outbox_set_aside",
    true,
    // SQLite has no `ADD COLUMN IF NOT EXISTS`: the table's columns say.
    "SELECT COUNT(*) FROM pragma_table_info($1) WHERE name = 'headers'",
    "ALTER TABLE {} ADD COLUMN headers TEXT",
    build_sqlite,
    sqlite_as_store
);
#[cfg(feature = "postgres")]
table!(
    sqlx::Postgres,
    "CREATE TABLE IF NOT EXISTS di_outbox (id BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BYTEA NOT NULL, published_at BIGINT, headers TEXT)",
    "CREATE TABLE IF NOT EXISTS di_outbox_set_aside (id BIGINT PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BYTEA NOT NULL, reason TEXT NOT NULL, set_aside_at TIMESTAMPTZ NOT NULL DEFAULT now(), headers TEXT)",
    "CREATE TABLE IF NOT EXISTS di_outbox_dead_letters (id BIGSERIAL PRIMARY KEY, kind TEXT NOT NULL, handler TEXT, event_id TEXT NOT NULL, name TEXT NOT NULL, payload BYTEA NOT NULL, headers TEXT, error TEXT NOT NULL, attempts BIGINT NOT NULL, at BIGINT NOT NULL, receiver TEXT NOT NULL DEFAULT '')",
    "WITH moved AS (DELETE FROM di_outbox_set_aside RETURNING id, event_id, name, payload, headers, reason, set_aside_at) \
     INSERT INTO di_outbox_dead_letters (kind, event_id, name, payload, headers, error, attempts, at) \
     SELECT 'refused', event_id, name, payload, headers, reason, 1, (extract(epoch FROM set_aside_at) * 1000)::BIGINT FROM moved ORDER BY id",
    false,
    // The table the statements find on the search path, as `to_regclass` resolves it.
    "SELECT COUNT(*) FROM pg_attribute WHERE attrelid = to_regclass($1::text) AND attname = 'headers' AND NOT attisdropped",
    "ALTER TABLE {} ADD COLUMN IF NOT EXISTS headers TEXT",
    build_postgres,
    postgres_as_store
);

#[cfg(test)]
mod tests {
    use super::{decode_headers, encode_headers};

    #[test]
    fn headers_are_stored_as_a_json_object_in_their_order() {
        let headers = vec![
            ("tegu-tenant".to_owned(), "acme".to_owned()),
            ("traceparent".to_owned(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned()),
            ("a-quote".to_owned(), "say \"hi\"".to_owned()),
        ];
        let stored = encode_headers(&headers).expect("some headers");
        assert!(stored.starts_with(r#"{"tegu-tenant":"acme","traceparent":"#), "{stored}");
        assert_eq!(decode_headers(1, Some(&stored)), headers);
        assert_eq!(encode_headers(&[]), None, "none: null");
        assert!(decode_headers(1, None).is_empty());
    }

    #[test]
    fn headers_that_are_no_object_of_strings_are_dropped() {
        for bad in ["[]", "{\"a\":1}", "not json", ""] {
            assert!(decode_headers(1, Some(bad)).is_empty(), "{bad}");
        }
    }
}
