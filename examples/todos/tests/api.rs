//! The todo service over a real socket, its database checked behind its back: on SQLite, and
//! on PostgreSQL for the tests that `both!` runs on each (a real server: `DI_TEST_POSTGRES_URL`,
//! else one the tests start; skipped with the reason printed where there is none, except in
//! CI).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use tegu_core::{App, context_proto};
use todos::advice::{StatsBody, TenantStats};
use todos::db::Db;
use todos::todo::{Todo, TodoService, Users};

use child_env::in_child;
use http_client::{send, send_json};
use tegu_test_support::child_env;
use tegu_test_support::http_client;

/// The graph `main` builds, alone and with the outbox to NATS, checked with nothing built
/// (`AppBuilder::check`): no database is opened, no broker reached.
#[test]
fn the_graph_checks_with_and_without_nats() {
    todos::builder().check().unwrap();
    todos::with_nats(todos::builder()).config_value("nats.url", "nats://127.0.0.1:1").check().unwrap();
    // A schedule's period read from the configuration is checked too, naming the job.
    let error = todos::builder().config_value("purge.every", "now and then").check().unwrap_err().to_string();
    assert!(error.contains("purge"), "{error}");
}

/// The database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum On {
    Sqlite,
    Postgres,
}

/// A fresh database for test `name` on `on`, as a URL; `None` (skipped, the reason printed)
/// without a PostgreSQL server outside CI.
fn fresh_db(on: On, name: &str) -> Option<String> {
    match on {
        On::Sqlite => Some(format!("sqlite://{}", tegu_test_support::fresh_sqlite(&format!("todos-{name}")).display())),
        On::Postgres => {
            let database = format!("todos_{}_{}", std::process::id(), name.replace('-', "_"));
            match tegu_test_support::servers::postgres_database(&database) {
                Ok(url) => Some(url),
                Err(why) => {
                    tegu_test_support::servers::skip(name, why);
                    None
                }
            }
        }
    }
}

/// Runs `$test(on)` as two tests, `$test::on_sqlite` and `$test::on_postgres`.
macro_rules! both {
    ($test:ident) => {
        mod $test {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_sqlite() {
                super::$test(super::On::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_postgres() {
                super::$test(super::On::Postgres).await;
            }
        }
    };
}

/// Statements on the test's database behind the service's back, on a connection of their own:
/// they see what was committed.
struct Behind {
    url: String,
}

impl Behind {
    /// Runs `sql` (no parameters).
    async fn execute(&self, sql: &str) {
        if self.url.starts_with("sqlite:") {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
            pool.close().await;
        } else {
            let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
            pool.close().await;
        }
    }

    /// The tenant of each todo of `user`, oldest first.
    async fn tenants(&self, user: &str) -> Vec<String> {
        let sql = "SELECT tenant FROM todos WHERE \"user\" = $1 ORDER BY id";
        if self.url.starts_with("sqlite:") {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            let rows = sqlx::query_scalar(sql).bind(user).fetch_all(&pool).await.unwrap();
            pool.close().await;
            rows
        } else {
            let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
            let rows = sqlx::query_scalar(sql).bind(user).fetch_all(&pool).await.unwrap();
            pool.close().await;
            rows
        }
    }

    /// The rows of `user`, id and title, oldest first.
    async fn committed(&self, user: &str) -> Vec<(i64, String)> {
        let sql = "SELECT id, title FROM todos WHERE \"user\" = $1 ORDER BY id";
        if self.url.starts_with("sqlite:") {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            let rows = sqlx::query_as(sql).bind(user).fetch_all(&pool).await.unwrap();
            pool.close().await;
            rows
        } else {
            let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
            let rows = sqlx::query_as(sql).bind(user).fetch_all(&pool).await.unwrap();
            pool.close().await;
            rows
        }
    }
}

struct Service {
    addr: SocketAddr,
    app: App,
    db: Behind,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), tegu_http::ServeError>>,
}

impl Service {
    /// The service on a fresh SQLite database.
    async fn start(name: &str) -> Service {
        Service::start_on(On::Sqlite, name).await.expect("SQLite is always there")
    }

    /// The service on a fresh database of `on`, or `None` (skipped).
    async fn start_on(on: On, name: &str) -> Option<Service> {
        Service::start_built(on, name, |builder| builder, |_, routes| routes).await
    }

    async fn start_with(
        name: &str,
        routes: impl FnOnce(&App, tegu_http::RouterBuilder) -> tegu_http::RouterBuilder,
    ) -> Service {
        Service::start_built(On::Sqlite, name, |builder| builder, routes).await.expect("SQLite is always there")
    }

    /// Starts the service on a fresh database, its App from `todos::builder()` as `app` adapts it.
    async fn start_built(
        on: On,
        name: &str,
        app: impl FnOnce(tegu_core::AppBuilder) -> tegu_core::AppBuilder,
        routes: impl FnOnce(&App, tegu_http::RouterBuilder) -> tegu_http::RouterBuilder,
    ) -> Option<Service> {
        Some(Service::start_at(fresh_db(on, name)?, app, routes).await)
    }

    /// Starts the service on the database of `url`, its App from `todos::builder()` as `app`
    /// adapts it, its router `todos::router` of `todos::routes` as `routes` adapts them.
    async fn start_at(
        url: String,
        app: impl FnOnce(tegu_core::AppBuilder) -> tegu_core::AppBuilder,
        routes: impl FnOnce(&App, tegu_http::RouterBuilder) -> tegu_http::RouterBuilder,
    ) -> Service {
        let app = app(todos::builder().config_value("db.url", &url)).build().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let router = todos::router(routes(&app, todos::routes(&app))).unwrap();
        let server = tokio::spawn(
            tegu_http::Server::new(app.clone(), router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .run(listener),
        );
        Service { addr, app, db: Behind { url }, stop, server }
    }

    /// Ids of `user`'s todos as a separate connection sees them: only committed rows.
    async fn committed_ids(&self, user: &str) -> Vec<i64> {
        self.db.committed(user).await.into_iter().map(|(id, _)| id).collect()
    }

    /// Titles of `user` as a separate connection sees them: only committed rows.
    async fn committed_titles(&self, user: &str) -> Vec<String> {
        self.db.committed(user).await.into_iter().map(|(_, title)| title).collect()
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap().unwrap();
    }
}

async fn a_successful_request_commits_its_transaction(on: On) {
    let Some(service) = Service::start_on(on, "commit").await else { return };
    let reply = send_json(service.addr, "POST", "/users/ada/todos", r#"{"title":"write the docs"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let todo: Todo = serde_json::from_str(&reply.body).unwrap();
    assert_eq!((todo.title.as_str(), todo.done), ("write the docs", false));
    assert_eq!(service.committed_titles("ada").await, ["write the docs"], "committed before the response was sent");

    let reply = send_json(service.addr, "PATCH", &format!("/users/ada/todos/{}", todo.id), r#"{"done":true}"#).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let reply = send(service.addr, "GET", "/users/ada/todos", &[], b"").await;
    let todos: Vec<Todo> = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(todos, [Todo { id: todo.id, title: "write the docs".into(), done: true }]);
    // Users do not see each other's todos.
    assert_eq!(send(service.addr, "GET", "/users/bob/todos", &[], b"").await.body, "[]");
    assert_eq!(send(service.addr, "GET", &format!("/users/bob/todos/{}", todo.id), &[], b"").await.status, 404);
    assert_eq!(send(service.addr, "DELETE", &format!("/users/ada/todos/{}", todo.id), &[], b"").await.status, 204);
    assert!(service.committed_titles("ada").await.is_empty());
    service.stop().await;
}
both!(a_successful_request_commits_its_transaction);

async fn a_failed_request_rolls_its_transaction_back(on: On) {
    let Some(service) = Service::start_on(on, "rollback").await else { return };
    let reply = send_json(service.addr, "POST", "/users/ada/todos", r#"{"title":"kept"}"#).await;
    assert_eq!(reply.status, 201);

    // The first title is inserted, the second is invalid: the whole batch is rolled back.
    let reply = send(
        service.addr,
        "POST",
        "/users/ada/todos/batch",
        &[("content-type", "application/json"), ("x-request-id", "batch-1")],
        br#"[{"title":"lost"},{"title":"  "}]"#,
    )
    .await;
    assert_eq!(reply.status, 400, "{reply:?}");
    assert_eq!(reply.body, r#"{"error":"a title cannot be empty","request_id":"batch-1"}"#);
    assert_eq!(service.committed_titles("ada").await, ["kept"], "the inserted `lost` was rolled back");

    let reply = send_json(service.addr, "POST", "/users/ada/todos/batch", r#"[{"title":"a"},{"title":"b"}]"#).await;
    assert_eq!(reply.status, 201);
    assert_eq!(service.committed_titles("ada").await, ["kept", "a", "b"]);
    service.stop().await;
}
both!(a_failed_request_rolls_its_transaction_back);

async fn concurrent_requests_each_get_their_own_transaction(on: On) {
    let Some(service) = Service::start_on(on, "concurrent").await else { return };
    let addr = service.addr;
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            tokio::spawn(async move {
                // Every third request fails after inserting, and must leave nothing behind.
                let body = if i % 3 == 0 {
                    format!(r#"[{{"title":"bad {i}"}},{{"title":""}}]"#)
                } else {
                    format!(r#"[{{"title":"good {i}"}}]"#)
                };
                send_json(addr, "POST", "/users/many/todos/batch", &body).await.status
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap(), if i % 3 == 0 { 400 } else { 201 });
    }
    let titles = service.committed_titles("many").await;
    assert_eq!(titles.len(), 33, "{titles:?}");
    assert!(titles.iter().all(|t| t.starts_with("good")), "{titles:?}");
    assert_eq!(send(addr, "GET", "/health/ready", &[], b"").await.status, 200);
    service.stop().await;
}
both!(concurrent_requests_each_get_their_own_transaction);

/// A todo titled "... fails at commit" breaks a deferred foreign key, which the database checks
/// at COMMIT: the request's commit fails, as on a full disk.
async fn poison_the_commit(service: &Service, on: On) {
    service.db.execute("CREATE TABLE blockers (id INTEGER PRIMARY KEY)").await;
    match on {
        On::Sqlite => {
            service
                .db
                .execute(
                    "CREATE TABLE blocked (todo INTEGER, blocker INTEGER REFERENCES blockers (id) DEFERRABLE INITIALLY DEFERRED);
                     CREATE TRIGGER poison AFTER INSERT ON todos WHEN NEW.title LIKE '%fails at commit%'
                     BEGIN INSERT INTO blocked VALUES (NEW.id, 999); END;",
                )
                .await;
        }
        On::Postgres => {
            service
                .db
                .execute(
                    "CREATE TABLE blocked (todo BIGINT, blocker INTEGER REFERENCES blockers (id) DEFERRABLE INITIALLY DEFERRED);
                     CREATE FUNCTION poison() RETURNS trigger AS $$
                     BEGIN INSERT INTO blocked VALUES (NEW.id, 999); RETURN NEW; END $$ LANGUAGE plpgsql;
                     CREATE TRIGGER poison AFTER INSERT ON todos FOR EACH ROW
                     WHEN (NEW.title LIKE '%fails at commit%') EXECUTE FUNCTION poison();",
                )
                .await;
        }
    }
}

async fn a_failing_commit_answers_500_and_every_acknowledged_todo_is_stored(on: On) {
    let Some(service) = Service::start_on(on, "failing-commit").await else { return };
    poison_the_commit(&service, on).await;
    let addr = service.addr;
    let requests: Vec<_> = (0..60)
        .map(|i| {
            tokio::spawn(async move {
                // Every third request's last todo fails its COMMIT.
                let body: Vec<String> = (0..5)
                    .map(|j| {
                        let poison = if i % 3 == 2 && j == 4 { " fails at commit" } else { "" };
                        format!(r#"{{"title":"todo {i}.{j}{poison}"}}"#)
                    })
                    .collect();
                (i, send_json(addr, "POST", "/users/disk/todos/batch", &format!("[{}]", body.join(","))).await)
            })
        })
        .collect();
    let mut acknowledged = Vec::new();
    for request in requests {
        let (i, reply) = request.await.unwrap();
        match reply.status {
            201 if i % 3 != 2 => {
                acknowledged.extend(serde_json::from_str::<Vec<Todo>>(&reply.body).unwrap().into_iter().map(|t| t.id))
            }
            500 if i % 3 == 2 => {}
            other => panic!("request {i} answered {other}: {reply:?}"),
        }
    }
    let stored: BTreeSet<i64> = service.committed_ids("disk").await.into_iter().collect();
    let unique: BTreeSet<i64> = acknowledged.iter().copied().collect();
    assert_eq!(unique.len(), acknowledged.len(), "no id acknowledged twice");
    assert_eq!(unique.len(), 40 * 5);
    assert_eq!(stored, unique, "every acknowledged todo is stored under its id, and only those");
    service.stop().await;
}
both!(a_failing_commit_answers_500_and_every_acknowledged_todo_is_stored);

/// A database error in a handler answers 500 with the request's id and none of the database's
/// words (the table, the statement, the driver's message), which go to the log instead.
async fn a_database_error_answers_500_without_the_database_s_words(on: On) {
    let Some(service) = Service::start_on(on, "db-error").await else { return };
    service.db.execute("ALTER TABLE todos RENAME TO todos_moved").await;
    let reply = send(service.addr, "GET", "/users/ada/todos", &[("x-request-id", "broken-1")], b"").await;
    assert_eq!(reply.status, 500, "{reply:?}");
    assert_eq!(reply.body, r#"{"error":"internal error","request_id":"broken-1"}"#);
    service.stop().await;
}
both!(a_database_error_answers_500_without_the_database_s_words);

/// A context object whose destroy hook panics, touched after the handler by `touch_grenade`,
/// so that it is newer than the request's transaction and destroyed first.
#[context_proto(destroy = explode)]
#[derive(Debug)]
pub struct Grenade;

impl Grenade {
    async fn explode(&self) {
        panic!("the grenade went off");
    }
}

/// Middleware inside the request's scope: touches the grenade once the handler has answered.
async fn touch_grenade(State(app): State<App>, req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    app.get_object::<Grenade>().unwrap();
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_destroy_hook_in_another_object_leaves_the_next_request_working() {
    let service =
        Service::start_with("grenade", |app, routes| routes.layer(from_fn_with_state(app.clone(), touch_grenade)))
            .await;
    for round in 0..3 {
        // Fails after inserting: its transaction is open when the grenade goes off.
        let reply =
            send_json(service.addr, "POST", "/users/ada/todos/batch", r#"[{"title":"lost"},{"title":""}]"#).await;
        assert_eq!(reply.status, 400, "round {round}");
        let reply =
            send_json(service.addr, "POST", "/users/ada/todos", &format!(r#"{{"title":"kept {round}"}}"#)).await;
        assert_eq!(reply.status, 201, "round {round}: {reply:?}");
    }
    assert_eq!(service.committed_titles("ada").await, ["kept 0", "kept 1", "kept 2"]);
    assert_eq!(send(service.addr, "GET", "/users/ada/todos", &[], b"").await.status, 200);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_do_not_wait_for_a_writer() {
    use sqlx::Connection;
    let service = Service::start("reads").await;
    assert_eq!(send_json(service.addr, "POST", "/users/ada/todos", r#"{"title":"first"}"#).await.status, 201);
    // Another connection holds the write lock, and keeps it.
    let mut writer = sqlx::SqliteConnection::connect(&service.db.url).await.unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE; INSERT INTO todos (\"user\", title) VALUES ('ada', 'pending');")
        .execute(&mut writer)
        .await
        .unwrap();
    let started = Instant::now();
    let reply = send(service.addr, "GET", "/users/ada/todos", &[], b"").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.body.contains("first") && !reply.body.contains("pending"), "{}", reply.body);
    assert!(started.elapsed() < Duration::from_secs(2), "the read waited {:?} for the writer", started.elapsed());
    sqlx::raw_sql("COMMIT").execute(&mut writer).await.unwrap();
    service.stop().await;
}

#[tokio::test]
async fn the_configuration_file_is_read_and_environment_variables_override_it() {
    let db = std::env::temp_dir().join(format!("todos-test-env-{}.sqlite3", std::process::id()));
    let db_text = db.display().to_string();
    let name = "the_configuration_file_is_read_and_environment_variables_override_it";
    if !in_child(name, &[("TODOS_DB__PATH", &db_text), ("TODOS_DB__MAX_CONNECTIONS", "2")]) {
        return;
    }
    let app = todos::app().await.unwrap();
    let expected = std::path::PathBuf::from(std::env::var("TODOS_DB__PATH").unwrap()); // the parent's file
    assert_eq!(app.get_object::<Db>().unwrap().file(), Some(&*expected), "TODOS_DB__PATH wins over the file");
    let config = app.config();
    assert_eq!(config.get::<u32>("db.max_connections").unwrap(), 2);
    assert_eq!(config.get::<String>("http.addr").unwrap(), "127.0.0.1:7001", "from config/todos.toml");
    assert_eq!(config.origin("http.addr"), Some(format!("file {}", todos::config_file().display())));
    assert_eq!(config.origin("db.path").as_deref(), Some("env TODOS_DB__PATH"));
    app.shutdown().await.unwrap();
    tegu_test_support::remove_sqlite(&expected);
}

#[tokio::test]
async fn a_bad_setting_fails_the_start_naming_the_key_and_the_variable() {
    let name = "a_bad_setting_fails_the_start_naming_the_key_and_the_variable";
    if !in_child(name, &[("TODOS_DB__MAX_CONNECTIONS", "many")]) {
        return;
    }
    let e = todos::app().await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "config key db.max_connections of `todos::db::DbConfig`: invalid type: expected u32, found a string of 4 characters (from env TODOS_DB__MAX_CONNECTIONS)"
    );
}

#[tokio::test]
async fn a_database_that_cannot_be_opened_fails_the_start_naming_db() {
    let e = todos::builder().config_value("db.path", "/nonexistent-dir/todos.sqlite3").build().await.unwrap_err();
    assert!(
        e.to_string().starts_with(
            "construction of `todos::db::Db` (\"db\") failed: opening the database on data source `db` failed: "
        ),
        "{e}"
    );
}

/// A PostgreSQL server that cannot be reached fails the start, and the error does not carry
/// the URL's password.
#[tokio::test]
async fn an_unreachable_postgres_fails_the_start_without_its_password() {
    let e = todos::builder()
        .config_value("db.url", "postgres://todos:s3cret-pw@127.0.0.1:1/todos")
        .build()
        .await
        .unwrap_err();
    let message = e.to_string();
    assert!(message.contains("connecting to the database on data source `db` failed"), "{message}");
    assert!(!message.contains("s3cret-pw"), "{message}");
}

/// Knows only the users it was given.
#[derive(Debug)]
struct KnownUsers(&'static [&'static str]);

impl Users for KnownUsers {
    fn exists(&self, user: &str) -> bool {
        self.0.contains(&user)
    }
}

#[tokio::test]
async fn a_fake_user_directory_by_trait() {
    let users: Arc<dyn Users> = Arc::new(KnownUsers(&["ada"]));
    let service = Service::start_built(On::Sqlite, "fake-users", |b| b.override_provider::<dyn Users>(users), |_, r| r)
        .await
        .unwrap();
    let reply = send_json(service.addr, "POST", "/users/ada/todos", r#"{"title":"known"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let reply = send_json(service.addr, "POST", "/users/bob/todos", r#"{"title":"unknown"}"#).await;
    assert_eq!(reply.status, 404, "{reply:?}");
    assert!(reply.body.contains(r#""error":"no user \"bob\"""#), "{}", reply.body);
    assert!(service.committed_titles("bob").await.is_empty());
    service.stop().await;
}

#[tokio::test]
async fn the_service_alone_from_a_root_in_a_seeded_scope() {
    let db = fresh_db(On::Sqlite, "root").unwrap();
    // Only what TodoService reaches: the database, the repository, the users; no controller.
    let app = todos::builder().config_value("db.url", &db).root::<TodoService>().build().await.unwrap();
    assert!(matches!(app.get_object::<todos::todo::TodoController>(), Err(tegu_core::DiError::NotBuilt { .. })));
    // A router of an App built from roots serves the controllers they reach, and no other.
    let from_controller =
        todos::builder().config_value("db.url", &db).root::<todos::todo::TodoController>().build().await.unwrap();
    assert!(tegu_http::RouterBuilder::new(&from_controller).build().is_ok());
    from_controller.shutdown().await.unwrap();
    let service = app.get_object::<TodoService>().unwrap();
    // A scope given the request head the request tracer reads (no HTTP request here).
    let request = axum::http::Request::get("/").header("x-request-id", "seeded-1").body(()).unwrap();
    let head = tegu_http::RequestHead::from_request(&request);
    let listed = app.scope().with(head).unwrap().run(async { service.list("ada").await }).await.unwrap();
    assert!(listed.is_empty());
    let unknown =
        app.scope().with(tegu_http::RequestHead::from_request(&request)).unwrap().run(service.list("no one")).await;
    assert!(matches!(unknown, Err(todos::todo::TodoError::UnknownUser(_))), "{unknown:?}");
    app.shutdown().await.unwrap();
}

/// `#[transactional(nested)]` on `TodoService::create_all`: each batch of an import runs in a
/// savepoint of the request's transaction, so a bad batch is rolled back while the request
/// still succeeds and commits the others.
async fn an_import_keeps_the_good_batches_and_rolls_back_the_bad_one(on: On) {
    let Some(service) = Service::start_on(on, "import").await else { return };
    let body = r#"[[{"title":"a"},{"title":"b"}], [{"title":"lost"},{"title":" "}], [{"title":"c"}]]"#;
    let reply = send_json(service.addr, "POST", "/users/ada/todos/import", body).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let report: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    let saved: Vec<&str> = report["saved"].as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert_eq!(saved, ["a", "b", "c"]);
    assert_eq!(report["failed"], serde_json::json!([{"batch": 1, "error": "a title cannot be empty"}]));
    assert_eq!(service.committed_titles("ada").await, ["a", "b", "c"], "`lost` was rolled back to its savepoint");
    let stats = service.app.get_object::<todos::advice::TodoStats>().unwrap();
    service.stop().await; // drains the event handlers
    assert_eq!(stats.created(), 3, "no event for the todo rolled back to its savepoint");
}
both!(an_import_keeps_the_good_batches_and_rolls_back_the_bad_one);

/// `TodoCompleted` (an event): counted by `TodoStats` once the request that completed the todo
/// has committed, not when the request fails.
async fn completing_a_todo_is_counted_after_its_request_commits(on: On) {
    let Some(service) = Service::start_on(on, "stats").await else { return };
    let stats = || async { send(service.addr, "GET", "/stats", &[], b"").await.body };
    assert_eq!(stats().await, r#"{"created":0,"completed":0}"#);
    let reply = send_json(service.addr, "POST", "/users/ada/todos", r#"{"title":"t"}"#).await;
    let todo: Todo = serde_json::from_str(&reply.body).unwrap();
    let path = format!("/users/ada/todos/{}", todo.id);
    assert_eq!(send_json(service.addr, "PATCH", &path, r#"{"done":true}"#).await.status, 200);
    // Undone, then done again: two completions. Missing todos complete nothing.
    assert_eq!(send_json(service.addr, "PATCH", &path, r#"{"done":false}"#).await.status, 200);
    assert_eq!(send_json(service.addr, "PATCH", &path, r#"{"done":true}"#).await.status, 200);
    assert_eq!(send_json(service.addr, "PATCH", "/users/ada/todos/999", r#"{"done":true}"#).await.status, 404);
    // The handler runs on its own task after the response: wait for it (the App's ending
    // scopes and handlers), at most a few seconds.
    let deadline = Instant::now() + Duration::from_secs(5);
    while stats().await != r#"{"created":1,"completed":2}"# {
        assert!(Instant::now() < deadline, "stats: {}", stats().await);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    service.stop().await;
}
both!(completing_a_todo_is_counted_after_its_request_commits);

/// `x-tenant`: each tenant has its own todos. A todo of `acme` is not there for `globex`, nor
/// for a request that names no tenant (the tenant `default`), even by its id: not listed, not
/// found, not completed, not deleted (404).
async fn a_todo_of_one_tenant_is_invisible_to_another(on: On) {
    let Some(service) = Service::start_on(on, "tenants").await else { return };
    let addr = service.addr;
    let json = ("content-type", "application/json");
    let as_tenant = |tenant: &'static str| [json, ("x-tenant", tenant)];
    let reply = send(addr, "POST", "/users/ada/todos", &as_tenant("acme"), br#"{"title":"acme's"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let todo: Todo = serde_json::from_str(&reply.body).unwrap();
    let mine = format!("/users/ada/todos/{}", todo.id);
    let reply = send(addr, "POST", "/users/ada/todos", &[json], br#"{"title":"nobody's"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_eq!(service.db.tenants("ada").await, ["acme", "default"]);

    let list = async |headers: &[(&str, &str)]| -> Vec<String> {
        let reply = send(addr, "GET", "/users/ada/todos", headers, b"").await;
        assert_eq!(reply.status, 200, "{reply:?}");
        serde_json::from_str::<Vec<Todo>>(&reply.body).unwrap().into_iter().map(|t| t.title).collect()
    };
    assert_eq!(list(&as_tenant("acme")).await, ["acme's"]);
    assert_eq!(list(&[]).await, ["nobody's"], "no x-tenant: the tenant `default`");
    assert_eq!(list(&as_tenant("default")).await, ["nobody's"]);
    assert!(list(&as_tenant("globex")).await.is_empty());
    for (method, body) in [("GET", &b""[..]), ("PATCH", br#"{"done":true}"#), ("DELETE", b"")] {
        let reply = send(addr, method, &mine, &as_tenant("globex"), body).await;
        assert_eq!(reply.status, 404, "{method} as globex: {reply:?}");
        assert_eq!(send(addr, method, &mine, &[json], body).await.status, 404, "{method} as no tenant");
    }
    let reply = send(addr, "GET", &mine, &as_tenant("acme"), b"").await;
    assert_eq!(serde_json::from_str::<Todo>(&reply.body).unwrap(), todo, "untouched by the others");
    assert_eq!(send(addr, "DELETE", &mine, &as_tenant("acme"), b"").await.status, 204);
    assert_eq!(service.db.tenants("ada").await, ["default"]);
    service.stop().await;
}
both!(a_todo_of_one_tenant_is_invisible_to_another);

/// A tenant key that is none (a client forging a log field) is answered 400, naming the header,
/// not the value; the request reaches no handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_tenant_is_answered_400() {
    let service = Service::start("forged-tenant").await;
    let headers = [("content-type", "application/json"), ("x-tenant", "acme\" admin=true")];
    let reply = send(service.addr, "POST", "/users/ada/todos", &headers, br#"{"title":"t"}"#).await;
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(reply.body.starts_with("the tenant in header `x-tenant` is refused"), "{}", reply.body);
    assert!(!reply.body.contains("admin=true"), "{}", reply.body);
    assert!(service.committed_titles("ada").await.is_empty());
    service.stop().await;
}

/// `GET /stats`: the counts of every tenant, and with `x-tenant` that tenant's, counted by
/// `TodoStats`'s handlers in scopes seeded with the emitting request's lineage (its tenant).
async fn the_stats_count_per_tenant(on: On) {
    let Some(service) = Service::start_on(on, "tenant-stats").await else { return };
    let addr = service.addr;
    let json = ("content-type", "application/json");
    for (tenant, done) in [(Some("acme"), true), (Some("acme"), false), (Some("globex"), true), (None, true)] {
        let mut headers = vec![json];
        headers.extend(tenant.map(|tenant| ("x-tenant", tenant)));
        let reply = send(addr, "POST", "/users/ada/todos", &headers, br#"{"title":"t"}"#).await;
        assert_eq!(reply.status, 201, "{reply:?}");
        if done {
            let id = serde_json::from_str::<Todo>(&reply.body).unwrap().id;
            let path = format!("/users/ada/todos/{id}");
            assert_eq!(send(addr, "PATCH", &path, &headers, br#"{"done":true}"#).await.status, 200);
        }
    }
    let stats = async |tenant: Option<&str>| {
        let headers: Vec<_> = tenant.map(|tenant| ("x-tenant", tenant)).into_iter().collect();
        send(addr, "GET", "/stats", &headers, b"").await.body
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while stats(None).await != r#"{"created":4,"completed":3}"# {
        assert!(Instant::now() < deadline, "stats: {}", stats(None).await);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let tenant = async |key: &str| -> StatsBody { serde_json::from_str(&stats(Some(key)).await).unwrap() };
    let counts = |key: &str, created, completed| Some(TenantStats { key: key.to_owned(), created, completed });
    assert_eq!(tenant("acme").await.tenant, counts("acme", 2, 1));
    assert_eq!(tenant("globex").await.tenant, counts("globex", 1, 1));
    assert_eq!(tenant("default").await.tenant, counts("default", 1, 1), "the request that named none");
    assert_eq!(tenant("initech").await.tenant, counts("initech", 0, 0));
    assert_eq!(
        stats(Some("acme")).await,
        r#"{"created":4,"completed":3,"tenant":{"key":"acme","created":2,"completed":1}}"#
    );
    service.stop().await;
}
both!(the_stats_count_per_tenant);

/// A todos table made before tenants (no column `tenant`, nor `done_at`) gains the columns
/// when the service starts: its todos are the tenant `default`'s, served to requests that name
/// no tenant, as before.
async fn a_table_made_before_tenants_is_upgraded_its_todos_default_s(on: On) {
    let Some(url) = fresh_db(on, "upgrade") else { return };
    // The SQLite file made here, before the service opens it.
    let url = if on == On::Sqlite { format!("{url}?mode=rwc") } else { url };
    let old = match on {
        On::Sqlite => {
            "CREATE TABLE todos (id INTEGER PRIMARY KEY AUTOINCREMENT, \"user\" TEXT NOT NULL, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0);
             CREATE INDEX todos_by_user ON todos (\"user\", id);"
        }
        On::Postgres => {
            "CREATE TABLE todos (id BIGSERIAL PRIMARY KEY, \"user\" TEXT NOT NULL, title TEXT NOT NULL, done BOOLEAN NOT NULL DEFAULT FALSE);
             CREATE INDEX todos_by_user ON todos (\"user\", id);"
        }
    };
    let behind = Behind { url: url.clone() };
    behind.execute(old).await;
    behind.execute("INSERT INTO todos (\"user\", title) VALUES ('ada', 'from before')").await;
    let service = Service::start_at(url, |b| b, |_, r| r).await;
    assert_eq!(service.db.tenants("ada").await, ["default"]);
    let reply = send(service.addr, "GET", "/users/ada/todos", &[], b"").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let todos: Vec<Todo> = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(todos.iter().map(|t| t.title.as_str()).collect::<Vec<_>>(), ["from before"]);
    let reply = send(service.addr, "GET", "/users/ada/todos", &[("x-tenant", "acme")], b"").await;
    assert_eq!(reply.body, "[]");
    // `done_at` came too: completing it works.
    let path = format!("/users/ada/todos/{}", todos[0].id);
    let reply = send(service.addr, "PATCH", &path, &[("content-type", "application/json")], br#"{"done":true}"#).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    service.stop().await;
}
both!(a_table_made_before_tenants_is_upgraded_its_todos_default_s);

/// `TodoPurger` (a scheduled job), run by hand: deletes the todos done more than a day ago,
/// and only those.
async fn the_purge_job_deletes_todos_done_more_than_a_day_ago(on: On) {
    let Some(service) = Service::start_on(on, "purge").await else { return };
    for title in ["old done", "recent done", "old undone"] {
        let reply = send_json(service.addr, "POST", "/users/ada/todos", &format!(r#"{{"title":"{title}"}}"#)).await;
        assert_eq!(reply.status, 201);
    }
    let ids = service.committed_ids("ada").await;
    for id in &ids[..2] {
        let reply = send_json(service.addr, "PATCH", &format!("/users/ada/todos/{id}"), r#"{"done":true}"#).await;
        assert_eq!(reply.status, 200);
    }
    // Two days ago, behind the service's back.
    let two_days_ago = todos::db::unix_now() - 2 * 86400;
    let sql = format!("UPDATE todos SET done_at = {two_days_ago} WHERE id IN ({}, {})", ids[0], ids[2]);
    service.db.execute(&sql).await;
    service.app.run_schedule::<todos::advice::TodoPurger>("purge").await.unwrap();
    assert_eq!(service.committed_titles("ada").await, ["recent done", "old undone"]);
    service.stop().await;
}
both!(the_purge_job_deletes_todos_done_more_than_a_day_ago);

/// SQLite may end a transaction itself after an error (a full disk, an I/O error; here a
/// `RAISE(ROLLBACK)` trigger stands in for them). tegu-sqlx follows: it refuses the later
/// batches' savepoints (one would otherwise start a transaction of its own and commit it),
/// and the import, which answered as if it had succeeded, fails with nothing saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_sqlite_rolls_back_itself_saves_nothing_and_fails_the_request() {
    let service = Service::start("sqlite-abort").await;
    service
        .db
        .execute(
            "CREATE TRIGGER disk_full BEFORE INSERT ON todos WHEN NEW.title = 'disk full'
             BEGIN SELECT RAISE(ROLLBACK, 'database or disk is full'); END;",
        )
        .await;
    let body = r#"[[{"title":"a"}], [{"title":"disk full"}], [{"title":"c"}]]"#;
    let reply = send_json(service.addr, "POST", "/users/ada/todos/import", body).await;
    assert_eq!(reply.status, 500, "{reply:?}");
    // The database's words (its tables, its statements) stay in the log.
    assert!(!reply.body.contains("disk is full") && !reply.body.contains("transaction"), "{reply:?}");
    let committed = service.committed_titles("ada").await;
    assert!(committed.is_empty(), "half-committed: {committed:?}");
    // The connection went back with no transaction open: the next request works.
    let reply = send_json(service.addr, "POST", "/users/ada/todos", r#"{"title":"next"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_eq!(service.committed_titles("ada").await, ["next"]);
    service.stop().await;
}

/// Marking a done todo done again (a client's retry) changes nothing: not its `done_at`, not
/// the count of completions.
async fn marking_a_done_todo_done_again_changes_and_counts_nothing(on: On) {
    let Some(service) = Service::start_on(on, "done-twice").await else { return };
    let reply = send_json(service.addr, "POST", "/users/ada/todos", r#"{"title":"t"}"#).await;
    let todo: Todo = serde_json::from_str(&reply.body).unwrap();
    let path = format!("/users/ada/todos/{}", todo.id);
    assert_eq!(send_json(service.addr, "PATCH", &path, r#"{"done":true}"#).await.status, 200);
    // Long ago, behind the service's back: a retry must not make it recent again.
    service.db.execute(&format!("UPDATE todos SET done_at = 1000 WHERE id = {}", todo.id)).await;
    let reply = send_json(service.addr, "PATCH", &path, r#"{"done":true}"#).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(serde_json::from_str::<Todo>(&reply.body).unwrap().done);
    // Purged as done long ago: its done_at was left as it was.
    service.app.run_schedule::<todos::advice::TodoPurger>("purge").await.unwrap();
    assert!(service.committed_titles("ada").await.is_empty(), "done_at unchanged by the retry");
    let stats = service.app.get_object::<todos::advice::TodoStats>().unwrap();
    service.stop().await; // drains the event handlers
    assert_eq!(stats.completed(), 1, "counted once");
}
both!(marking_a_done_todo_done_again_changes_and_counts_nothing);

/// A request's background task whose first write comes after the response is fixed: there is
/// no request's transaction left to begin (no commit would follow), so `#[transactional]` runs
/// the write in a transaction of its own, committed when the method returns: stored, not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_first_made_by_a_background_task_after_the_response_commits_on_its_own() {
    let url = fresh_db(On::Sqlite, "late-write").unwrap();
    let app = todos::builder().config_value("db.url", &url).build().await.unwrap();
    let service = app.get_object::<TodoService>().unwrap();
    let request = axum::http::Request::post("/users/ada/todos").header("x-request-id", "late-1").body(()).unwrap();
    let (go, wait) = tokio::sync::oneshot::channel::<()>();
    let (written, answer) = tokio::sync::oneshot::channel();
    app.scope()
        .with(tegu_http::RequestHead::from_request(&request))
        .unwrap()
        .run(async move {
            tegu_core::spawn(async move {
                wait.await.ok();
                written.send(service.create("ada", "written late").await).ok();
            });
            "202 Accepted" // the handler answers before its task has written
        })
        .end_in_background()
        .await;
    go.send(()).unwrap();
    let todo = answer.await.unwrap().expect("the late write runs in a transaction of its own");
    app.shutdown().await.unwrap();
    assert_eq!(Behind { url }.committed("ada").await, [(todo.id, "written late".to_owned())]);
}

/// The listener takes the backlog the configuration gives (`http.backlog`), as far as the
/// kernel allows.
#[tokio::test]
async fn the_listener_takes_the_configured_backlog() {
    let db = fresh_db(On::Sqlite, "backlog").unwrap();
    let app = todos::builder()
        .config_value("db.url", &db)
        .config_value("http.addr", "127.0.0.1:0")
        .config_value("http.backlog", 2048)
        .build()
        .await
        .unwrap();
    let listener = app.get_object::<todos::HttpConfig>().unwrap().listen().await.unwrap();
    let (backlog, max) = tegu_test_support::listen_backlog(listener.local_addr().unwrap().port());
    assert_eq!(backlog, 2048.min(max));
    app.shutdown().await.unwrap();
}
