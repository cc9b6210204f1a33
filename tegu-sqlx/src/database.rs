//! `Database<DB>`: a named pool of SQLite or Postgres connections, a data source of tegu-tx.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Pool;
use sqlx::pool::PoolOptions;
use tegu_core::lineage::{Lineage, Tenant};
use tegu_core::registry::{AnyArc, BuildFuture, ProtoDescriptor, Provide, put};
use tegu_core::{
    DiError, ProtoDef, Resolver,
    registry::{Dependency, InjectKind, Lifetime},
};
use tegu_tx::{Transactions, TxConn, TxError, TxFuture, TxOptions, TxSource};

use crate::backend::{Backend, SqlxTx};
use crate::conn::{Conn, Inner};

/// A data source: a pool of connections to one database (SQLite or Postgres), known to tegu-tx
/// by its object name, so that `#[transactional]` methods run in its transactions and
/// [`conn`](Self::conn) runs each statement in the current one.
///
/// Register it with the App: `App::builder().link::<Database<Sqlite>>()` (object name
/// `database`, settings in the configuration section `[database]`: `url`, and optionally
/// `max_connections`, `acquire_timeout_ms`, and on PostgreSQL `tenant_setting` and
/// `resolve_commits`), or
/// [`Database::named`] for another name and section (an App with several data sources). Inject
/// it as `Arc<Database<Sqlite>>` (with `#[inject(name = "...")]` among several of one database).
///
/// # Row-level security on PostgreSQL
///
/// With `tenant_setting = "app.tenant"` (a custom setting's name: `prefix.name`), each
/// transaction of the data source begins with `SELECT set_config('app.tenant', key, true)`
/// (name and key sent as bind parameters): `key` is the tenant the current scope serves
/// ([`Tenant`], `app.scope().tenant("acme")`), or `''` in a scope without one, so that a
/// policy `USING (tenant = current_setting('app.tenant', true))` sees the scope's tenant's
/// rows, and none without a tenant. The setting is transaction-local (as `SET LOCAL`): a
/// connection goes back to the pool without it. Statements outside any transaction
/// ([`pool`](Self::pool), [`conn`](Self::conn) outside a `#[transactional]` method) do not
/// carry it. SQLite refuses the key when the App is built.
///
/// # A `COMMIT` whose answer is lost, on PostgreSQL
///
/// A connection lost once a `COMMIT` was sent leaves its outcome unknown: the server may have
/// applied it. By default such a commit fails with [`ErrorClass::OutcomeUnknown`], which
/// `retryable()` never includes (running the transaction again may store it twice). With
/// `resolve_commits = true` ([`resolve_commits`](Database::resolve_commits) for a data
/// source built by hand), each commit learns the transaction's id in a round trip of its own
/// before the `COMMIT` (`pg_current_xact_id_if_assigned()`), and a lost answer is resolved with
/// `pg_xact_status` on a connection of its own, asked again while the server says the
/// transaction is in progress, for up to 5 s: committed, the method succeeds; rolled back, it
/// fails with [`ErrorClass::ConnectionLost`], which may be retried; otherwise
/// `OutcomeUnknown`. A transaction that wrote nothing has no id and nothing to resolve. The
/// price is that round trip, on every transaction of the data source.
///
/// [`ErrorClass::OutcomeUnknown`]: tegu_tx::ErrorClass::OutcomeUnknown
/// [`ErrorClass::ConnectionLost`]: tegu_tx::ErrorClass::ConnectionLost
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::Arc;
/// use tegu_core::{singleton_proto, App};
/// use tegu_sqlx::{Database, Sqlite};
/// use tegu_tx::{transactional, TxError};
///
/// #[singleton_proto]
/// pub struct Notes {
///     #[inject]
///     db: Arc<Database<Sqlite>>,
/// }
///
/// impl Notes {
///     #[transactional]
///     pub async fn add(&self, text: &str) -> Result<i64, TxError> {
///         let mut conn = self.db.conn().await?; // the transaction's connection
///         let done = sqlx::query("INSERT INTO notes (text) VALUES (?)").bind(text).execute(&mut *conn).await;
///         Ok(done.map_err(|e| self.db.error("inserting a note", e))?.last_insert_rowid())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = std::env::temp_dir().join(format!("tegu-sqlx-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let app = App::builder()
///     .link::<Database<Sqlite>>()
///     .config_value("database.url", format!("sqlite://{}/notes.db?mode=rwc", dir.display()))
///     .build()
///     .await?;
/// let db = app.get_object::<Database<Sqlite>>()?;
/// sqlx::query("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT)").execute(db.pool()).await?;
/// let notes = app.get_object::<Notes>()?;
/// // A request: the note is committed in the scope's completion phase.
/// app.run_in_context(notes.add("hello")).await?;
/// let count: i64 = sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(db.pool()).await?;
/// assert_eq!(count, 1);
/// app.shutdown().await?;
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(()) }
/// ```
pub struct Database<DB: sqlx::Database> {
    name: String,
    pool: Pool<DB>,
    transactions: Arc<Transactions>,
    /// The custom setting each transaction sets to the scope's tenant (`tenant_setting`):
    /// PostgreSQL only.
    tenant_setting: Option<Arc<str>>,
    /// A `COMMIT` whose answer is lost is resolved against the database (`resolve_commits`):
    /// PostgreSQL only.
    resolve_commits: bool,
    /// A read-only transaction was begun where that is set up on the connection (SQLite's
    /// `query_only`): from then on, a connection is set back before it is used, in case one
    /// such transaction was dropped before its end undid it.
    read_only_begun: std::sync::atomic::AtomicBool,
}

/// The configuration section of a [`Database`].
#[derive(serde::Deserialize)]
struct Settings {
    url: String,
    #[serde(default)]
    max_connections: Option<u32>,
    #[serde(default)]
    acquire_timeout_ms: Option<u64>,
    /// PostgreSQL only: the custom setting (`app.tenant`) each transaction sets to the scope's
    /// tenant, for row-level security policies.
    #[serde(default)]
    tenant_setting: Option<String>,
    /// PostgreSQL only: a `COMMIT` whose answer is lost is resolved against the database.
    #[serde(default)]
    resolve_commits: bool,
}

/// Why `name` is not a PostgreSQL custom setting's name: two or more parts joined by dots
/// (`app.tenant`), each an ASCII letter or `_` followed by ASCII letters, digits and `_`.
/// (PostgreSQL also takes `$` after the first character; a name sent as a bind parameter
/// needs no quoting, but one a policy can write unquoted is all the check allows.)
fn setting_name_error(name: &str) -> Option<String> {
    let rule = "a custom setting's name is two or more parts joined by dots (`prefix.name`, such as \
                `app.tenant`), each an ASCII letter or `_` followed by ASCII letters, digits or `_`";
    if !name.contains('.') {
        return Some(format!("{name:?} has no dot: {rule}"));
    }
    for (n, part) in name.split('.').enumerate() {
        let mut chars = part.chars();
        let why = match chars.next() {
            None => "is empty".to_owned(),
            Some(c) if !(c.is_ascii_alphabetic() || c == '_') => format!("starts with {c:?}"),
            _ => match chars.find(|&c| !(c.is_ascii_alphanumeric() || c == '_')) {
                Some(c) => format!("has {c:?}"),
                None => continue,
            },
        };
        return Some(format!("{name:?}: its part {} {why}: {rule}", n + 1));
    }
    None
}

/// The key the current scope's transactions set the tenant setting to: its tenant's, or `''`
/// where it serves none (outside a scope too).
fn current_tenant_key() -> String {
    Lineage::current().get::<Tenant>().map(|tenant| tenant.key().to_owned()).unwrap_or_default()
}

impl<DB: Backend> Database<DB> {
    /// A data source of object name `name` on `pool`; `transactions` is the App's
    /// [`Transactions`] (for a data source registered by hand).
    ///
    /// On PostgreSQL, [`with_tenant_setting`](Database::with_tenant_setting) gives it the
    /// `tenant_setting` of a data source built from configuration.
    pub fn new(name: impl Into<String>, pool: Pool<DB>, transactions: Arc<Transactions>) -> Self {
        Database {
            name: name.into(),
            pool,
            transactions,
            tenant_setting: None,
            resolve_commits: false,
            read_only_begun: Default::default(),
        }
    }

    /// A data source named `name`, its settings in the configuration section `section`
    /// (`url`, and optionally `max_connections`, `acquire_timeout_ms`, `tenant_setting`), to
    /// register with `App::builder().register(..)`: for an App with several data sources,
    /// which `#[transactional(source = "name")]` and `#[inject(name = "name")]` tell apart.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::App;
    /// use tegu_sqlx::{Database, Sqlite};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(Database::<Sqlite>::named("audit", "audit_db"))
    ///     .config_value("audit_db.url", "sqlite::memory:")
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Database<Sqlite>>("audit")?.name(), "audit");
    /// # Ok(()) }
    /// ```
    pub fn named(name: &'static str, section: &'static str) -> ProtoDef {
        ProtoDef::new_async::<Self, _, _>(Lifetime::Singleton, move |r| Self::connect(r, section))
            .name(name)
            .dep(Dependency::new::<Transactions>(InjectKind::Arc, None))
            .provides::<Self, dyn TxSource>(|db| db)
            .reads_config::<Settings>(section)
    }

    /// Reads the settings at `section` and the App's [`Transactions`]; connects when awaited.
    ///
    /// A `tenant_setting` on a database without settings of a transaction's own (SQLite), or
    /// one that is not a custom setting's name, is [`DiError::ConfigInvalid`], naming the key.
    fn connect(
        r: &Resolver<'_>,
        section: &str,
    ) -> Result<impl Future<Output = Result<Self, tegu_core::error::BoxError>> + Send + 'static + use<DB>, DiError>
    {
        let settings: Settings = r.config().get(section)?;
        let tenant_setting = match settings.tenant_setting {
            None => None,
            Some(setting) => {
                let key = format!("{section}.tenant_setting");
                let refused = |message: String| DiError::ConfigInvalid {
                    origin: r.config().origin(&key),
                    key: key.clone(),
                    section: std::any::type_name::<Settings>(),
                    message,
                };
                if !DB::TX_SETTINGS {
                    return Err(refused(format!(
                        "`tenant_setting` is PostgreSQL-only (a transaction-local setting for row-level \
                         security policies), and this data source is {}: remove the key",
                        DB::NAME
                    )));
                }
                if let Some(why) = setting_name_error(&setting) {
                    return Err(refused(why));
                }
                Some(Arc::from(setting))
            }
        };
        if settings.resolve_commits && !DB::TX_SETTINGS {
            let key = format!("{section}.resolve_commits");
            return Err(DiError::ConfigInvalid {
                origin: r.config().origin(&key),
                key,
                section: std::any::type_name::<Settings>(),
                message: format!(
                    "`resolve_commits` is PostgreSQL-only (a COMMIT's answer lost on the network), and this data \
                     source is {}, whose commits cannot lose their answer: remove the key",
                    DB::NAME
                ),
            });
        }
        let resolve_commits = settings.resolve_commits;
        let transactions = r.arc::<Transactions>(0)?;
        let name = r.object_name().to_owned();
        Ok(async move {
            let mut options = PoolOptions::<DB>::new();
            if let Some(max) = settings.max_connections {
                options = options.max_connections(max);
            }
            if let Some(ms) = settings.acquire_timeout_ms {
                options = options.acquire_timeout(Duration::from_millis(ms));
            }
            let pool = options.connect(&settings.url).await.map_err(|e| format!("connecting to `{name}`: {e}"))?;
            Ok(Database {
                name,
                pool,
                transactions,
                tenant_setting,
                resolve_commits,
                read_only_begun: Default::default(),
            })
        })
    }

    /// The object name: the data source's name for tegu-tx.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The custom setting each transaction sets to the scope's tenant (`tenant_setting`,
    /// PostgreSQL only), if any.
    pub fn tenant_setting(&self) -> Option<&str> {
        self.tenant_setting.as_deref()
    }

    /// The pool, for work outside any transaction (schema migrations, maintenance): a
    /// statement on it is committed on its own, even inside a `#[transactional]` method.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }

    /// Whether a transaction of this data source is current, and not read-only
    /// (`#[transactional(read_only)]`).
    #[cfg_attr(not(feature = "outbox"), allow(dead_code))]
    pub(crate) fn in_writable_transaction(&self) -> bool {
        self.transactions.current(&self.name).is_some_and(|tx| !tx.is_read_only())
    }

    /// A connection for the next statements: the current transaction's (the innermost of this
    /// task's `#[transactional]` methods, else the request's), locked until dropped; outside
    /// any transaction, one of the pool's, each statement committed on its own.
    ///
    /// Hold it for a statement or a few, not across a call to another `#[transactional]`
    /// method, which needs the same connection.
    ///
    /// # Errors
    ///
    /// [`TxError::Aborted`] if SQLite rolled the transaction back itself (after a full disk,
    /// an I/O error, a `RAISE(ROLLBACK)`): no statement may then run outside it and commit on
    /// its own. [`TxError::Ended`] once the transaction is over, [`TxError::Busy`] if no
    /// connection came free within the pool's acquire timeout, and [`TxError::Database`] if
    /// none could be had otherwise.
    pub async fn conn(&self) -> Result<Conn<DB>, TxError> {
        match self.transactions.current(&self.name) {
            Some(tx) => {
                let mut guard = tx.lock().await?;
                if self.tenant_setting.is_some() {
                    self.same_tenant(&mut *guard)?;
                }
                Ok(Conn(Inner::Tx(guard.map(
                    |conn: &mut dyn TxConn| match conn.as_any_mut().downcast_mut::<SqlxTx<DB>>() {
                        Some(tx) => &mut *tx.tx,
                        None => unreachable!("data source names are unique in an App: its transactions are its own"),
                    },
                ))))
            }
            None => match self.pool.acquire().await {
                Ok(mut conn) => {
                    if self.read_only_begun.load(std::sync::atomic::Ordering::Acquire) {
                        DB::reset(&mut conn)
                            .await
                            .map_err(|e| TxError::database("setting a connection back", self.name.as_str(), e))?;
                    }
                    Ok(Conn(Inner::Pool(conn)))
                }
                Err(e) => Err(self.error("acquiring a connection", e)),
            },
        }
    }

    /// With a `tenant_setting`: refuses a statement in a transaction begun for another tenant
    /// than the current scope's (a scope of tenant `b` opened inside a method of tenant `a`'s
    /// transaction): the database would see it as `a`'s.
    fn same_tenant(&self, conn: &mut dyn TxConn) -> Result<(), TxError> {
        let begun = conn.as_any_mut().downcast_mut::<SqlxTx<DB>>().and_then(|tx| tx.tenant.clone());
        let now = current_tenant_key();
        if begun.as_deref() == Some(now.as_str()) {
            return Ok(());
        }
        let shown = |key: &str| if key.is_empty() { "no tenant".to_owned() } else { format!("tenant {key:?}") };
        let why = format!(
            "this transaction was begun for {}, and the current scope serves {}: its `tenant_setting` would \
             show the database the other tenant's rows; a scope of another tenant begins a transaction of \
             its own (`#[transactional(requires_new)]`, or open the scope outside the method's transaction)",
            shown(begun.as_deref().unwrap_or_default()),
            shown(&now)
        );
        Err(TxError::database("joining a transaction", self.name.as_str(), why.into()))
    }

    /// Whether the caller runs in a transaction of this data source.
    pub fn in_transaction(&self) -> bool {
        self.transactions.current(&self.name).is_some()
    }

    /// `error` of this data source while `doing`, as a [`TxError::Database`], or as a
    /// [`TxError::Busy`] if the database had no connection to give in time (the pool's
    /// acquire timeout, SQLite's busy timeout, PostgreSQL refusing connections): for a
    /// `#[transactional]` method whose error type is `TxError` (or converts from it).
    ///
    /// A serialization failure or a deadlock is also noted on the current transaction
    /// ([`Tx::note_failure`](tegu_tx::Tx::note_failure)): a method retried on conflicts
    /// (`#[transactional(requires_new, retry = ..)]`) runs again after it, whatever its own
    /// error type keeps of it.
    pub fn error(&self, doing: &'static str, error: sqlx::Error) -> TxError {
        let error = TxError::database(doing, self.name.as_str(), crate::backend::boxed::<DB>(error));
        if let Some(tx) = self.transactions.current(&self.name) {
            tx.note_failure(error.class());
        }
        error
    }
}

impl<DB: Backend> TxSource for Database<DB> {
    /// Begins a transaction; with a `tenant_setting`, sets it to the current scope's tenant
    /// (read here, in the task of the method that begins it), or to `''` without one.
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        self.begin_with(&TxOptions::default())
    }

    /// Begins a transaction set up as `options` say: on PostgreSQL, `BEGIN ISOLATION LEVEL ..
    /// READ ONLY` and the transaction's `statement_timeout`; on SQLite, whose transactions are
    /// serializable at every level, a read-only one begins deferred with `PRAGMA query_only` on
    /// until it ends.
    fn begin_with(&self, options: &TxOptions) -> TxFuture<'_, Box<dyn TxConn>> {
        let setting = self.tenant_setting.as_ref().map(|name| (Arc::clone(name), current_tenant_key()));
        if DB::READ_ONLY_ON_CONNECTION && options.is_read_only() {
            self.read_only_begun.store(true, std::sync::atomic::Ordering::Release);
        }
        let reset = self.read_only_begun.load(std::sync::atomic::Ordering::Acquire);
        DB::begin(&self.pool, *options, setting, self.resolve_commits, reset)
    }

    fn one_at_a_time(&self) -> bool {
        DB::ONE_AT_A_TIME
    }
}

impl<DB: sqlx::Database> std::fmt::Debug for Database<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("name", &self.name)
            .field("database", &DB::NAME)
            .field("tenant_setting", &self.tenant_setting)
            .field("resolve_commits", &self.resolve_commits)
            .finish_non_exhaustive()
    }
}

/// `Database<DB>` as a proto: object name `database`, settings in `[database]`, linked with
/// `App::builder().link::<Database<DB>>()`.
macro_rules! proto {
    ($db:ty, $connect:ident, $as_source:ident) => {
        fn $connect(r: &Resolver<'_>) -> Result<BuildFuture, DiError> {
            let connect = Database::<$db>::connect(r, "database")?;
            Ok(Box::pin(async move { Ok(Arc::new(connect.await?) as AnyArc) }))
        }

        fn $as_source(obj: AnyArc, out: &mut dyn std::any::Any) {
            let db: Arc<dyn TxSource> = obj.downcast::<Database<$db>>().expect("stored as its own type");
            put(out, db);
        }

        impl tegu_core::Proto for Database<$db> {
            const DESCRIPTOR: ProtoDescriptor =
                ProtoDescriptor::new_async::<Database<$db>>("database", Lifetime::Singleton, $connect)
                    .deps(const { &[Dependency::new::<Transactions>(InjectKind::Arc, None)] })
                    .provides(const { &[Provide::new::<dyn TxSource>($as_source)] })
                    .reads_config(const { &[tegu_core::registry::ConfigReader::new::<Settings>("database")] });
        }

        impl tegu_core::SingletonProto for Database<$db> {}

        impl Database<$db> {
            /// Runs `ddl`, a `CREATE … IF NOT EXISTS` statement, where several instances of a
            /// service may start at once: PostgreSQL's `IF NOT EXISTS` is not atomic (the loser
            /// of the race fails on the catalog's unique index), so a failure is tried once more,
            /// when the object exists. On the pool, outside any transaction.
            ///
            /// # Errors
            ///
            /// [`TxError::Database`], saying `doing`, if the second try fails too.
            ///
            /// # Examples
            ///
            /// ```
            /// # use tegu_core::App;
            /// # use tegu_sqlx::{Database, Sqlite};
            /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
            /// # let app = App::builder().link::<Database<Sqlite>>().config_value("database.url", "sqlite::memory:").build().await?;
            /// let db = app.get_object::<Database<Sqlite>>()?;
            /// let ddl = "CREATE TABLE IF NOT EXISTS notes (note TEXT)";
            /// db.create_if_missing(ddl, "creating the notes").await?;
            /// db.create_if_missing(ddl, "creating the notes").await?; // there already: nothing
            /// # Ok(()) }
            /// ```
            pub async fn create_if_missing(&self, ddl: &str, doing: &'static str) -> Result<(), TxError> {
                if sqlx::query(ddl).execute(&self.pool).await.is_ok() {
                    return Ok(());
                }
                sqlx::query(ddl).execute(&self.pool).await.map(drop).map_err(|e| self.error(doing, e))
            }
        }
    };
}

#[cfg(feature = "sqlite")]
proto!(sqlx::Sqlite, connect_sqlite, sqlite_as_source);
#[cfg(feature = "postgres")]
proto!(sqlx::Postgres, connect_postgres, postgres_as_source);

#[cfg(feature = "postgres")]
impl Database<sqlx::Postgres> {
    /// This data source with the `tenant_setting` `name` (a custom setting's name, such as
    /// `app.tenant`): each transaction begins with `SELECT set_config(name, key, true)`, `key`
    /// being the tenant the current scope serves, or `''` without one (see
    /// [Row-level security](Database#row-level-security-on-postgresql)). For a data source
    /// built by hand with [`Database::new`]; one built from configuration reads the key
    /// `tenant_setting` of its section.
    ///
    /// # Errors
    ///
    /// [`DiError::ConfigInvalid`] (key `tenant_setting`) if `name` is not a custom setting's
    /// name: two or more parts joined by dots, each an ASCII letter or `_` followed by ASCII
    /// letters, digits or `_`.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use tegu_core::App;
    /// use tegu_sqlx::{Database, Postgres};
    /// use tegu_tx::Transactions;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = App::builder().build().await?;
    /// // A pool that connects when first used: nothing here needs a server.
    /// let pool = sqlx::PgPool::connect_lazy("postgres://app@db.internal/app")?;
    /// let db = Database::new("database", pool, app.get_object::<Transactions>()?);
    /// let db = db.with_tenant_setting("app.tenant")?;
    /// assert_eq!(db.tenant_setting(), Some("app.tenant"));
    /// # let pool = sqlx::PgPool::connect_lazy("postgres://app@db.internal/app")?;
    /// # let db = Database::new("database", pool, app.get_object::<Transactions>()?);
    /// assert!(db.with_tenant_setting("tenant").is_err()); // no dot: not a custom setting
    /// # Ok(()) }
    /// ```
    pub fn with_tenant_setting(mut self, name: &str) -> Result<Self, DiError> {
        if let Some(message) = setting_name_error(name) {
            return Err(DiError::ConfigInvalid {
                key: "tenant_setting".to_owned(),
                section: "tegu_sqlx::Database::with_tenant_setting",
                message,
                origin: None,
            });
        }
        self.tenant_setting = Some(Arc::from(name));
        Ok(self)
    }

    /// This data source with `resolve_commits` on or off: a `COMMIT` whose answer is lost is
    /// resolved against the database, at the price of a round trip per transaction (see
    /// [A `COMMIT` whose answer is lost](Database#a-commit-whose-answer-is-lost-on-postgresql)).
    /// For a data source built by hand; one built from configuration reads the key
    /// `resolve_commits` of its section.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use tegu_core::App;
    /// use tegu_sqlx::{Database, Postgres};
    /// use tegu_tx::Transactions;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = App::builder().build().await?;
    /// let pool = sqlx::PgPool::connect_lazy("postgres://app@db.internal/app")?;
    /// let db = Database::new("database", pool, app.get_object::<Transactions>()?).resolve_commits(true);
    /// assert!(db.resolves_commits());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn resolve_commits(mut self, on: bool) -> Self {
        self.resolve_commits = on;
        self
    }

    /// Whether a `COMMIT` whose answer is lost is resolved against the database.
    pub fn resolves_commits(&self) -> bool {
        self.resolve_commits
    }
}

/// `$ty<$db>` as a singleton proto of object name `$name` on the `database` data source,
/// providing `$role`, built by `$ty::<$db>::new(db)` (which creates its table): the shape
/// [`OutboxTable`](crate::OutboxTable) and [`ClusterSchedules`](crate::ClusterSchedules) share.
/// `$build` and `$as_role` name the two functions it writes.
macro_rules! on_database {
    ($ty:ident<$db:ty>, $name:literal, $role:ty, $build:ident, $as_role:ident) => {
        fn $build(r: &tegu_core::Resolver<'_>) -> Result<tegu_core::registry::BuildFuture, tegu_core::DiError> {
            let db = r.arc::<$crate::Database<$db>>(0)?;
            Ok(Box::pin(
                async move { Ok(std::sync::Arc::new($ty::<$db>::new(db).await?) as tegu_core::registry::AnyArc) },
            ))
        }

        fn $as_role(obj: tegu_core::registry::AnyArc, out: &mut dyn std::any::Any) {
            let role: std::sync::Arc<$role> = obj.downcast::<$ty<$db>>().expect("stored as its own type");
            tegu_core::registry::put(out, role);
        }

        impl tegu_core::Proto for $ty<$db> {
            const DESCRIPTOR: tegu_core::registry::ProtoDescriptor =
                tegu_core::registry::ProtoDescriptor::new_async::<$ty<$db>>(
                    $name,
                    tegu_core::registry::Lifetime::Singleton,
                    $build,
                )
                .deps(
                    const {
                        &[tegu_core::registry::Dependency::new::<$crate::Database<$db>>(
                            tegu_core::registry::InjectKind::Arc,
                            Some("database"),
                        )]
                    },
                )
                .provides(const { &[tegu_core::registry::Provide::new::<$role>($as_role)] });
        }

        impl tegu_core::SingletonProto for $ty<$db> {}
    };
}
pub(crate) use on_database;
