//! The todo service over a real socket, its database checked behind its back.

use std::net::SocketAddr;
use std::path::PathBuf;

use todos::todo::Todo;
use todos::{Config, DbPath};

#[path = "../../../tests/support/http_client.rs"]
mod http_client;
use http_client::{send, send_json};

struct Service {
    addr: SocketAddr,
    db: PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), di_http::ServeError>>,
}

impl Service {
    async fn start(name: &str) -> Service {
        let db = std::env::temp_dir().join(format!("todos-test-{name}-{}.sqlite3", std::process::id()));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        let app = todos::app(Config { db_path: DbPath(db.display().to_string()) }).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            di_http::Server::new(app.clone(), di_http::router(&app))
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .run(listener),
        );
        Service { addr, db, stop, server }
    }

    /// Titles of `user` as a separate connection sees them: only committed rows.
    fn committed_titles(&self, user: &str) -> Vec<String> {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        let mut stmt = conn.prepare("SELECT title FROM todos WHERE user = ?1 ORDER BY id").unwrap();
        stmt.query_map([user], |row| row.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_request_commits_its_transaction() {
    let service = Service::start("commit").await;
    let reply = send_json(service.addr, "POST", "/users/ada/todos", r#"{"title":"write the docs"}"#).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let todo: Todo = serde_json::from_str(&reply.body).unwrap();
    assert_eq!((todo.title.as_str(), todo.done), ("write the docs", false));
    assert_eq!(service.committed_titles("ada"), ["write the docs"], "committed before the response was sent");

    let reply = send_json(service.addr, "PATCH", &format!("/users/ada/todos/{}", todo.id), r#"{"done":true}"#).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let reply = send(service.addr, "GET", "/users/ada/todos", &[], b"").await;
    let todos: Vec<Todo> = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(todos, [Todo { id: todo.id, title: "write the docs".into(), done: true }]);
    // Users do not see each other's todos.
    assert_eq!(send(service.addr, "GET", "/users/bob/todos", &[], b"").await.body, "[]");
    assert_eq!(send(service.addr, "GET", &format!("/users/bob/todos/{}", todo.id), &[], b"").await.status, 404);
    assert_eq!(send(service.addr, "DELETE", &format!("/users/ada/todos/{}", todo.id), &[], b"").await.status, 204);
    assert!(service.committed_titles("ada").is_empty());
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_rolls_its_transaction_back() {
    let service = Service::start("rollback").await;
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
    assert_eq!(service.committed_titles("ada"), ["kept"], "the inserted `lost` was rolled back");

    let reply = send_json(service.addr, "POST", "/users/ada/todos/batch", r#"[{"title":"a"},{"title":"b"}]"#).await;
    assert_eq!(reply.status, 201);
    assert_eq!(service.committed_titles("ada"), ["kept", "a", "b"]);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_each_get_their_own_unit_of_work() {
    let service = Service::start("concurrent").await;
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
    let titles = service.committed_titles("many");
    assert_eq!(titles.len(), 33, "{titles:?}");
    assert!(titles.iter().all(|t| t.starts_with("good")), "{titles:?}");
    assert_eq!(send(addr, "GET", "/health", &[], b"").await.body, "ok");
    service.stop().await;
}
