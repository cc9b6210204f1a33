//! `otlp::install` (cargo feature `otlp`): spans and the request-duration histogram reach an
//! OTLP/HTTP receiver, as protobuf. The receiver is a stand-in on loopback that keeps what it
//! is sent: no collector is needed. Run with `cargo test -p tegu-otel --features otlp`.

#![cfg(feature = "otlp")]
#![allow(missing_docs, missing_debug_implementations)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::routing::{get, post};
use http::{HeaderMap, Request, StatusCode};
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt;

/// What the receiver was sent: each request's path, content type and body.
type Received = Arc<Mutex<Vec<(String, String, Bytes)>>>;

async fn receiver() -> (String, Received) {
    let received = Received::default();
    let keep = |path: &'static str| {
        move |State(received): State<Received>, headers: HeaderMap, body: Bytes| async move {
            let kind = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            received.lock().unwrap().push((path.to_owned(), kind, body));
            StatusCode::OK
        }
    };
    let router = Router::new()
        .route("/v1/traces", post(keep("/v1/traces")))
        .route("/v1/metrics", post(keep("/v1/metrics")))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (url, received)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_the_duration_histogram_are_exported_over_otlp_http() {
    let (url, received) = receiver().await;
    let otlp = tegu_otel::otlp::install(&url, "tegu-otel-tests").unwrap();
    let subscriber = tracing_subscriber::registry().with(otlp.layer());
    let trace_id = {
        let _guard = tracing::subscriber::set_default(subscriber);
        // After `install`: the layer's histogram is the exported meter provider's.
        let router = Router::new().route("/orders/{id}", get(|| async { "ok" })).layer(tegu_otel::TraceLayer::new());
        let request = Request::get("/orders/7")
            .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .body(Body::empty())
            .unwrap();
        assert_eq!(router.oneshot(request).await.unwrap().status(), StatusCode::OK);
        let span = tracing::info_span!("exported work");
        span.in_scope(|| tegu_otel::current_trace().unwrap().0.trace_id())
    };
    // Shutting down exports what is left; it blocks, so off the runtime's threads.
    tokio::task::spawn_blocking(move || otlp.shutdown()).await.unwrap().unwrap();

    let received = received.lock().unwrap();
    let traces: Vec<_> = received.iter().filter(|(path, ..)| path == "/v1/traces").collect();
    assert!(!traces.is_empty(), "no spans were sent");
    assert!(traces.iter().all(|(_, kind, _)| kind == "application/x-protobuf"), "{traces:?}");
    let sent = |needle: &[u8]| traces.iter().any(|(.., body)| contains(body, needle));
    // Strings and ids are written as they are in protobuf.
    assert!(sent(b"GET /orders/{id}") && sent(b"exported work") && sent(b"tegu-otel-tests"));
    assert!(sent(&[0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36]));
    assert!(sent(&trace_id));
    let metrics: Vec<_> = received.iter().filter(|(path, ..)| path == "/v1/metrics").collect();
    assert!(metrics.iter().any(|(.., body)| contains(body, b"http.server.request.duration")), "{metrics:?}");
}
