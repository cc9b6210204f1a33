//! What a request logs, through `tracing`, inside the span of its request: a panic, a body that
//! fails mid-stream, and a forged request id that cannot add fields. In a binary of its own:
//! the subscriber is set for this thread only, and tracing caches per call site whether anyone
//! listens, which tests running on other threads would race with.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::{Arc, Mutex};

use tegu_core::App;
use tegu_http::{Server, http_controller, http_routes};

use tegu_test_support::http_client;

#[http_controller]
pub struct Failing;

#[http_routes]
impl Failing {
    #[get("/fail")]
    async fn fail(&self) -> &'static str {
        panic!("handler gave up")
    }

    /// Logs a line in its request's span.
    #[get("/echo/{word}")]
    async fn echo(&self) -> &'static str {
        tracing::info!("echoed");
        "ok"
    }

    /// A CSV export whose source fails after the first line.
    #[get("/export")]
    async fn export(&self) -> axum::body::Body {
        let lines = futures_util::stream::unfold(0, |i| async move {
            match i {
                0 => Some((Ok("id,title\n".to_owned()), 1)),
                1 => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    Some((Err(std::io::Error::other("the database went away")), 2))
                }
                _ => None,
            }
        });
        axum::body::Body::from_stream(lines)
    }
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `client` against a served App with a subscriber capturing this thread's logs; the logs.
fn logs_of<F: std::future::Future<Output = ()>>(client: impl FnOnce(std::net::SocketAddr) -> F) -> String {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
    // One thread, so that the subscriber set for it sees the server's work too.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let app = App::builder().build().await.unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(Server::new(app.clone(), tegu_http::router(&app)).run(listener));
            client(addr).await;
            // Destroy hooks and the scope's end run after the response: shutdown waits for
            // them, so every line the request could log is captured.
            app.shutdown().await.unwrap();
        });
    });
    String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
}

#[test]
fn a_panic_is_logged_in_the_span_of_its_request_id() {
    let logs = logs_of(|addr| async move {
        let reply = http_client::send(addr, "GET", "/fail", &[("x-request-id", "trace-me-42")], b"").await;
        assert_eq!(reply.status, 500);
    });
    let line = logs.lines().find(|l| l.contains("request handler panicked")).unwrap_or_else(|| panic!("{logs}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("request{id=trace-me-42 method=GET path=\"/fail\"}"), "{line}");
    assert!(line.contains("handler gave up"), "{line}");
}

/// A client cannot write fields into its request's log lines: an `x-request-id` that is no
/// plain id is replaced by a generated one.
#[test]
fn a_forged_request_id_adds_no_field_to_the_log() {
    let forged = "x} status=200 user=admin request{id=y";
    let logs = logs_of(|addr| async move {
        let reply = http_client::send(addr, "GET", "/fail", &[("x-request-id", forged)], b"").await;
        assert_eq!(reply.status, 500);
    });
    let line = logs.lines().find(|l| l.contains("request handler panicked")).unwrap_or_else(|| panic!("{logs}"));
    assert!(!logs.contains("user=admin"), "{logs}");
    let id = line.split("request{id=").nth(1).and_then(|rest| rest.split(' ').next()).unwrap_or_default();
    assert!(tegu_http::RequestId::is_valid(id.as_bytes()) && !id.contains('}'), "{line}");
}

/// A body that fails after the status was sent is logged in its request's span.
#[test]
fn a_body_failing_mid_stream_is_logged_in_the_span_of_its_request() {
    let logs = logs_of(|addr| async move {
        let reply = http_client::send(addr, "GET", "/export", &[("x-request-id", "export-7")], b"").await;
        assert_eq!(reply.status, 200);
    });
    let line = logs.lines().find(|l| l.contains("failed mid-stream")).unwrap_or_else(|| panic!("{logs}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("request{id=export-7 method=GET path=\"/export\"}"), "{line}");
    assert!(line.contains("the database went away"), "{line}");
}

/// A client cannot write fields into its request's log lines through the path either: it is
/// written escaped, as the other values a client sent.
#[test]
fn a_path_with_quotes_and_braces_adds_no_field_to_the_log() {
    let logs = logs_of(|addr| async move {
        let reply = http_client::send(addr, "GET", "/echo/x\"}user=admin{\"", &[("x-request-id", "echo-1")], b"").await;
        assert_eq!(reply.status, 200);
    });
    let line = logs.lines().find(|l| l.contains("echoed")).unwrap_or_else(|| panic!("{logs}"));
    assert!(line.contains(r#"request{id=echo-1 method=GET path="/echo/x\"}user=admin{\""}"#), "{line}");
}
