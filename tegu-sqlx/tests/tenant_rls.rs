//! `[database] tenant_setting` on PostgreSQL: each transaction sets the custom setting to the
//! scope's tenant (`''` without one), so that a row-level security policy on
//! `current_setting('app.tenant', true)` keeps every tenant to its own rows. Against a real
//! server, connected as a role that is not a superuser (a superuser bypasses row-level
//! security, even `FORCE`d): the one `DI_TEST_POSTGRES_URL` names (`.ci/run` starts it), else
//! one this test process starts (`tegu_test_support::servers`), else skipped with the reason
//! printed (failed under `DI_TEST_REQUIRE_SERVERS=1`).
//!
//! Also the build errors, which need no server: the key on SQLite, and a name that is not a
//! custom setting's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sqlx::PgPool;
use tegu_core::{App, DiError, singleton_proto};
use tegu_sqlx::{Database, Postgres, Sqlite};
use tegu_tx::{ErrorClass, TxError, transactional};

/// The setting the policy reads.
const SETTING: &str = "app.tenant";

/// What a transaction saw: its connection's server process, the setting, and the notes.
#[derive(Debug)]
pub struct View {
    /// `pg_backend_pid()`: which of the pool's connections ran the transaction.
    pub pid: i32,
    /// `current_setting('app.tenant', true)`.
    pub setting: Option<String>,
    /// The notes the policy lets it see, as `(tenant, body)`, sorted.
    pub notes: Vec<(String, String)>,
}

/// Notes, read and written in the scope's transaction.
#[derive(Debug)]
#[singleton_proto]
pub struct Notes {
    #[inject]
    db: Arc<Database<Postgres>>,
}

impl Notes {
    /// Writes a note of `tenant` (whatever the scope's tenant is: the policy checks it).
    #[transactional]
    pub async fn add(&self, tenant: &str, body: &str) -> Result<(), TxError> {
        let mut conn = self.db.conn().await?;
        let done = sqlx::query("INSERT INTO notes (tenant, body) VALUES ($1, $2)")
            .bind(tenant)
            .bind(body)
            .execute(&mut *conn)
            .await;
        done.map(drop).map_err(|e| self.db.error("inserting a note", e))
    }

    /// What the transaction sees.
    #[transactional]
    pub async fn view(&self) -> Result<View, TxError> {
        let mut conn = self.db.conn().await?;
        let (pid, setting): (i32, Option<String>) =
            sqlx::query_as("SELECT pg_backend_pid(), current_setting('app.tenant', true)")
                .fetch_one(&mut *conn)
                .await
                .map_err(|e| self.db.error("reading the setting", e))?;
        let notes = sqlx::query_as("SELECT tenant, body FROM notes ORDER BY tenant, body")
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| self.db.error("reading the notes", e))?;
        Ok(View { pid, setting, notes })
    }

    /// Inside this scope's transaction, what a scope of `other` sees (an "act as" path): its
    /// `view` would join the transaction begun for this scope's tenant.
    #[transactional]
    pub async fn view_as(&self, app: &tegu_core::App, other: &str) -> Result<View, TxError> {
        self.view().await?; // the transaction begins here, for this scope's tenant
        app.scope()
            .tenant(other)
            .map_err(|e| TxError::database("opening a scope", "database", e.into()))?
            .run(self.view())
            .await
    }

    /// Writes a note of `tenant`, lets the other scopes run, then returns what the
    /// transaction sees.
    #[transactional]
    pub async fn add_then_view(&self, tenant: &str, body: &str) -> Result<View, TxError> {
        self.add(tenant, body).await?;
        tokio::task::yield_now().await;
        self.view().await
    }
}

/// A database with the table `notes` under the policy, and a role that is no superuser and may
/// read and write it: the admin's pool (a superuser's: it sees every row), and the URL of the
/// role. `None` where no server can be had.
struct Server {
    admin: PgPool,
    admin_url: String,
    role: String,
    url: String,
}

impl Server {
    async fn new(test: &str) -> Option<Server> {
        let name = format!("di_sqlx_rls_{}_{test}", std::process::id());
        let admin_url = match tegu_test_support::servers::postgres_database(&name) {
            Ok(url) => url,
            Err(why) => {
                tegu_test_support::servers::skip(test, why);
                return None;
            }
        };
        let admin = PgPool::connect(&admin_url).await.expect("the admin connects");
        let role = name.clone();
        let password = "rls-test";
        // A role is the cluster's: one of a previous run of this process id goes first.
        let _ = sqlx::query(&format!("DROP ROLE IF EXISTS {role}")).execute(&admin).await;
        let policy = format!(
            "CREATE ROLE {role} LOGIN PASSWORD '{password}' NOSUPERUSER NOBYPASSRLS;
             CREATE TABLE notes (tenant text NOT NULL, body text NOT NULL);
             ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
             ALTER TABLE notes FORCE ROW LEVEL SECURITY;
             CREATE POLICY by_tenant ON notes
                 USING (tenant = current_setting('{SETTING}', true))
                 WITH CHECK (tenant = current_setting('{SETTING}', true));
             GRANT USAGE ON SCHEMA public TO {role};
             GRANT SELECT, INSERT ON notes TO {role};"
        );
        sqlx::raw_sql(&policy).execute(&admin).await.expect("the table, its policy and the role");
        let url = as_role(&admin_url, &role, password);
        Some(Server { admin, admin_url, role, url })
    }

    /// An App whose data source connects as the role, with `[database] tenant_setting =
    /// "app.tenant"` and at most `max_connections`.
    async fn app(&self, max_connections: u32) -> App {
        App::builder()
            .link::<Database<Postgres>>()
            .config_value("database.url", self.url.as_str())
            .config_value("database.tenant_setting", SETTING)
            .config_value("database.max_connections", max_connections)
            .build()
            .await
            .expect("the App builds")
    }

    /// Every note, as the superuser sees them (past the policy), sorted.
    async fn all_notes(&self) -> Vec<(String, String)> {
        sqlx::query_as("SELECT tenant, body FROM notes ORDER BY tenant, body").fetch_all(&self.admin).await.unwrap()
    }

    /// Drops the database and the role (a role outlives a database, on a server of CI's).
    async fn drop_all(self) {
        self.admin.close().await;
        let (server, _) = self.admin_url.rsplit_once('/').expect("a URL with a database");
        let maintenance = PgPool::connect(&format!("{server}/postgres")).await.unwrap();
        let database = self.role.as_str();
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)")).execute(&maintenance).await;
        let _ = sqlx::query(&format!("DROP ROLE IF EXISTS {}", self.role)).execute(&maintenance).await;
        maintenance.close().await;
    }
}

/// `url` with `role:password` as its user, in place of its own.
fn as_role(url: &str, role: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    format!("{scheme}://{role}:{password}@{host}{path}")
}

/// The error's message and its sources', joined.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

fn pair(tenant: &str, body: &str) -> (String, String) {
    (tenant.to_owned(), body.to_owned())
}

/// Each scope's transactions see its tenant's rows only, write only its tenant's rows, and a
/// scope without a tenant sees none: its transactions set the setting to `''`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_scope_sees_and_writes_its_tenants_rows_only() {
    let Some(server) = Server::new("scopes").await else { return };
    let app = server.app(10).await;
    let db = app.get_object::<Database<Postgres>>().unwrap();
    assert_eq!(db.tenant_setting(), Some(SETTING));
    let notes = app.get_object::<Notes>().unwrap();

    // Acme writes two notes, globex one, each in a request of its own.
    let acme = app.scope().tenant("acme").unwrap();
    acme.try_run(async {
        notes.add("acme", "a1").await.unwrap();
        notes.add("acme", "a2").await.unwrap();
        // Its own, not yet committed, in its own transaction.
        assert_eq!(notes.view().await.unwrap().notes, [pair("acme", "a1"), pair("acme", "a2")]);
    })
    .await
    .unwrap();
    app.scope().tenant("globex").unwrap().try_run(notes.add("globex", "g1")).await.unwrap().unwrap();
    assert_eq!(server.all_notes().await, [pair("acme", "a1"), pair("acme", "a2"), pair("globex", "g1")]);

    // Globex reads its own only; acme its own only.
    let globex = app.scope().tenant("globex").unwrap().try_run(notes.view()).await.unwrap().unwrap();
    assert_eq!(globex.setting.as_deref(), Some("globex"));
    assert_eq!(globex.notes, [pair("globex", "g1")]);
    let acme = app.scope().tenant("acme").unwrap().try_run(notes.view()).await.unwrap().unwrap();
    assert_eq!(acme.notes, [pair("acme", "a1"), pair("acme", "a2")]);

    // Globex writing a row of acme's: the policy's WITH CHECK refuses it, and nothing is stored.
    let sneaky = app.scope().tenant("globex").unwrap().run(notes.add("acme", "sneaky")).await;
    let error = sneaky.expect_err("the policy refuses another tenant's row");
    let text = chain(&error);
    assert!(text.contains("violates row-level security policy"), "{text}");
    assert!(matches!(error, TxError::Database { .. }), "{error:?}");
    assert_eq!(error.class(), ErrorClass::Other);
    assert_eq!(server.all_notes().await.len(), 3);

    // A scope without a tenant: the setting is '' (set, not left to a connection's past), and
    // the policy gives no rows; a row of any tenant is refused.
    let none = app.run_in_context(notes.view()).await.unwrap();
    assert_eq!(none.setting.as_deref(), Some(""));
    assert!(none.notes.is_empty(), "{:?}", none.notes);
    let refused = app.run_in_context(notes.add("acme", "anonymous")).await;
    assert!(chain(&refused.expect_err("no tenant, no row")).contains("row-level security"));

    // A scope of globex inside a transaction begun for acme does not share it: the database
    // would take its statements for acme's.
    let acting = app.scope().tenant("acme").unwrap().run(notes.view_as(&app, "globex")).await;
    let text = chain(&acting.expect_err("another tenant's scope does not join the transaction"));
    assert!(text.contains("begun for tenant \"acme\", and the current scope serves tenant \"globex\""), "{text}");

    // Outside any transaction the setting is not set: the policy gives no rows either.
    let outside: Vec<(String, String)> =
        sqlx::query_as("SELECT tenant, body FROM notes").fetch_all(db.pool()).await.unwrap();
    assert!(outside.is_empty(), "{outside:?}");

    app.shutdown().await.unwrap();
    drop((notes, db, app));
    server.drop_all().await;
}

/// 100 scopes at once on a pool of 4 connections, their tenants alternating (acme, globex,
/// none): the connections go from tenant to tenant, and no scope ever sees another tenant's
/// row, committed or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_scopes_on_a_small_pool_never_see_another_tenants_rows() {
    let Some(server) = Server::new("concurrent").await else { return };
    let app = server.app(4).await;
    let notes = app.get_object::<Notes>().unwrap();
    let tenants = [Some("acme"), Some("globex"), None];
    let scopes = (0..100).map(|i| {
        let tenant = tenants[i % tenants.len()];
        let notes = &notes;
        let app = &app;
        async move {
            let body = format!("n{i:03}");
            let view = match tenant {
                Some(tenant) => {
                    let scope = app.scope().tenant(tenant).unwrap();
                    scope.try_run(notes.add_then_view(tenant, &body)).await.unwrap().unwrap()
                }
                None => app.try_run_in_context(notes.view()).await.unwrap().unwrap(),
            };
            (tenant, body, view)
        }
    });
    let seen = futures_util::future::join_all(scopes).await;
    let mut tenants_of_connection: BTreeMap<i32, BTreeSet<Option<&str>>> = BTreeMap::new();
    for (tenant, body, view) in &seen {
        tenants_of_connection.entry(view.pid).or_default().insert(*tenant);
        assert_eq!(view.setting.as_deref(), Some(tenant.unwrap_or("")));
        match tenant {
            Some(tenant) => {
                assert!(view.notes.iter().all(|(t, _)| t == tenant), "{tenant} saw {:?}", view.notes);
                assert!(view.notes.contains(&pair(tenant, body)), "{tenant} did not see its own {body}");
            }
            None => assert!(view.notes.is_empty(), "a scope without a tenant saw {:?}", view.notes),
        }
    }
    assert!(tenants_of_connection.len() <= 4, "{tenants_of_connection:?}");
    assert!(
        tenants_of_connection.values().any(|tenants| tenants.len() > 1),
        "no connection served two tenants: {tenants_of_connection:?}"
    );
    let stored = server.all_notes().await;
    assert_eq!(stored.iter().filter(|(t, _)| t == "acme").count(), 34);
    assert_eq!(stored.iter().filter(|(t, _)| t == "globex").count(), 33);
    assert_eq!(stored.len(), 67);
    app.shutdown().await.unwrap();
    drop((notes, app));
    server.drop_all().await;
}

/// `tenant_setting` on SQLite is refused when the App is built, naming the key and saying it
/// is PostgreSQL-only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_refuses_the_tenant_setting() {
    let built = App::builder()
        .link::<Database<Sqlite>>()
        .exclude::<Notes>() // a data source of PostgreSQL's
        .exclude::<NotesLoader>()
        .exclude::<Dashboard>()
        .exclude::<tegu_core::tenant::TenantRef<NotesLoader>>()
        .config_value("database.url", "sqlite::memory:")
        .config_value("database.tenant_setting", SETTING)
        .build()
        .await;
    let error = built.expect_err("SQLite has no tenant setting");
    let DiError::ConfigInvalid { key, message, .. } = &error else { panic!("{error:?}") };
    assert_eq!(key, "database.tenant_setting");
    assert!(message.contains("PostgreSQL-only"), "{message}");
    assert!(error.to_string().contains("config_value"), "where it was set: {error}");
}

/// A name that is not a custom setting's (`prefix.name`, letters, digits and `_`) is refused
/// when the App is built, before connecting: naming the key and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_name_that_is_not_a_custom_settings_is_refused() {
    for (name, why) in [
        ("tenant", "has no dot"),
        ("app.", "its part 2 is empty"),
        (".tenant", "its part 1 is empty"),
        ("app.1tenant", "its part 2 starts with '1'"),
        ("app.tenant'); DROP TABLE notes; --", "its part 2 has '\\''"),
        ("app.ten ant", "its part 2 has ' '"),
    ] {
        let built = App::builder()
            .link::<Database<Postgres>>()
            .config_value("database.url", "postgres://nobody@127.0.0.1:1/none")
            .config_value("database.tenant_setting", name)
            .build()
            .await;
        let error = built.expect_err(name);
        let DiError::ConfigInvalid { key, message, .. } = &error else { panic!("{name}: {error:?}") };
        assert_eq!(key, "database.tenant_setting");
        assert!(message.contains(why), "{name}: {message}");
    }
    // The same rule for a data source built by hand.
    let app = App::builder()
        .exclude::<Notes>()
        .exclude::<NotesLoader>()
        .exclude::<Dashboard>()
        .exclude::<tegu_core::tenant::TenantRef<NotesLoader>>()
        .build()
        .await
        .unwrap();
    let pool = || PgPool::connect_lazy("postgres://nobody@127.0.0.1:1/none").unwrap();
    let transactions = app.get_object::<tegu_tx::Transactions>().unwrap();
    let db = Database::new("database", pool(), transactions.clone()).with_tenant_setting("my_app.tenant_key").unwrap();
    assert_eq!(db.tenant_setting(), Some("my_app.tenant_key"));
    let refused = Database::new("database", pool(), transactions).with_tenant_setting("tenant").unwrap_err();
    assert!(refused.to_string().contains("has no dot"), "{refused}");
}

/// Each tenant's settings, loaded by `create` through a `#[transactional]` repository: the
/// tenant's notes, as its own transaction sees them.
#[derive(Debug)]
pub struct TenantNotes {
    /// The notes.
    notes: Vec<(String, String)>,
}

/// Loads each tenant's notes.
#[derive(Debug)]
#[singleton_proto]
pub struct NotesLoader {
    #[inject]
    notes: Arc<Notes>,
}

impl tegu_core::tenant::TenantObjects for NotesLoader {
    type Object = TenantNotes;

    async fn create(&self, _: &tegu_core::tenant::Tenant) -> Result<TenantNotes, tegu_core::error::BoxError> {
        let view = self.notes.view().await?;
        Ok(TenantNotes { notes: view.notes })
    }
}

/// Reads the tenant's notes.
#[derive(Debug)]
#[singleton_proto]
pub struct Dashboard {
    #[inject]
    loaded: tegu_core::tenant::TenantRef<NotesLoader>,
}

/// A tenant's `create` that reads through the same repository its requests use runs in a scope
/// of its tenant: its transaction is the tenant's, so the policy shows it the tenant's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_create_reads_through_a_transactional_repository_as_its_tenant() {
    let Some(server) = Server::new("create").await else { return };
    let app = server.app(4).await;
    let notes = app.get_object::<Notes>().unwrap();
    for tenant in ["acme", "globex"] {
        let scope = app.scope().tenant(tenant).unwrap();
        scope.try_run(async { notes.add(tenant, "plan").await.unwrap() }).await.unwrap();
    }
    let dashboard = app.get_object::<Dashboard>().unwrap();
    let seen = app.scope().tenant("acme").unwrap().run(async { dashboard.loaded.get().await }).await;
    let seen = seen.expect("acme's settings load");
    assert_eq!(seen.notes, [pair("acme", "plan")]);
    app.shutdown().await.unwrap();
    server.drop_all().await;
}
