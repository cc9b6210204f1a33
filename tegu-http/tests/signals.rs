//! SIGTERM, for real: this test binary signals itself, so it holds one test only (signals
//! reach the whole process).
#![allow(missing_docs, missing_debug_implementations)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tegu_core::App;
use tegu_http::{ServeError, Server, http_controller, http_routes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How many slow requests have reached their handler.
static STARTED: AtomicUsize = AtomicUsize::new(0);

#[http_controller]
pub struct SlowController;

#[http_routes]
impl SlowController {
    #[get("/slow")]
    async fn slow(&self) -> &'static str {
        STARTED.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(20)).await;
        "too late"
    }
}

fn sigterm() {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("kill -TERM {}", std::process::id()))
        .status()
        .expect("sh runs");
    assert!(status.success());
}

/// A server on the default signals, with a half-sent head and a 20 s request open.
async fn busy_server(drain_connections_timeout: Duration) -> tokio::task::JoinHandle<Result<(), ServeError>> {
    let app = App::builder().build().await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(
        Server::new(app.clone(), tegu_http::router(&app))
            .drain_connections_timeout(drain_connections_timeout)
            .run(listener),
    );
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"GET /slow HTTP/1.1\r\nhost: te").await.unwrap();
    let started = STARTED.load(Ordering::SeqCst);
    tokio::spawn(async move {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET /slow HTTP/1.1\r\nhost: test\r\n\r\n").await.unwrap();
        let _ = stream.read_to_end(&mut Vec::new()).await;
        drop(half);
    });
    // The slow request is in its handler, so both connections were accepted, and the server
    // listens for signals.
    while STARTED.load(Ordering::SeqCst) == started {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_within_the_deadline_and_a_second_one_at_once() {
    // One SIGTERM: drained for the 1 s deadline, then cut, then the App shut down.
    let server = busy_server(Duration::from_secs(1)).await;
    let started = Instant::now();
    sigterm();
    let result = tokio::time::timeout(Duration::from_secs(10), server).await.expect("SIGTERM stopped the server");
    result.unwrap().unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(6), "took {took:?}");

    // Two SIGTERMs: the second cuts a 60 s drain short.
    let server = busy_server(Duration::from_secs(60)).await;
    sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!server.is_finished(), "draining");
    let started = Instant::now();
    sigterm();
    let result = tokio::time::timeout(Duration::from_secs(5), server).await.expect("the second SIGTERM is obeyed");
    assert!(matches!(result.unwrap(), Err(ServeError::Forced { connections: 2 })));
    assert!(started.elapsed() < Duration::from_secs(5));
}
