//! A streamed response body belongs to its request, over real sockets (HTTP/1.1, and HTTP/2
//! with its streams multiplexed on one connection): each frame is produced inside the request's
//! scope (a `ContextRef` works there, and reaches that request's object under a thousand
//! concurrent streams), the destroy hooks run after the last frame, a body that fails, panics
//! or loses its client mid-stream (a hang-up, an HTTP/2 reset) is seen as failed by them, and a
//! graceful shutdown waits for a stream in progress.
#![allow(missing_docs, missing_debug_implementations)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Path;
use futures_util::stream;
use tegu_core::{App, ContextRef, context_proto};
use tegu_http::{RequestHead, ServeError, Server, http_controller, http_routes};
use tegu_test_support::http_client::{self, send};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

tegu_test_support::journal_proto!();

/// Per request: counts the frames produced through it, and says at its end what it saw.
#[context_proto(destroy = finish)]
pub struct Tracer {
    #[inject]
    head: Arc<RequestHead>,
    #[inject]
    journal: Arc<Journal>,
    frames: AtomicUsize,
}

impl Tracer {
    fn frame(&self, i: usize) -> String {
        self.frames.fetch_add(1, Ordering::SeqCst);
        format!("{}:{i}\n", self.head.id())
    }
    async fn finish(&self) {
        let (head, frames) = (&self.head, self.frames.load(Ordering::SeqCst));
        self.journal.push(format!(
            "{} destroyed after {frames} frames, body failed: {}, succeeded: {}",
            head.id(),
            head.body_failed(),
            head.succeeded()
        ));
    }
}

/// How a stream's frames come.
#[derive(Clone, Copy)]
enum Shape {
    /// `n` frames, each after a yield.
    Frames(usize, Duration),
    /// One frame, then an error.
    Fails,
    /// One frame, then a panic.
    Panics,
}

#[http_controller(path = "/stream")]
pub struct StreamController {
    #[inject]
    tracer: ContextRef<Tracer>,
}

impl StreamController {
    /// A body whose every frame reads the request's `Tracer` (first created by the body itself).
    fn body(&self, shape: Shape) -> Body {
        let tracer = self.tracer;
        Body::from_stream(stream::unfold(0, move |i| {
            let tracer = tracer;
            async move {
                let frame = match shape {
                    Shape::Frames(n, _) if i == n => return None,
                    Shape::Frames(_, pause) if pause.is_zero() => {
                        tokio::task::yield_now().await;
                        Ok(tracer.get().frame(i))
                    }
                    Shape::Frames(_, pause) => {
                        tokio::time::sleep(pause).await;
                        Ok(tracer.get().frame(i))
                    }
                    Shape::Fails | Shape::Panics if i == 0 => Ok(tracer.get().frame(i)),
                    // After a pause, so that the first frame is on the wire.
                    Shape::Fails => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Err(std::io::Error::other("the export's source went away"))
                    }
                    Shape::Panics => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        panic!("the export's formatter gave up")
                    }
                };
                Some((frame, i + 1))
            }
        }))
    }
}

#[http_routes]
impl StreamController {
    #[get("/frames/{n}")]
    async fn frames(&self, Path(n): Path<usize>) -> Body {
        self.body(Shape::Frames(n, Duration::ZERO))
    }

    #[get("/slow/{n}")]
    async fn slow(&self, Path(n): Path<usize>) -> Body {
        self.body(Shape::Frames(n, Duration::from_millis(100)))
    }

    #[get("/endless")]
    async fn endless(&self) -> Body {
        self.body(Shape::Frames(usize::MAX, Duration::from_millis(10)))
    }

    #[get("/fails")]
    async fn fails(&self) -> Body {
        self.body(Shape::Fails)
    }

    #[get("/panics")]
    async fn panics(&self) -> Body {
        self.body(Shape::Panics)
    }

    /// Buffered: the scope ends as it always did.
    #[get("/whole")]
    async fn whole(&self) -> String {
        self.tracer.get().frame(0)
    }

    #[get("/other")]
    async fn other(&self) -> &'static str {
        "still serving"
    }
}

struct Running {
    addr: SocketAddr,
    app: App,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl Running {
    async fn start() -> Running {
        let app = App::builder().build().await.unwrap();
        let listener = tegu_http::listen("127.0.0.1:0", tegu_http::DEFAULT_BACKLOG).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            Server::new(app.clone(), tegu_http::router(&app))
                .with_graceful_shutdown(async {
                    stopped.await.ok();
                })
                .run(listener),
        );
        Running { addr, app, stop: Some(stop), server }
    }

    fn journal(&self) -> Arc<Journal> {
        self.app.get_object::<Journal>().unwrap()
    }

    async fn shut_down(mut self) -> Result<(), ServeError> {
        self.stop.take().unwrap().send(()).unwrap();
        self.server.await.unwrap()
    }
}

/// The frames of a chunked reply, and whether it ended properly.
fn frames(reply: &http_client::Reply) -> (Vec<String>, bool) {
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.chunks().unwrap_or_else(|| panic!("not chunked: {reply:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_streams_each_read_their_own_request_on_every_frame() {
    const STREAMS: usize = 1000;
    const FRAMES: usize = 5;
    let running = Running::start().await;
    let addr = running.addr;
    let clients: Vec<_> = (0..STREAMS)
        .map(|n| {
            tokio::spawn(async move {
                let id = format!("stream-{n}");
                let reply = send(addr, "GET", &format!("/stream/frames/{FRAMES}"), &[("x-request-id", &id)], b"").await;
                let (frames, ended) = frames(&reply);
                let expected: Vec<String> = (0..FRAMES).map(|i| format!("{id}:{i}\n")).collect();
                (frames == expected && ended, frames)
            })
        })
        .collect();
    let mut mixups = Vec::new();
    for client in clients {
        let (ok, frames) = client.await.unwrap();
        if !ok {
            mixups.push(frames);
        }
    }
    assert!(mixups.is_empty(), "{} of {STREAMS} streams saw other frames, e.g. {:?}", mixups.len(), mixups.first());
    // Each request's tracer was destroyed after its last frame, as a success.
    let journal = running.journal();
    let lines = journal.eventually(|lines| lines.len() == STREAMS).await;
    let expected = format!("destroyed after {FRAMES} frames, body failed: false, succeeded: true");
    let wrong: Vec<&String> = lines.iter().filter(|l| !l.ends_with(&expected)).collect();
    assert!(wrong.is_empty(), "{wrong:?}");
    running.shut_down().await.unwrap();
}

#[tokio::test]
async fn a_body_that_fails_or_panics_mid_stream_is_cut_and_seen_as_failed_by_destroy_hooks() {
    let running = Running::start().await;
    for (path, id) in [("/stream/fails", "fails-1"), ("/stream/panics", "panics-1")] {
        let reply = send(running.addr, "GET", path, &[("x-request-id", id)], b"").await;
        let (frames, ended) = frames(&reply);
        assert_eq!(frames, [format!("{id}:0\n")]);
        assert!(!ended, "the response must not look complete: {reply:?}");
        let line = format!("{id} destroyed after 1 frames, body failed: true, succeeded: false");
        running.journal().eventually(|lines| lines.contains(&line)).await;
    }
    // The server lives on.
    assert_eq!(send(running.addr, "GET", "/stream/other", &[], b"").await.body, "still serving");
    running.shut_down().await.unwrap();
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_stream_ends_the_scope_as_failed() {
    let running = Running::start().await;
    let mut client = tokio::net::TcpStream::connect(running.addr).await.unwrap();
    client.write_all(b"GET /stream/endless HTTP/1.1\r\nhost: t\r\nx-request-id: gone-1\r\n\r\n").await.unwrap();
    // Read until the first frame has come, then hang up.
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("gone-1:0") {
        let mut more = [0u8; 256];
        let n = client.read(&mut more).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&more[..n]);
    }
    drop(client);
    let lines = running.journal().eventually(|lines| lines.iter().any(|l| l.starts_with("gone-1 destroyed"))).await;
    assert!(lines[0].ends_with("body failed: true, succeeded: false"), "{lines:?}");
    running.shut_down().await.unwrap();
}

#[tokio::test]
async fn a_buffered_body_ends_its_scope_as_before() {
    let running = Running::start().await;
    let reply = send(running.addr, "GET", "/stream/whole", &[("x-request-id", "whole-1")], b"").await;
    assert_eq!(reply.body, "whole-1:0\n");
    let line = "whole-1 destroyed after 1 frames, body failed: false, succeeded: true".to_owned();
    running.journal().eventually(|lines| lines.contains(&line)).await;
    running.shut_down().await.unwrap();
}

#[tokio::test]
async fn a_graceful_shutdown_waits_for_a_stream_in_progress_before_destroying_singletons() {
    let running = Running::start().await;
    let addr = running.addr;
    let client =
        tokio::spawn(async move { send(addr, "GET", "/stream/slow/5", &[("x-request-id", "slow-1")], b"").await });
    tokio::time::sleep(Duration::from_millis(150)).await; // the stream has begun
    let journal = running.journal();
    running.shut_down().await.unwrap();
    let (frames, ended) = frames(&client.await.unwrap());
    assert_eq!(frames.len(), 5);
    assert!(ended);
    assert_eq!(
        journal.lines(),
        ["slow-1 destroyed after 5 frames, body failed: false, succeeded: true", "singletons destroyed"]
    );
}

/// An HTTP/2 connection (h2c, prior knowledge) to `addr`: requests on it are streams of the
/// one connection.
async fn h2(addr: SocketAddr) -> hyper::client::conn::http2::SendRequest<http_body_util::Empty<axum::body::Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    sender
}

fn h2_request(addr: SocketAddr, path: &str, id: &str) -> http::Request<http_body_util::Empty<axum::body::Bytes>> {
    http::Request::get(format!("http://{addr}{path}")).header("x-request-id", id).body(Default::default()).unwrap()
}

/// Over HTTP/2, a hundred streamed responses multiplexed on one connection: each frame of
/// each is produced inside its own request's scope, and each request's destroy hooks run after
/// its last frame, as a success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_multiplexed_on_one_http2_connection_each_read_their_own_request() {
    use http_body_util::BodyExt;
    const STREAMS: usize = 100;
    const FRAMES: usize = 5;
    let running = Running::start().await;
    let sender = h2(running.addr).await;
    let addr = running.addr;
    let calls: Vec<_> = (0..STREAMS)
        .map(|n| {
            let mut sender = sender.clone();
            tokio::spawn(async move {
                let id = format!("h2-{n}");
                let response =
                    sender.send_request(h2_request(addr, &format!("/stream/frames/{FRAMES}"), &id)).await.unwrap();
                assert_eq!(response.status(), 200);
                let body = response.into_body().collect().await.unwrap().to_bytes();
                let expected: String = (0..FRAMES).map(|i| format!("{id}:{i}\n")).collect();
                String::from_utf8_lossy(&body) == expected
            })
        })
        .collect();
    for call in calls {
        assert!(call.await.unwrap(), "a stream saw another request's frames");
    }
    let lines = running.journal().eventually(|lines| lines.len() == STREAMS).await;
    let expected = format!("destroyed after {FRAMES} frames, body failed: false, succeeded: true");
    assert!(lines.iter().all(|l| l.ends_with(&expected)), "{lines:?}");
    running.shut_down().await.unwrap();
}

/// Over HTTP/2, a stream the client resets mid-body (the connection stays open for the others)
/// and a body that fails mid-stream both end their request's scope as failed; the connection
/// serves the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_reset_or_failed_mid_body_ends_its_scope_as_failed() {
    use http_body_util::BodyExt;
    let running = Running::start().await;
    let mut sender = h2(running.addr).await;
    // The client reads the first frame, then resets the stream (drops the body).
    let response = sender.send_request(h2_request(running.addr, "/stream/endless", "h2-gone")).await.unwrap();
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"h2-gone:0\n");
    drop(body);
    let gone = "h2-gone destroyed after";
    let lines = running.journal().eventually(|lines| lines.iter().any(|l| l.starts_with(gone))).await;
    let line = lines.iter().find(|l| l.starts_with(gone)).unwrap();
    assert!(line.ends_with("body failed: true, succeeded: false"), "{line}");
    // A body that fails after its first frame: the client sees the stream cut.
    let response = sender.send_request(h2_request(running.addr, "/stream/fails", "h2-fails")).await.unwrap();
    assert!(response.into_body().collect().await.is_err(), "the stream must not look complete");
    let line = "h2-fails destroyed after 1 frames, body failed: true, succeeded: false".to_owned();
    running.journal().eventually(|lines| lines.contains(&line)).await;
    // The same connection goes on.
    let response = sender.send_request(h2_request(running.addr, "/stream/other", "h2-other")).await.unwrap();
    assert_eq!(&response.into_body().collect().await.unwrap().to_bytes()[..], b"still serving");
    running.shut_down().await.unwrap();
}
