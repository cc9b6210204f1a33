//! A panic is logged through `tracing` inside the span of its request. In a binary of its own:
//! the subscriber is set for this thread only, and tracing caches per call site whether anyone
//! listens, which tests running on other threads would race with.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::{Arc, Mutex};

use di_core::App;
use di_http::{Server, http_controller, http_routes};

use di_test_support::http_client;

#[http_controller]
pub struct Failing;

#[http_routes]
impl Failing {
    #[get("/fail")]
    async fn fail(&self) -> &'static str {
        panic!("handler gave up")
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

#[test]
fn a_panic_is_logged_in_the_span_of_its_request_id() {
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
            tokio::spawn(Server::new(app.clone(), di_http::router(&app)).run(listener));
            let reply = http_client::send(addr, "GET", "/fail", &[("x-request-id", "trace-me-42")], b"").await;
            assert_eq!(reply.status, 500);
        });
    });
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = logs.lines().find(|l| l.contains("request handler panicked")).unwrap_or_else(|| panic!("{logs}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("request{id=trace-me-42 method=GET path=/fail}"), "{line}");
    assert!(line.contains("handler gave up"), "{line}");
}
