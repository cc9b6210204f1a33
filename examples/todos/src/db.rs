//! The database: SQLite by default (a file in this example's folder: nothing to install), or
//! PostgreSQL when the configuration gives a `postgres://` URL (`TODOS_DB__URL`), through
//! tegu-sqlx. Transactions are tegu-tx's `#[transactional]`: the request's is begun by its first
//! write and committed in its completion phase (a failed COMMIT answers 500), rolled back when
//! the request fails, panics or is cancelled.
//!
//! Which database is chosen when the service starts, so [`Db`] is this example's own singleton:
//! it builds tegu-sqlx's `Database` for the URL's scheme and stands for it in the App, as the data
//! source of the transactions (`dyn TxSource`), the claims of the `once_per_cluster` purge
//! (`dyn ScheduleLock`) and the readiness check `db`. [`on_db!`](crate::on_db) writes a query
//! once and runs it on whichever database that is.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Deserialize;
#[cfg(feature = "postgres")]
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use tegu_core::{
    config_proto,
    error::BoxError,
    futures::{BoxFuture, UnitFuture},
    health::HealthCheck,
    schedule::ScheduleLock,
    singleton_proto,
};
use tegu_outbox::{DeadLetter, OutboxStore, Stored};
#[cfg(feature = "postgres")]
use tegu_sqlx::Postgres;
use tegu_sqlx::{ClusterSchedules, Database, OutboxTable, Sqlite};
use tegu_tx::{Transactions, TxConn, TxError, TxFuture, TxSource};

/// The `[db]` section of `config/todos.toml` (`TODOS_DB__PATH`, `TODOS_DB__URL`,
/// `TODOS_DB__MAX_CONNECTIONS`).
#[config_proto(prefix = "db")]
#[derive(Clone, Deserialize)]
pub struct DbConfig {
    /// The SQLite file, when no `url` is given; a relative path is relative to this example's
    /// folder.
    #[serde(default = "default_path")]
    pub path: PathBuf,
    /// A database URL, which wins over `path`: `postgres://user:password@host/db`, or
    /// `sqlite://file`.
    #[serde(default)]
    pub url: Option<String>,
    /// The most connections the service opens.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
}

fn default_path() -> PathBuf {
    PathBuf::from("todos.sqlite3")
}

fn default_max_connections() -> u32 {
    8
}

/// Without the URL's password.
impl std::fmt::Debug for DbConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbConfig")
            .field("path", &self.path)
            .field("url", &self.url.as_deref().map(redacted))
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl DbConfig {
    /// The SQLite file, absolute: a relative `path` is taken from this example's folder (a
    /// path relative to the working directory served an empty database when the service was
    /// started elsewhere), so that the start-up line says exactly which file.
    pub fn file(&self) -> PathBuf {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(&self.path);
        std::path::absolute(&path).unwrap_or(path)
    }

    /// Whether `url` names a PostgreSQL database.
    fn postgres(&self) -> bool {
        self.url.as_deref().is_some_and(|url| url.starts_with("postgres://") || url.starts_with("postgresql://"))
    }
}

/// tegu-sqlx's data source for the database the configuration names, with its claims of the
/// `once_per_cluster` purge and its outbox.
#[derive(Debug)]
pub enum Pools {
    /// The embedded default.
    Sqlite(Arc<Database<Sqlite>>, ClusterSchedules<Sqlite>, OutboxTable<Sqlite>),
    /// `TODOS_DB__URL=postgres://…` (the `postgres` feature).
    #[cfg(feature = "postgres")]
    Postgres(Arc<Database<Postgres>>, ClusterSchedules<Postgres>, OutboxTable<Postgres>),
}

/// The object name of [`Db`], which its `Database` takes too: tegu-tx knows a data source by the
/// name its provider has in the App, and `Database::conn` finds its transaction by its own.
const NAME: &str = "db";

/// A driver's error while `doing` something to the database, as tegu-tx reports it.
fn failed(doing: &'static str, e: sqlx::Error) -> TxError {
    TxError::Database { doing, data_source: NAME.into(), error: e.into() }
}

/// The database, connected (and its schema created) by the async constructor when the App is
/// built: a pool of SQLite connections in WAL mode (readers never wait for the writer; one
/// write transaction at a time, begun `IMMEDIATE`), or a pool of PostgreSQL connections.
#[derive(Debug)]
pub struct Db {
    /// What the start-up line and errors show: the file, or the URL without its password.
    shown: String,
    /// The SQLite file, for the readiness check.
    file: Option<PathBuf>,
    pools: Pools,
}

#[singleton_proto(name = "db", provides(dyn TxSource, dyn ScheduleLock, dyn OutboxStore, dyn HealthCheck))]
impl Db {
    /// Connects to the database that `config` names and creates the schema.
    ///
    /// # Errors
    ///
    /// A `TxError` if the database cannot be reached or the schema created: `App::build`
    /// fails with it, naming `Db`.
    pub async fn new(config: Arc<DbConfig>, transactions: Arc<Transactions>) -> Result<Self, TxError> {
        if config.postgres() {
            return Self::postgres(&config, transactions).await;
        }
        let (options, file) = match &config.url {
            Some(url) => {
                let options: SqliteConnectOptions = url.parse().map_err(|e| failed("reading the database URL", e))?;
                let file = options.get_filename().to_owned();
                (options, file)
            }
            None => (SqliteConnectOptions::new().filename(config.file()), config.file()),
        };
        let options =
            options.create_if_missing(true).journal_mode(SqliteJournalMode::Wal).busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(config.max_connections)
            .connect_with(options)
            .await
            .map_err(|e| failed("opening the database", e))?;
        let db = Arc::new(Database::new(NAME, pool, transactions));
        sqlx::query(SQLITE_TABLE).execute(db.pool()).await.map_err(|e| db.error("creating the schema", e))?;
        // Files made by earlier versions gain the columns they lack: `done_at` (the purge job's),
        // `tenant` (their todos are then the tenant `default`'s).
        for (column, upgrade) in SQLITE_UPGRADES {
            let has: Option<i64> = sqlx::query_scalar("SELECT 1 FROM pragma_table_info('todos') WHERE name = $1")
                .bind(column)
                .fetch_optional(db.pool())
                .await
                .map_err(|e| db.error("reading the schema", e))?;
            if has.is_none() {
                for ddl in upgrade {
                    sqlx::query(ddl).execute(db.pool()).await.map_err(|e| db.error("upgrading the todos table", e))?;
                }
                tracing::info!(column, "the todos table had no such column (an earlier version's); added");
            }
        }
        sqlx::query(INDEX).execute(db.pool()).await.map_err(|e| db.error("creating the schema", e))?;
        sqlx::query(NOTIFICATIONS).execute(db.pool()).await.map_err(|e| db.error("creating the schema", e))?;
        tracing::info!(file = %file.display(), "database open");
        let claims = ClusterSchedules::<Sqlite>::new(db.clone()).await?;
        let outbox = OutboxTable::<Sqlite>::new(db.clone()).await?;
        Ok(Db { shown: file.display().to_string(), file: Some(file), pools: Pools::Sqlite(db, claims, outbox) })
    }

    /// [`Db::new`] on PostgreSQL: a pool on `config`'s URL, the schema, the cluster's schedule
    /// claims and the outbox table.
    #[cfg(feature = "postgres")]
    async fn postgres(config: &DbConfig, transactions: Arc<Transactions>) -> Result<Self, TxError> {
        let url = config.url.clone().unwrap_or_default();
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .acquire_timeout(Duration::from_secs(5))
            // No ping of an idle connection at each checkout: with thousands of requests
            // waiting, a ping still running when its request's acquire times out is cut, and
            // sqlx closes that connection, so that under a long backlog the pool lost its
            // connections one by one and could not open new ones in time. A connection a
            // restart killed fails its request instead (500, which a client sends again).
            .test_before_acquire(false)
            .connect(&url)
            .await
            .map_err(|e| failed("connecting to the database", e))?;
        let db = Arc::new(Database::new(NAME, pool, transactions));
        db.create_if_missing(POSTGRES_TABLE, "creating the schema").await?;
        // A table made by an earlier version gains the columns it lacks, as on SQLite. Each
        // statement is `IF [NOT] EXISTS`: instances may start at once.
        for (column, upgrade) in POSTGRES_UPGRADES {
            let has: Option<i32> = sqlx::query_scalar(
                "SELECT 1 FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = 'todos' AND column_name = $1",
            )
            .bind(column)
            .fetch_optional(db.pool())
            .await
            .map_err(|e| db.error("reading the schema", e))?;
            if has.is_none() {
                for ddl in upgrade {
                    db.create_if_missing(ddl, "upgrading the todos table").await?;
                }
                tracing::info!(column, "the todos table had no such column (an earlier version's); added");
            }
        }
        db.create_if_missing(INDEX, "creating the schema").await?;
        db.create_if_missing(NOTIFICATIONS, "creating the schema").await?;
        let shown = redacted(&url);
        tracing::info!(database = %shown, "database open");
        let claims = ClusterSchedules::<Postgres>::new(db.clone()).await?;
        let outbox = OutboxTable::<Postgres>::new(db.clone()).await?;
        Ok(Db { shown, file: None, pools: Pools::Postgres(db, claims, outbox) })
    }

    /// A `postgres://` URL in a build without the `postgres` feature: the error names it.
    #[cfg(not(feature = "postgres"))]
    async fn postgres(_: &DbConfig, _: Arc<Transactions>) -> Result<Self, TxError> {
        let missing = "this build has no PostgreSQL support: cargo run -p example-todos --features postgres";
        Err(failed("connecting to the database", sqlx::Error::Configuration(missing.into())))
    }

    /// The database: its file, or its URL without the password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The SQLite file, if the database is one.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// The data source, for [`on_db!`](crate::on_db).
    pub fn pools(&self) -> &Pools {
        &self.pools
    }
}

/// `url` without the password it may carry: in its user part (`user:password@`) or in its
/// parameters (`?password=…`, dropped with the others).
fn redacted(url: &str) -> String {
    let url = url.split_once('?').map_or(url, |(url, _)| url);
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    match rest.rsplit_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_owned(),
    }
}

/// The todos table, on SQLite (`"user"` quoted: PostgreSQL reserves the word, and files made
/// by earlier versions of this example have the column). Each todo is a tenant's: `default`'s
/// when its request named none (see [`crate::current_tenant`]).
const SQLITE_TABLE: &str = "CREATE TABLE IF NOT EXISTS todos (
         id      INTEGER PRIMARY KEY AUTOINCREMENT,
         tenant  TEXT    NOT NULL DEFAULT 'default',
         \"user\" TEXT    NOT NULL,
         title   TEXT    NOT NULL,
         done    INTEGER NOT NULL DEFAULT 0,
         done_at INTEGER
     )";

/// The columns a todos table of an earlier version may lack, on SQLite, and what adds each:
/// its rows take the default (no `done_at`; the tenant `default`). With the tenant, the index
/// by user alone gives way to [`INDEX`].
const SQLITE_UPGRADES: [(&str, &[&str]); 2] = [
    ("done_at", &["ALTER TABLE todos ADD COLUMN done_at INTEGER"]),
    (
        "tenant",
        &["ALTER TABLE todos ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'", "DROP INDEX IF EXISTS todos_by_user"],
    ),
];

/// The notifications of done todos ([`crate::advice::Notifier`]), on both databases. Their key
/// (the event's id) is what a mail would carry for its server to recognise a repeat by; it is
/// not unique here, since the outbox's inbox, written in the same transaction, keeps a second
/// row of one event out, and the cluster tests count the rows to show it.
const NOTIFICATIONS: &str = "CREATE TABLE IF NOT EXISTS notifications (
         key     TEXT   NOT NULL,
         tenant  TEXT   NOT NULL,
         \"user\" TEXT   NOT NULL,
         todo    BIGINT NOT NULL,
         at      BIGINT NOT NULL
     )";

/// The index of every query of the repository: a tenant's user's todos, by id.
const INDEX: &str = "CREATE INDEX IF NOT EXISTS todos_by_tenant ON todos (tenant, \"user\", id)";

/// The todos table, on PostgreSQL.
#[cfg(feature = "postgres")]
const POSTGRES_TABLE: &str = "CREATE TABLE IF NOT EXISTS todos (
         id      BIGSERIAL PRIMARY KEY,
         tenant  TEXT    NOT NULL DEFAULT 'default',
         \"user\" TEXT    NOT NULL,
         title   TEXT    NOT NULL,
         done    BOOLEAN NOT NULL DEFAULT FALSE,
         done_at BIGINT
     )";

/// [`SQLITE_UPGRADES`] on PostgreSQL.
#[cfg(feature = "postgres")]
const POSTGRES_UPGRADES: [(&str, &[&str]); 2] = [
    ("done_at", &["ALTER TABLE todos ADD COLUMN IF NOT EXISTS done_at BIGINT"]),
    (
        "tenant",
        &[
            "ALTER TABLE todos ADD COLUMN IF NOT EXISTS tenant TEXT NOT NULL DEFAULT 'default'",
            "DROP INDEX IF EXISTS todos_by_user",
        ],
    ),
];

/// Runs `$body` with `$db` (the `Database`) and `$conn` (a connection of the current
/// transaction, else of the pool) on whichever database the service runs on: a query written
/// once, compiled for each. `?` in `$body` returns a `TxError` (or what converts from one).
#[macro_export]
macro_rules! on_db {
    ($pools:expr, |$db:ident, $conn:ident| $body:expr) => {
        match $pools {
            $crate::db::Pools::Sqlite($db, ..) => {
                let mut $conn = $db.conn().await?;
                let $conn = &mut *$conn;
                $body
            }
            #[cfg(feature = "postgres")]
            $crate::db::Pools::Postgres($db, ..) => {
                let mut $conn = $db.conn().await?;
                let $conn = &mut *$conn;
                $body
            }
        }
    };
}

/// The seconds since the Unix epoch, as `done_at` stores them.
pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

/// The data source of every `#[transactional]` method: the chosen database's.
/// `$body` with the open database's parts (its `Database`, schedule claims and outbox table)
/// bound by `|$db, $claims, $outbox|`, compiled once for each database.
macro_rules! per_pool {
    ($pools:expr, |$db:pat_param, $claims:pat_param, $outbox:pat_param| $body:expr) => {
        match $pools {
            Pools::Sqlite($db, $claims, $outbox) => $body,
            #[cfg(feature = "postgres")]
            Pools::Postgres($db, $claims, $outbox) => $body,
        }
    };
}

impl TxSource for Db {
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        per_pool!(&self.pools, |db, _, _| db.begin())
    }

    fn one_at_a_time(&self) -> bool {
        per_pool!(&self.pools, |db, _, _| db.one_at_a_time())
    }
}

/// The claims of the `once_per_cluster` purge, in the table `di_schedule_runs`.
impl ScheduleLock for Db {
    fn claim<'a>(&'a self, job: &'a str, due: SystemTime) -> BoxFuture<'a, Result<bool, BoxError>> {
        per_pool!(&self.pools, |_, claims, _| claims.claim(job, due))
    }
}

/// The outbox of the external events (`TodoCompleted`), in the table `di_outbox`: written in
/// the request's transaction. Used when NATS is configured (`TODOS_NATS__URL`).
impl OutboxStore for Db {
    fn insert<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        payload: &'a [u8],
        headers: &'a [(String, String)],
    ) -> BoxFuture<'a, Result<i64, tegu_core::error::BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.insert(id, name, payload, headers))
    }

    fn pending(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Stored>, tegu_core::error::BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.pending(limit))
    }

    fn published<'a>(&'a self, rows: &'a [i64], at: i64) -> BoxFuture<'a, Result<(), tegu_core::error::BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.published(rows, at))
    }

    fn republish(&self, since: i64) -> BoxFuture<'_, Result<u64, tegu_core::error::BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.republish(since))
    }

    fn purge(&self, before: i64) -> BoxFuture<'_, Result<u64, tegu_core::error::BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.purge(before))
    }

    fn set_aside<'a>(&'a self, row: i64, reason: &'a str) -> BoxFuture<'a, Result<(), tegu_core::error::BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.set_aside(row, reason))
    }

    fn dead_letter<'a>(&'a self, letter: &'a DeadLetter) -> BoxFuture<'a, Result<i64, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.dead_letter(letter))
    }

    fn dead_letters(&self, after: i64, limit: u32) -> BoxFuture<'_, Result<Vec<DeadLetter>, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.dead_letters(after, limit))
    }

    fn dead_letter_by_id(&self, id: i64) -> BoxFuture<'_, Result<Option<DeadLetter>, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.dead_letter_by_id(id))
    }

    fn remove_dead_letter(&self, id: i64) -> BoxFuture<'_, Result<bool, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.remove_dead_letter(id))
    }

    fn purge_dead_letters(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.purge_dead_letters(before))
    }

    fn record_handled<'a>(
        &'a self,
        receiver: &'a str,
        event_id: &'a str,
        handler: &'a str,
        at: i64,
    ) -> BoxFuture<'a, Result<tegu_outbox::Recorded, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.record_handled(receiver, event_id, handler, at))
    }

    fn in_writable_transaction(&self) -> bool {
        per_pool!(&self.pools, |_, _, outbox| outbox.in_writable_transaction())
    }

    fn handled<'a>(&'a self, receiver: &'a str, event_id: &'a str) -> BoxFuture<'a, Result<Vec<String>, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.handled(receiver, event_id))
    }

    fn purge_handled(&self, before: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.purge_handled(before))
    }

    fn keeps_order(&self) -> bool {
        true
    }

    fn sequence<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<u64, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.sequence(key))
    }

    fn done_upto<'a>(
        &'a self,
        receiver: &'a str,
        handler: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<u64>, BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.done_upto(receiver, handler, key))
    }

    fn skip<'a>(&'a self, key: &'a str, seq: u64) -> BoxFuture<'a, Result<(), BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.skip(key, seq))
    }

    fn advance<'a>(
        &'a self,
        receiver: &'a str,
        handler: &'a str,
        key: &'a str,
        seq: u64,
        at: i64,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        per_pool!(&self.pools, |_, _, outbox| outbox.advance(receiver, handler, key, seq, at))
    }
}

/// The readiness check `db` (`GET /health/ready`). SQLite: the file answers a query on a
/// connection of its own, opened read-only for the check, so a file removed or made unreadable
/// fails it (the open connections would go on working on what they hold). PostgreSQL: a
/// connection of the pool answers a query.
impl HealthCheck for Db {
    fn check(self: Arc<Self>) -> UnitFuture {
        Box::pin(async move {
            match (&self.pools, &self.file) {
                (Pools::Sqlite(..), Some(file)) => {
                    use sqlx::ConnectOptions;
                    let options = SqliteConnectOptions::new().filename(file).read_only(true).create_if_missing(false);
                    let mut conn = options.connect().await?;
                    sqlx::query("SELECT count(*) FROM sqlite_master").execute(&mut conn).await?;
                    sqlx::Connection::close(conn).await?;
                }
                (pools, _) => {
                    on_db!(pools, |db, conn| sqlx::query("SELECT 1")
                        .execute(conn)
                        .await
                        .map(drop)
                        .map_err(|e| db.error("checking", e)))?;
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shown_url_carries_no_password() {
        let shown = super::redacted("postgres://todos:s3cret@db.internal:5432/todos?password=again&sslmode=require");
        assert_eq!(shown, "postgres://todos@db.internal:5432/todos");
        assert_eq!(super::redacted("sqlite:///tmp/todos.sqlite3"), "sqlite:///tmp/todos.sqlite3");
    }
}
