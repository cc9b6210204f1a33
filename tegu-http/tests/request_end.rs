//! The end of a request over a real socket: completion hooks that can still change the answer,
//! destroy hooks inside the request's scope and isolated from each other, background work
//! after the response, header timeouts, and a shutdown that keeps its deadline.
#![allow(missing_docs, missing_debug_implementations)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::extract::Query;
use serde::Deserialize;
use tegu_core::{App, ContextRef, context_proto, singleton_proto};
use tegu_http::{RequestHead, ServeError, Server, http_controller, http_routes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use http_client::send;
use tegu_test_support::http_client;

tegu_test_support::journal_proto!();

/// Per request: the request id, read from the head.
#[context_proto]
pub struct Tracer {
    #[inject]
    head: Arc<RequestHead>,
}

/// A singleton logging through the current request's tracer: what tegg's destroy hooks do.
#[singleton_proto]
pub struct Logger {
    #[inject]
    tracer: ContextRef<Tracer>,
    #[inject]
    journal: Arc<Journal>,
}

impl Logger {
    fn log(&self, what: &str) {
        let id = self.tracer.try_get().map_or_else(|e| format!("<{e}>"), |t| t.head.id().to_string());
        self.journal.push(format!("{id}: {what}"));
    }
}

/// Its destroy hook logs through the `Logger`, so it needs the request's scope.
#[context_proto(destroy = testify)]
pub struct Witness {
    #[inject]
    logger: Arc<Logger>,
}

impl Witness {
    async fn testify(&self) {
        self.logger.log("witness destroyed");
    }
}

/// Its destroy hook panics.
#[context_proto(destroy = explode)]
pub struct Grenade;

impl Grenade {
    async fn explode(&self) {
        panic!("the grenade went off")
    }
}

/// A unit of work: commits in its completion hook (failing as the request asks), logs what
/// status its destroy hook sees, and whether the request's background job had finished.
#[context_proto(complete = commit, destroy = close)]
pub struct Ledger {
    #[inject]
    head: Arc<RequestHead>,
    #[inject]
    logger: Arc<Logger>,
    job_done: AtomicBool,
}

impl Ledger {
    async fn commit(&self) -> Result<(), tegu_core::error::BoxError> {
        match self.head.headers().get("x-commit").map(|v| v.to_str().unwrap()) {
            Some("fail") => Err("disk full".into()),
            Some("busy") => Err(Box::new(tegu_core::error::Busy("the pool timed out".into()))),
            Some("panic") => panic!("the ledger panicked"),
            Some("slow") => {
                self.logger.log("commit started");
                tokio::time::sleep(Duration::from_secs(20)).await;
                Ok(())
            }
            _ => {
                self.logger.log(&format!("committed at status {:?}", self.head.response_status()));
                Ok(())
            }
        }
    }
    async fn close(&self) {
        let (status, job) = (self.head.response_status().map(|s| s.as_u16()), self.job_done.load(Ordering::SeqCst));
        self.logger.log(&format!("ledger closed at status {status:?}, job done: {job}"));
    }
}

/// Touches the context objects a query names, in that order.
#[singleton_proto]
pub struct Touch {
    #[inject]
    witness: ContextRef<Witness>,
    #[inject]
    grenade: ContextRef<Grenade>,
    #[inject]
    ledger: ContextRef<Ledger>,
}

#[derive(Deserialize)]
pub struct Objects {
    touch: String,
}

#[http_controller(path = "/end")]
pub struct EndController {
    #[inject]
    touch: Arc<Touch>,
}

#[http_routes]
impl EndController {
    #[get("/work")]
    async fn work(&self, Query(objects): Query<Objects>) -> &'static str {
        for name in objects.touch.split(',') {
            match name {
                "witness" => drop(self.touch.witness.get()),
                "grenade" => drop(self.touch.grenade.get()),
                "ledger" => drop(self.touch.ledger.get()),
                other => panic!("no object {other}"),
            }
        }
        "worked"
    }

    /// Answers at once; its background job takes 1.5 s and marks the ledger when done.
    #[get("/background")]
    async fn background(&self) -> &'static str {
        let ledger = self.touch.ledger.get();
        tegu_core::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            ledger.job_done.store(true, Ordering::SeqCst);
        });
        "accepted"
    }

    #[get("/slow")]
    async fn slow(&self) -> &'static str {
        self.touch.witness.get().logger.log("slow started");
        tokio::time::sleep(Duration::from_secs(20)).await;
        "too late"
    }
}

struct Running {
    addr: SocketAddr,
    app: App,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    force: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl Running {
    fn journal(&self) -> Arc<Journal> {
        self.app.get_object::<Journal>().unwrap()
    }

    /// Signals the shutdown; returns how long `run` took to return, and what it returned.
    async fn shut_down(&mut self) -> (Duration, Result<(), ServeError>) {
        let started = Instant::now();
        self.stop.take().unwrap().send(()).unwrap();
        let result = tokio::time::timeout(Duration::from_secs(15), &mut self.server).await;
        (started.elapsed(), result.expect("run returned").unwrap())
    }
}

async fn start(configure: impl FnOnce(Server) -> Server) -> Running {
    let app = App::builder().build().await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (force, forced) = tokio::sync::oneshot::channel::<()>();
    let server = Server::new(app.clone(), tegu_http::router(&app))
        .with_graceful_shutdown(async {
            let _ = stopped.await;
        })
        .with_forced_shutdown(async {
            if forced.await.is_err() {
                std::future::pending::<()>().await;
            }
        });
    let server = tokio::spawn(configure(server).run(listener));
    Running { addr, app, stop: Some(stop), force: Some(force), server }
}

fn with_id(id: &str) -> [(&str, &str); 1] {
    [("x-request-id", id)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroy_hook_logs_through_the_requests_context() {
    let server = start(|s| s).await;
    let reply = send(server.addr, "GET", "/end/work?touch=witness", &with_id("req-7"), b"").await;
    assert_eq!(reply.status, 200);
    let lines = server.journal().eventually(|l| !l.is_empty()).await;
    assert_eq!(lines, ["req-7: witness destroyed"], "the destroy hook saw the request's tracer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_destroy_hook_between_two_others_harms_neither_nor_the_answer() {
    let server = start(|s| s).await;
    let journal = server.journal();
    for round in 0..3 {
        let id = format!("round-{round}");
        let reply = send(server.addr, "GET", "/end/work?touch=ledger,grenade,witness", &with_id(&id), b"").await;
        assert_eq!((reply.status, reply.body.as_str()), (200, "worked"), "round {round}");
        let lines = journal.eventually(|l| l.iter().filter(|l| l.starts_with(&id)).count() == 3).await;
        let mine: Vec<&String> = lines.iter().filter(|l| l.starts_with(&id)).collect();
        assert_eq!(
            mine,
            [
                &format!("{id}: committed at status Some(200)"),
                &format!("{id}: witness destroyed"),
                &format!("{id}: ledger closed at status Some(200), job done: false"),
            ],
            "the witness (newer) and the ledger (older) were destroyed around the grenade"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_completion_hook_answers_500_and_destroy_hooks_see_it() {
    let server = start(|s| s).await;
    let journal = server.journal();
    for (how, id) in [("fail", "commit-fails"), ("panic", "commit-panics")] {
        let headers = [("x-request-id", id), ("x-commit", how)];
        let reply = send(server.addr, "GET", "/end/work?touch=ledger", &headers, b"").await;
        assert_eq!(reply.status, 500, "{how}: {reply:?}");
        assert_eq!(reply.body, "", "the handler's answer was replaced");
        let lines = journal.eventually(|l| l.iter().any(|l| l.starts_with(id))).await;
        assert!(lines.contains(&format!("{id}: ledger closed at status Some(500), job done: false")), "{lines:?}");
    }
    // The server goes on.
    let reply = send(server.addr, "GET", "/end/work?touch=ledger", &with_id("after"), b"").await;
    assert_eq!(reply.status, 200);
}

/// A completion hook that found a resource busy (`tegu_core::error::Busy`, a pool's acquire timeout:
/// tegu-tx's `TxError::Busy` carries it) answers 503 with `Retry-After`, as the guide says of a
/// busy database, not 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_hook_that_found_the_database_busy_answers_503() {
    let server = start(|s| s).await;
    let headers = [("x-request-id", "commit-busy"), ("x-commit", "busy")];
    let reply = send(server.addr, "GET", "/end/work?touch=ledger", &headers, b"").await;
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.header("retry-after"), Some("1"), "{reply:?}");
    let lines = server.journal().eventually(|l| l.iter().any(|l| l.starts_with("commit-busy"))).await;
    assert!(lines.contains(&"commit-busy: ledger closed at status Some(503), job done: false".to_owned()), "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_task_does_not_delay_the_response_and_the_scope_waits_for_it() {
    let server = start(|s| s).await;
    let started = Instant::now();
    let reply = send(server.addr, "GET", "/end/background", &with_id("bg"), b"").await;
    let answered = started.elapsed();
    assert_eq!((reply.status, reply.body.as_str()), (200, "accepted"));
    assert!(answered < Duration::from_millis(1000), "answered after {answered:?}: the 1.5 s task held the response");
    let lines = server.journal().eventually(|l| l.iter().any(|l| l.contains("ledger closed"))).await;
    assert!(lines.contains(&"bg: ledger closed at status Some(200), job done: true".to_owned()), "{lines:?}");
    assert!(started.elapsed() >= Duration::from_millis(1500));
}

/// Reads until the server closes the connection; `Err` if it has not within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Result<Vec<u8>, ()> {
    let mut seen = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut seen)).await.map_err(drop)?.map_err(drop)?;
    Ok(seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_head_and_an_idle_keep_alive_connection_are_closed_after_the_header_timeout() {
    let server = start(|s| s.header_read_timeout(Duration::from_millis(300))).await;
    let mut half = TcpStream::connect(server.addr).await.unwrap();
    half.write_all(b"GET /end/work?touch=witness HTTP/1.1\r\nhost: te").await.unwrap();
    let started = Instant::now();
    closed_within(&mut half, Duration::from_secs(5)).await.expect("closed, not held open");
    assert!(started.elapsed() >= Duration::from_millis(250), "closed by the timeout, not at once");

    // A keep-alive connection that answered one request and then idles.
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    let started = Instant::now();
    idle.write_all(b"GET /end/work?touch=witness HTTP/1.1\r\nhost: test\r\n\r\n").await.unwrap();
    let reply = closed_within(&mut idle, Duration::from_secs(5)).await.expect("closed after idling");
    assert!(String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 200"), "answered first");
    assert!(started.elapsed() >= Duration::from_millis(250), "kept open while idle, up to the timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_a_half_sent_head_and_a_20_s_request_keeps_its_deadline() {
    let mut server = start(|s| s.drain_connections_timeout(Duration::from_secs(1))).await;
    let journal = server.journal();
    let mut half = TcpStream::connect(server.addr).await.unwrap();
    half.write_all(b"GET /end/work HTTP/1.1\r\nhost: te").await.unwrap();
    let addr = server.addr;
    let slow = tokio::spawn(async move {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET /end/slow HTTP/1.1\r\nhost: test\r\nx-request-id: slow\r\n\r\n").await.unwrap();
        let mut reply = Vec::new();
        let _ = stream.read_to_end(&mut reply).await;
        reply
    });
    journal.eventually(|l| l.iter().any(|l| l == "slow: slow started")).await; // in its handler
    let (took, result) = server.shut_down().await;
    result.unwrap();
    assert!(took < Duration::from_secs(6), "took {took:?}: the deadline is 1 s, the request 20 s");
    assert!(slow.await.unwrap().is_empty(), "the slow request was cut, not answered");
    assert_eq!(
        journal.lines(),
        ["slow: slow started", "slow: witness destroyed", "singletons destroyed"],
        "the cut request's scope was destroyed before the singletons"
    );
    assert!(closed_within(&mut half, Duration::from_secs(1)).await.is_ok(), "the half-sent head was closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_cuts_the_shutdown_short() {
    let mut server = start(|s| s.drain_connections_timeout(Duration::from_secs(60))).await;
    let addr = server.addr;
    let slow = tokio::spawn(async move { send(addr, "GET", "/end/slow", &[], b"").await });
    server.journal().eventually(|l| l.iter().any(|l| l.ends_with("slow started"))).await;
    server.stop.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!server.server.is_finished(), "draining the slow request");
    let started = Instant::now();
    server.force.take().unwrap().send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), &mut server.server).await.expect("returned").unwrap();
    assert!(matches!(result, Err(ServeError::Forced { connections: 1 })), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    slow.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cancelled_during_its_completion_reads_as_failed_to_destroy_hooks() {
    let server = start(|s| s).await;
    let journal = server.journal();
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /end/work?touch=ledger HTTP/1.1\r\nhost: test\r\nx-request-id: gone\r\nx-commit: slow\r\n\r\n")
        .await
        .unwrap();
    journal.eventually(|l| l.iter().any(|l| l == "gone: commit started")).await;
    drop(stream); // the client goes away during the COMMIT
    let lines = journal.eventually(|l| l.iter().any(|l| l.contains("ledger closed"))).await;
    assert!(lines.contains(&"gone: ledger closed at status None, job done: false".to_owned()), "{lines:?}");
}
