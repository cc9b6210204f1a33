//! Operating a server: the health probes, the drain delay, HTTP/2 with prior knowledge served in
//! scopes exactly as HTTP/1.1 is, gRPC's `grpc-status` deciding success, a hosted service's
//! failure stopping the server, and a silent connection closed at the header read timeout.

#![allow(missing_docs, missing_debug_implementations)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body_util::BodyExt;
use tegu_core::{
    App, ContextRef, ProtoDef, context_proto,
    events::EventBus,
    futures::UnitFuture,
    handlers,
    health::HealthCheck,
    hosted::{HostedService, Stop},
    singleton_proto,
};
use tegu_http::{RequestHead, Server};
use tegu_test_support::eventually;
use tegu_test_support::http_client::send;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

tegu_test_support::journal_proto!();

/// The request's unit of work: says in its completion and destroy hooks how the request went.
#[context_proto(complete = commit, destroy = close)]
pub struct Order {
    #[inject]
    head: Arc<RequestHead>,
    #[inject]
    journal: Arc<Journal>,
}

impl Order {
    fn line(&self, stage: &str) -> String {
        let head = &self.head;
        format!(
            "{stage} {} {:?} succeeded={} grpc={:?}",
            head.id(),
            head.version(),
            head.succeeded(),
            head.grpc_status()
        )
    }

    async fn commit(&self) {
        self.journal.push(self.line("commit"));
    }

    async fn close(&self) {
        self.journal.push(self.line("destroy"));
    }
}

/// An event the routes emit; counted by [`Shipping`].
pub struct Placed;

#[singleton_proto]
#[derive(Default)]
pub struct Shipping {
    placed: AtomicUsize,
}

#[handlers]
impl Shipping {
    #[event_handler]
    async fn on_placed(&self, _: &Placed) {
        self.placed.fetch_add(1, Ordering::SeqCst);
    }
}

/// A health check the tests turn off.
#[singleton_proto(name = "warehouse", provides(dyn HealthCheck))]
#[derive(Default)]
pub struct Warehouse {
    down: AtomicBool,
}

impl HealthCheck for Warehouse {
    fn check(self: Arc<Self>) -> UnitFuture {
        Box::pin(async move {
            if self.down.load(Ordering::SeqCst) { Err("warehouse.internal:5432 refused".into()) } else { Ok(()) }
        })
    }
}

#[singleton_proto]
pub struct Orders {
    #[inject]
    order: ContextRef<Order>,
    #[inject]
    events: Arc<EventBus>,
}

#[tegu_http::http_controller(path = "/orders")]
pub struct OrderController {
    #[inject]
    orders: Arc<Orders>,
}

#[tegu_http::http_routes]
impl OrderController {
    #[get("/place")]
    async fn place(&self) -> &'static str {
        drop(self.orders.order.get());
        self.orders.events.emit(Placed);
        "placed"
    }

    /// What a failed gRPC call answers: HTTP 200, the failure in `grpc-status` ("trailers-only").
    #[get("/grpc-fail")]
    async fn grpc_fail(&self) -> Response {
        drop(self.orders.order.get());
        self.orders.events.emit(Placed);
        Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", "13")
            .body(Body::empty())
            .unwrap()
    }
}

struct Running {
    addr: SocketAddr,
    app: App,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), tegu_http::ServeError>>,
}

async fn start(server: impl FnOnce(Server) -> Server) -> Running {
    let app = App::builder().health_cache(Duration::ZERO).build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let configured = server(Server::new(app.clone(), tegu_http::router(&app))).with_graceful_shutdown(async move {
        stopped.await.ok();
    });
    let server = tokio::spawn(configured.run(listener));
    Running { addr, app, stop, server }
}

impl Running {
    fn journal(&self) -> Arc<Journal> {
        self.app.get_object::<Journal>().unwrap()
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap().unwrap();
    }
}

/// A request over HTTP/2 with prior knowledge (h2c): status, headers and body.
async fn h2_get(addr: SocketAddr, path: &str, request_id: &str) -> (http::StatusCode, http::HeaderMap, String) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let request = http::Request::get(format!("http://{addr}{path}"))
        .header("x-request-id", request_id)
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_json_and_readiness_follows_the_checks_while_liveness_does_not() {
    let server = start(|s| s).await;
    let live = send(server.addr, "GET", "/health/live", &[], b"").await;
    assert_eq!(live.status, 200);
    assert_eq!(live.header("content-type"), Some("application/json"));
    assert_eq!(live.body, r#"{"state":"serving","status":"up"}"#);
    let ready = send(server.addr, "GET", "/health/ready", &[], b"").await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    let json: serde_json::Value = serde_json::from_str(&ready.body).unwrap();
    assert_eq!(json["status"], "up");
    assert_eq!(json["checks"][0]["name"], "warehouse");
    assert_eq!(json["checks"][0]["status"], "up");
    assert!(json["checks"][0]["took_ms"].is_number());

    server.app.get_object::<Warehouse>().unwrap().down.store(true, Ordering::SeqCst);
    let ready = send(server.addr, "GET", "/health/ready", &[], b"").await;
    assert_eq!(ready.status, 503, "{}", ready.body);
    let json: serde_json::Value = serde_json::from_str(&ready.body).unwrap();
    assert_eq!((json["status"].as_str(), json["checks"][0]["status"].as_str()), (Some("down"), Some("down")));
    assert!(!ready.body.contains("5432"), "a check's error is never sent: {}", ready.body);
    assert_eq!(send(server.addr, "GET", "/health/live", &[], b"").await.status, 200, "liveness runs no check");
    // The probes open no scope: no request object was made.
    assert!(server.journal().lines().is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_paths_are_configurable_and_can_be_left_to_the_router() {
    let server = start(|s| s.health_paths("/livez", "/readyz")).await;
    assert_eq!(send(server.addr, "GET", "/livez", &[], b"").await.status, 200);
    assert_eq!(send(server.addr, "GET", "/readyz", &[], b"").await.status, 200);
    assert_eq!(send(server.addr, "GET", "/health/live", &[], b"").await.status, 404);
    server.stop().await;
    let server = start(Server::without_health_probes).await;
    assert_eq!(send(server.addr, "GET", "/health/ready", &[], b"").await.status, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_the_drain_delay_readiness_is_503_while_requests_are_still_served() {
    let server = start(|s| s.drain_delay(Duration::from_millis(800))).await;
    let (addr, journal) = (server.addr, server.journal());
    server.stop.send(()).unwrap();
    // The signal is seen at once: readiness turns, the listener still accepts.
    let ready = loop {
        let ready = send(addr, "GET", "/health/ready", &[], b"").await;
        if ready.status == 503 {
            break ready;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(ready.body.contains(r#""state":"stopping""#), "{}", ready.body);
    let live = send(addr, "GET", "/health/live", &[], b"").await;
    assert_eq!((live.status, live.body.as_str()), (200, r#"{"state":"stopping","status":"up"}"#));
    let placed = send(addr, "GET", "/orders/place", &[("x-request-id", "late")], b"").await;
    assert_eq!((placed.status, placed.body.as_str()), (200, "placed"));
    journal.eventually(|l| l.iter().any(|l| l.starts_with("destroy late"))).await;
    server.server.await.unwrap().unwrap();
    assert!(TcpStream::connect(addr).await.is_err(), "the listener is closed after the delay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2c_request_is_served_in_a_scope_exactly_as_http1_is() {
    let server = start(|s| s).await;
    let journal = server.journal();
    let (status, headers, body) = h2_get(server.addr, "/orders/place", "h2-req").await;
    assert_eq!((status, body.as_str()), (http::StatusCode::OK, "placed"));
    assert!(headers.get("x-request-id").is_none_or(|id| id == "h2-req"), "{headers:?}");
    let lines = journal.eventually(|l| l.iter().any(|l| l.starts_with("destroy h2-req"))).await;
    assert!(lines.contains(&"commit h2-req HTTP/2.0 succeeded=true grpc=None".to_owned()), "{lines:?}");
    assert!(lines.contains(&"destroy h2-req HTTP/2.0 succeeded=true grpc=None".to_owned()), "{lines:?}");
    let shipping = server.app.get_object::<Shipping>().unwrap();
    eventually(async || (shipping.placed.load(Ordering::SeqCst) == 1).then_some(())).await;

    // The same over HTTP/1.1.
    let reply = send(server.addr, "GET", "/orders/place", &[("x-request-id", "h1-req")], b"").await;
    assert_eq!(reply.body, "placed");
    let lines = journal.eventually(|l| l.iter().any(|l| l.starts_with("destroy h1-req"))).await;
    assert!(lines.contains(&"commit h1-req HTTP/1.1 succeeded=true grpc=None".to_owned()), "{lines:?}");
    // The probes answer over HTTP/2 too.
    let (status, _, body) = h2_get(server.addr, "/health/ready", "probe").await;
    assert_eq!(status, http::StatusCode::OK, "{body}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_error_status_fails_the_request_and_drops_its_events() {
    let server = start(|s| s).await;
    let journal = server.journal();
    let (status, headers, _) = h2_get(server.addr, "/orders/grpc-fail", "grpc-13").await;
    assert_eq!(status, http::StatusCode::OK);
    assert_eq!(headers["grpc-status"], "13");
    let lines = journal.eventually(|l| l.iter().any(|l| l.starts_with("destroy grpc-13"))).await;
    assert!(lines.contains(&"commit grpc-13 HTTP/2.0 succeeded=false grpc=Some(13)".to_owned()), "{lines:?}");
    // Its event was dropped; a successful request's is handled.
    let (_, _, body) = h2_get(server.addr, "/orders/place", "after").await;
    assert_eq!(body, "placed");
    let shipping = server.app.get_object::<Shipping>().unwrap();
    eventually(async || (shipping.placed.load(Ordering::SeqCst) == 1).then_some(())).await;
    // The server's stop shuts the App down, which waits for every handler still to run.
    server.stop().await;
    assert_eq!(shipping.placed.load(Ordering::SeqCst), 1, "the failed call's event was dispatched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_at_the_header_read_timeout() {
    let server = start(|s| s.header_read_timeout(Duration::from_millis(300))).await;
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut seen))
        .await
        .expect("closed, not held open by a client that never says which protocol")
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(250), "closed by the timeout, not at once");
    server.stop().await;
}

/// A hosted service that fails once started.
struct Doomed;

impl HostedService for Doomed {
    fn run(self: Arc<Self>, _: Stop) -> UnitFuture {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err("the broker closed the subscription".into())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_service_failure_shuts_the_server_down_and_is_returned() {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Doomed>(|_| Ok(Doomed)).provides::<Doomed, dyn HostedService>(|d| d))
        .build()
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let served = Server::new(app.clone(), tegu_http::router(&app)).with_graceful_shutdown(std::future::pending());
    let result = tokio::time::timeout(Duration::from_secs(10), served.run(listener)).await.expect("the server stopped");
    let error = result.unwrap_err();
    assert!(matches!(error, tegu_http::ServeError::Hosted(_)), "{error}");
    let message = error.to_string();
    assert!(message.contains("Doomed") && message.contains("the broker closed the subscription"), "{message}");
    assert!(!app.is_live());
}
