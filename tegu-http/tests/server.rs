//! tegu-http over a real socket: a raw HTTP/1.1 client against a server on an ephemeral loopback
//! port. Each test builds its own App, so its counters are its own.
#![allow(missing_docs, missing_debug_implementations)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::{Path, Query, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{Next, from_fn};
use axum::response::Response;
use axum::{Json, Router};
use tegu_core::{App, AsyncContextRef, ContextRef, context_proto, singleton_proto};
use tegu_http::{RequestHead, Server, http_controller, http_routes};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use http_client::send;
use tegu_test_support::http_client;

/// Per App: how many `Counted` context objects were built and destroyed, and whether the App
/// shut down.
#[singleton_proto(destroy = stop)]
pub struct Stats {
    created: AtomicUsize,
    destroyed: AtomicUsize,
    shut_down: AtomicBool,
    slow_finished: AtomicUsize,
}
impl Stats {
    async fn stop(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
    }
}

/// A context object every request below touches: counts its scope's life.
#[context_proto(init = born, destroy = die)]
pub struct Counted {
    #[inject]
    stats: Arc<Stats>,
}
impl Counted {
    async fn born(&self) {
        self.stats.created.fetch_add(1, Ordering::SeqCst);
    }
    async fn die(&self) {
        self.stats.destroyed.fetch_add(1, Ordering::SeqCst);
    }
}

/// Per request: the id it saw in the request head.
#[context_proto]
pub struct Tracer {
    #[inject]
    head: Arc<RequestHead>,
}

/// A context object whose construction panics.
#[context_proto]
pub struct Exploding {
    _boom: Boom,
}
pub struct Boom;
impl Default for Boom {
    fn default() -> Self {
        panic!("Exploding cannot be built")
    }
}

#[singleton_proto]
pub struct Reporter {
    #[inject]
    tracer: ContextRef<Tracer>,
    #[inject]
    counted: AsyncContextRef<Counted>,
    #[inject]
    exploding: ContextRef<Exploding>,
}

#[derive(serde::Deserialize, serde::Serialize)]
pub struct Item {
    name: String,
    qty: u32,
}

async fn tag_controller(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    res.headers_mut().insert("x-controller-mw", HeaderValue::from_static("echo"));
    res
}

async fn tag_method(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    res.headers_mut().insert("x-method-mw", HeaderValue::from_static("item"));
    res
}

#[http_controller(path = "/echo")]
#[middleware(from_fn(tag_controller))]
pub struct EchoController {
    #[inject]
    reporter: Arc<Reporter>,
}

#[http_routes]
impl EchoController {
    #[get("/items/{id}")]
    #[middleware(from_fn(tag_method))]
    async fn item(&self, Path(id): Path<u32>, Query(q): Query<HashMap<String, String>>) -> String {
        let mut q: Vec<_> = q.into_iter().collect();
        q.sort();
        format!("item {id} {q:?}")
    }

    #[post("/json")]
    async fn json(&self, Json(item): Json<Item>) -> Result<Json<Item>, (StatusCode, &'static str)> {
        if item.qty == 0 {
            return Err((StatusCode::UNPROCESSABLE_ENTITY, "qty must be positive"));
        }
        Ok(Json(Item { name: item.name.to_uppercase(), qty: item.qty * 2 }))
    }

    #[route("/items/{id}", method = "DELETE")]
    fn remove(&self, Path(id): Path<u32>) -> StatusCode {
        if id == 0 { StatusCode::NOT_FOUND } else { StatusCode::NO_CONTENT }
    }

    /// The request id as the tracer (a context object) saw it, before and after a yield.
    #[get("/whoami")]
    async fn whoami(&self, headers: HeaderMap) -> String {
        self.reporter.counted.get_async().await.unwrap();
        let before = self.reporter.tracer.get().head.id().to_string();
        tokio::time::sleep(Duration::from_millis(1)).await;
        let after = self.reporter.tracer.get().head.id().to_string();
        let sent = headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
        format!("{sent}|{before}|{after}")
    }

    /// The request id as a background task of the request sees it, through a tracer the
    /// request itself never touched.
    #[get("/spawned")]
    async fn spawned(&self) -> String {
        let reporter = Arc::clone(&self.reporter);
        tegu_core::spawn(async move { reporter.tracer.get().head.id().to_string() }).await.unwrap()
    }

    /// The matched path, as the request head's extensions hold it.
    #[get("/ext")]
    async fn ext(&self) -> String {
        let head = &self.reporter.tracer.get().head;
        let matched = head.extensions().get::<axum::extract::MatchedPath>().map(|m| m.as_str().to_owned());
        matched.unwrap_or_else(|| "none".into())
    }

    #[get("/panic")]
    async fn panic(&self) -> String {
        self.reporter.counted.get_async().await.unwrap();
        panic!("handler gave up")
    }

    #[get("/explode")]
    async fn explode(&self) -> String {
        self.reporter.counted.get_async().await.unwrap();
        self.reporter.exploding.get();
        "unreachable".into()
    }

    #[get("/slow")]
    async fn slow(&self) -> &'static str {
        self.reporter.counted.get_async().await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        self.reporter.counted.get_async().await.unwrap().stats.slow_finished.fetch_add(1, Ordering::SeqCst);
        "slow done"
    }
}

struct Running {
    addr: SocketAddr,
    app: App,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<Result<(), tegu_http::ServeError>>,
}

impl Running {
    fn stats(&self) -> Arc<Stats> {
        self.app.get_object::<Stats>().unwrap()
    }

    /// Waits until every `Counted` built so far is destroyed; returns how many.
    async fn all_destroyed(&self) -> usize {
        let stats = self.stats();
        for _ in 0..500 {
            let created = stats.created.load(Ordering::SeqCst);
            if created == stats.destroyed.load(Ordering::SeqCst) {
                return created;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "scopes not destroyed: {} created, {} destroyed",
            stats.created.load(Ordering::SeqCst),
            stats.destroyed.load(Ordering::SeqCst)
        );
    }
}

async fn start() -> Running {
    let app = App::builder().build().await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let router: Router = tegu_http::router(&app);
    let server = tokio::spawn(
        Server::new(app.clone(), router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .run(listener),
    );
    Running { addr, app, stop: Some(stop), server }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_extractors_and_middleware() {
    let server = start().await;
    let addr = server.addr;

    let reply = send(addr, "GET", "/echo/items/7?b=2&a=1", &[], b"").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, r#"item 7 [("a", "1"), ("b", "2")]"#);
    assert_eq!(reply.headers.get("x-method-mw").map(String::as_str), Some("item"));
    assert_eq!(reply.headers.get("x-controller-mw").map(String::as_str), Some("echo"));

    let reply = send(addr, "GET", "/echo/items/seven", &[], b"").await;
    assert_eq!(reply.status, 400, "a Path that does not parse is the extractor's 400: {reply:?}");

    let json = br#"{"name":"pen","qty":2}"#;
    let reply = send(addr, "POST", "/echo/json", &[("content-type", "application/json")], json).await;
    assert_eq!((reply.status, reply.body.as_str()), (200, r#"{"name":"PEN","qty":4}"#));
    let reply =
        send(addr, "POST", "/echo/json", &[("content-type", "application/json")], br#"{"name":"x","qty":0}"#).await;
    assert_eq!((reply.status, reply.body.as_str()), (422, "qty must be positive"));

    assert_eq!(send(addr, "DELETE", "/echo/items/3", &[], b"").await.status, 204);
    assert_eq!(send(addr, "DELETE", "/echo/items/0", &[], b"").await.status, 404);
    assert_eq!(send(addr, "GET", "/nowhere", &[], b"").await.status, 404);
    let reply = send(addr, "PUT", "/echo/items/3", &[], b"").await;
    assert_eq!(reply.status, 405);
    assert!(reply.headers.get("allow").is_some_and(|a| a.contains("GET") && a.contains("DELETE")), "{reply:?}");

    // The default body limit (axum's, 2 MiB) holds for controller routes.
    let big = format!(r#"{{"name":"{}","qty":1}}"#, "x".repeat(3 << 20));
    let reply = send(addr, "POST", "/echo/json", &[("content-type", "application/json")], big.as_bytes()).await;
    assert_eq!(reply.status, 413);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_requests_each_see_their_own_context() {
    let server = start().await;
    let addr = server.addr;
    let replies: Vec<_> = (0..1000)
        .map(|i| {
            tokio::spawn(async move {
                let id = format!("req-{i}");
                let reply = send(addr, "GET", "/echo/whoami", &[("x-request-id", &id)], b"").await;
                (id, reply)
            })
        })
        .collect();
    let mut mixed = Vec::new();
    for task in replies {
        let (id, reply) = task.await.unwrap();
        assert_eq!(reply.status, 200);
        if reply.body != format!("{id}|{id}|{id}") {
            mixed.push((id, reply.body));
        }
    }
    assert!(mixed.is_empty(), "requests saw another request's context: {mixed:?}");
    assert_eq!(server.all_destroyed().await, 1000);

    // A task the request spawns sees the same request.
    let reply = send(addr, "GET", "/echo/spawned", &[("x-request-id", "bg-7")], b"").await;
    assert_eq!((reply.status, reply.body.as_str()), (200, "bg-7"));

    // Without the header, each request gets a fresh id.
    let a = send(addr, "GET", "/echo/whoami", &[], b"").await.body;
    let b = send(addr, "GET", "/echo/whoami", &[], b"").await.body;
    assert!(a.starts_with("-|") && b.starts_with("-|") && a != b, "{a} {b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_answers_500_destroys_the_scope_and_the_server_goes_on() {
    let server = start().await;
    let addr = server.addr;
    assert_eq!(send(addr, "GET", "/echo/panic", &[], b"").await.status, 500);
    assert_eq!(send(addr, "GET", "/echo/explode", &[], b"").await.status, 500);
    let reply = send(addr, "GET", "/echo/items/1", &[], b"").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(server.all_destroyed().await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_mid_request_still_gets_its_scope_destroyed() {
    let server = start().await;
    let stats = server.stats();
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(b"GET /echo/slow HTTP/1.1\r\nhost: test\r\n\r\n").await.unwrap();
    while stats.created.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(stream);
    assert_eq!(server.all_destroyed().await, 1);
    assert_eq!(stats.slow_finished.load(Ordering::SeqCst), 0, "the handler was cancelled, not run to its end");
    // And the server still serves.
    assert_eq!(send(server.addr, "GET", "/echo/items/2", &[], b"").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_drains_a_slow_request_then_shuts_the_app_down() {
    let mut server = start().await;
    let stats = server.stats();
    let addr = server.addr;
    let slow = tokio::spawn(async move { send(addr, "GET", "/echo/slow", &[], b"").await });
    while stats.created.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.stop.take().unwrap().send(()).unwrap();
    let reply = slow.await.unwrap();
    assert_eq!((reply.status, reply.body.as_str()), (200, "slow done"), "the in-flight request was drained");
    tokio::time::timeout(Duration::from_secs(5), &mut server.server).await.unwrap().unwrap().unwrap();
    assert!(stats.shut_down.load(Ordering::SeqCst), "app.shutdown() ran after the drain");
    assert_eq!(stats.destroyed.load(Ordering::SeqCst), 1);
    assert!(TcpStream::connect(addr).await.is_err(), "no longer accepting");
}

#[tokio::test]
async fn request_head_outside_a_request_names_the_layer() {
    let app = App::builder().build().await.unwrap();
    let err = app.run_in_context(async { app.get_object::<RequestHead>().map(|_| ()) }).await.unwrap_err();
    assert!(err.to_string().contains("tegu_http::ContextLayer"), "{err}");
}

async fn in_scope_header(req: Request, next: Next) -> Response {
    let in_scope = tegu_core::scope::in_scope();
    let mut res = next.run(req).await;
    res.headers_mut().insert("x-in-scope", HeaderValue::from_static(if in_scope { "yes" } else { "no" }));
    res
}

async fn tag_by_code(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    res.headers_mut().insert("x-by-code", HeaderValue::from_static("echo"));
    res
}

#[tokio::test]
async fn layers_by_code_wrap_one_controller_or_all_inside_the_scope() {
    use tower::ServiceExt;
    let app = App::builder().build().await.unwrap();
    let router = tegu_http::RouterBuilder::new(&app)
        .layer_for::<EchoController>(from_fn(tag_by_code))
        .layer(from_fn(in_scope_header))
        .build()
        .unwrap();
    let request = axum::http::Request::get("/echo/items/1").body(axum::body::Body::empty()).unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers().get("x-by-code").unwrap(), "echo");
    assert_eq!(response.headers().get("x-in-scope").unwrap(), "yes");
}

#[tokio::test]
async fn request_extensions_are_captured_only_when_asked() {
    use tower::ServiceExt;
    let app = App::builder().build().await.unwrap();
    for (capture, expected) in [(false, "none"), (true, "/echo/ext")] {
        let router = tegu_http::RouterBuilder::new(&app).capture_extensions(capture).build().unwrap();
        let request = axum::http::Request::get("/echo/ext").body(axum::body::Body::empty()).unwrap();
        let response = router.oneshot(request).await.unwrap();
        let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
        assert_eq!(body, expected, "capture_extensions({capture})");
    }
}

/// The backlog of the socket listening on `port`, and what the kernel grants of `asked`.
fn backlog_of(port: u16, asked: u32) -> (u32, u32) {
    let (backlog, max) = tegu_test_support::listen_backlog(port);
    (backlog, asked.min(max))
}

/// `serve` listens with a backlog of 1024 (std's and tokio's `bind` ask for 128, which a burst
/// of a few hundred connects overflows); `listen` binds with the one given.
#[tokio::test]
async fn serve_listens_with_a_production_backlog_and_listen_with_any() {
    assert_eq!(tegu_http::DEFAULT_BACKLOG, 1024);
    let free = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let app = App::builder().build().await.unwrap();
    let served = tokio::spawn(tegu_http::serve(app, free));
    let mut backlog = None;
    for _ in 0..200 {
        if TcpStream::connect(free).await.is_ok() {
            backlog = Some(backlog_of(free.port(), 1024));
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    served.abort();
    let (backlog, granted) = backlog.expect("serving");
    assert_eq!(backlog, granted);

    let listener = tegu_http::listen("127.0.0.1:0", 300).await.unwrap();
    let (backlog, granted) = backlog_of(listener.local_addr().unwrap().port(), 300);
    assert_eq!(backlog, granted);
    let taken = listener.local_addr().unwrap();
    let error = tegu_http::listen(taken, 300).await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
}
