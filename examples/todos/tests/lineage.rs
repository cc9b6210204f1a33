//! A request's trace across instances, seen whole: two Apps of the service in this process (A and
//! B, one PostgreSQL database, one NATS stream, each its own consumer, as two instances are), the
//! spans of both exported to one in-memory exporter. A request to A in a caller's trace
//! completes a todo of tenant `acme`; the event goes through A's outbox and NATS to both
//! instances, and the span of each instance's handler is a child of A's server span, in the
//! caller's trace.
//!
//! The subscriber is this binary's global default (its only test): the Apps' tasks run on the
//! runtime's threads, which a thread's default would not reach. Real servers
//! (`tegu_test_support::servers`): skipped with the reason printed where there are none, except
//! in CI.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use opentelemetry_sdk::trace::SpanData;
use tegu_core::App;
use tegu_core::lineage::Tenant;
use tegu_otel::opentelemetry::Value;
use tegu_otel::opentelemetry::trace::SpanKind;
use tegu_otel::testing::SpanRecorder;
use tegu_test_support::until;
use todos::advice::TodoStats;
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt;

/// The caller's trace context (W3C's example).
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// Its trace id.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
/// Its span: the caller's, the server span's parent.
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// How long a wait of this test lasts before it fails.
const WITHIN: Duration = Duration::from_secs(60);

/// An instance of the service named `name` (its NATS consumer) on database `db` and NATS
/// `nats`, its events on `stream`: what `TODOS_*` sets for the binary.
async fn instance(name: &str, db: &str, nats: &str, stream: &str) -> App {
    todos::with_nats(todos::builder())
        .config_value("db.url", db)
        .config_value("nats.url", nats)
        .config_value("nats.consumer", name)
        .config_value("nats.stream", stream)
        .config_value("nats.subjects", stream.to_lowercase())
        .config_value("outbox.poll_ms", 200)
        .build()
        .await
        .unwrap()
}

/// `request` through `router`: the status and the body.
async fn call(router: &axum::Router, request: axum::http::request::Builder, body: &str) -> (u16, String) {
    let request = request.body(Body::from(body.to_owned())).unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// `span`'s attribute `key`, as text.
fn attribute(span: &SpanData, key: &str) -> Option<String> {
    tegu_otel::testing::attribute(span, key).map(|value| match value {
        Value::String(text) => text.as_str().to_owned(),
        other => other.to_string(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handlers_in_every_instance_are_children_of_the_requests_server_span() {
    let servers = tegu_test_support::servers::nats().and_then(|nats| {
        let db = tegu_test_support::servers::postgres_database(&format!("lineage_{}", std::process::id()))?;
        Ok((nats, db))
    });
    let (nats, db) = match servers {
        Ok(servers) => servers,
        Err(why) => return tegu_test_support::servers::skip("lineage", why),
    };
    let recorder = SpanRecorder::new();
    let subscriber = tracing_subscriber::registry().with(recorder.layer("todos"));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let stream = format!("L{}", std::process::id());
    let (a, b) = (instance("a", &db, nats, &stream).await, instance("b", &db, nats, &stream).await);
    let (to_a, to_b) = (todos::router(todos::routes(&a)).unwrap(), todos::router(todos::routes(&b)).unwrap());
    // Ready: the database answers, and each is subscribed to NATS.
    for app in [&a, &b] {
        until("the instance to be ready", WITHIN, async || app.health().await.ready).await;
    }

    // A todo of acme, created and completed on A, in the caller's trace.
    let traced = |request: axum::http::request::Builder| {
        request.header("traceparent", TRACEPARENT).header("x-tenant", "acme").header("content-type", "application/json")
    };
    let (status, body) = call(&to_a, traced(Request::post("/users/ada/todos")), r#"{"title":"traced"}"#).await;
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"].as_i64().unwrap();
    let patch = Request::patch(format!("/users/ada/todos/{id}"));
    let (status, body) = call(&to_a, traced(patch), r#"{"done":true}"#).await;
    assert_eq!(status, 200, "{body}");

    // Each instance counted the completion for acme, once: its handler's scope had the tenant.
    until("B to count acme's completion", WITHIN, async || {
        let (_, body) = call(&to_b, Request::get("/stats").header("x-tenant", "acme"), "").await;
        body == r#"{"created":1,"completed":1,"tenant":{"key":"acme","created":1,"completed":1}}"#
    })
    .await;
    let stats = a.get_object::<TodoStats>().unwrap();
    let acme = Tenant::new("acme").unwrap();
    until("A to count acme's completion", WITHIN, async || stats.of_tenant(&acme).completed == 1).await;
    let handler = |span: &SpanData| {
        span.name == "event handler"
            && attribute(span, "handler").as_deref() == Some("todos::advice::TodoStats::on_completed")
    };
    until("both handlers' spans to end", WITHIN, async || {
        recorder.spans().iter().filter(|span| handler(span)).count() == 2
    })
    .await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    let spans = recorder.spans();

    // A's server span of the PATCH: in the caller's trace, the caller's span its parent.
    let servers: Vec<&SpanData> = spans
        .iter()
        .filter(|span| span.span_kind == SpanKind::Server && span.name == "PATCH /users/{user}/todos/{id}")
        .collect();
    assert_eq!(servers.len(), 1, "{servers:#?}");
    let server = servers[0];
    assert_eq!(server.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(server.parent_span_id.to_string(), CALLER_SPAN);

    // Both instances' handler spans (B's one of them; each App counted once, two spans): children
    // of A's server span, which they know from the event's headers, with its tenant and trace.
    let handlers: Vec<&SpanData> = spans.iter().filter(|span| handler(span)).collect();
    assert_eq!(handlers.len(), 2, "one per instance: {handlers:#?}");
    for span in handlers {
        assert_eq!(span.span_context.trace_id(), server.span_context.trace_id(), "{span:#?}");
        assert_eq!(span.parent_span_id, server.span_context.span_id(), "{span:#?}");
        assert!(span.parent_span_is_remote, "the parent came in the event's headers: {span:#?}");
        assert_eq!(attribute(span, "tenant").as_deref(), Some("acme"), "{span:#?}");
        // `trace_id` is a field for the log lines; the span's own trace id (above) says it.
        assert_eq!(attribute(span, "trace_id"), None, "{span:#?}");
    }
}
