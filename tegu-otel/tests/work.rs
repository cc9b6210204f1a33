//! `OtelLink`: the spans of the event handlers and jobs a request causes are children of the
//! request's server span, here and in another instance (the trace context read back from an
//! event's headers); work with no trace context keeps a trace of its own.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

mod support;

use std::sync::Mutex;

use axum::body::Body;
use axum::extract::Extension;
use axum::routing::get;
use axum::{Router, http::StatusCode};
use http::Request;
use opentelemetry::trace::{SpanId, SpanKind};
use support::{CALLER_SPAN, Otel, TRACE_ID, TRACEPARENT, text};
use tegu_core::lineage::Lineage;
use tegu_core::{App, DiError, handlers, singleton_proto};
use tegu_otel::{OtelLink, TraceLayer};
use tower::ServiceExt;

pub struct Shipped;

/// What each handler and job saw as the current trace (`current_trace`, what `inject` writes).
#[singleton_proto]
#[derive(Default)]
pub struct Shipping {
    seen: Mutex<Vec<String>>,
}

impl Shipping {
    fn note(&self, what: &str) {
        let trace = tegu_otel::current_trace().map(|(t, _)| t.to_string()).unwrap_or_default();
        self.seen.lock().unwrap().push(format!("{what} {trace}"));
    }
}

#[handlers]
impl Shipping {
    #[event_handler]
    async fn on_shipped(&self, _: &Shipped) {
        self.note("handler");
    }

    #[schedule(every = "1h")]
    async fn sweep(&self) -> Result<(), DiError> {
        self.note("job");
        Ok(())
    }
}

async fn build(link: bool) -> App {
    let builder = App::builder().without_schedules();
    let builder = if link { builder.register(OtelLink::proto()) } else { builder };
    builder.build().await.unwrap()
}

/// A request through `TraceLayer` whose handler runs a scope seeded with the request's lineage
/// (what tegu-http's context layer does) and emits an event and starts the job in it.
async fn request(app: &App) {
    let handler = {
        let app = app.clone();
        move |Extension(lineage): Extension<Lineage>| async move {
            app.scope()
                .lineage(&lineage)
                .run(async {
                    app.events().emit(Shipped);
                    app.run_schedule::<Shipping>("sweep").await
                })
                .await
                .unwrap();
            StatusCode::NO_CONTENT
        }
    };
    let router = Router::new().route("/ship", get(handler)).layer(TraceLayer::new());
    let request = Request::get("/ship").header("traceparent", TRACEPARENT).body(Body::empty()).unwrap();
    assert_eq!(router.oneshot(request).await.unwrap().status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_requests_handlers_and_jobs_are_children_of_its_server_span() {
    let otel = Otel::install();
    let app = build(true).await;
    request(&app).await;
    app.shutdown().await.unwrap();

    let server = otel.server();
    assert_eq!(server.span_context.trace_id().to_string(), TRACE_ID);
    let mut seen = app.get_object::<Shipping>().unwrap().seen.lock().unwrap().clone();
    seen.sort();
    for name in ["event handler", "job"] {
        let span = otel.named(name);
        assert_eq!(span.span_context.trace_id(), server.span_context.trace_id(), "{name}");
        assert_eq!(span.parent_span_id, server.span_context.span_id(), "{name}: {span:#?}");
        // The `trace_id` field is for log lines: the span's own trace id says it.
        assert!(support::attribute(&span, "trace_id").is_none(), "{name}");
    }
    // In the handler and the job, the current trace is their own span's: an outgoing call's parent.
    let handler = otel.named("event handler").span_context.span_id();
    let job = otel.named("job").span_context.span_id();
    assert_eq!(seen, [format!("handler 00-{TRACE_ID}-{handler}-01"), format!("job 00-{TRACE_ID}-{job}-01")]);
}

#[tokio::test]
async fn an_event_from_another_instance_is_handled_in_the_trace_its_headers_carry() {
    let otel = Otel::install();
    let app = build(true).await;
    // What a broker brought: the event, and the headers the emitting instance's lineage wrote.
    let lineage = app.lineage_from_headers([("traceparent", TRACEPARENT), ("tracestate", "congo=t61rcWkgMzE")]);
    let delivery = app.events().deliver_with(Shipped, &lineage).await;
    assert_eq!((delivery.handlers, delivery.failed), (1, 0));
    app.shutdown().await.unwrap();

    let span = otel.named("event handler");
    assert_eq!(span.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(span.parent_span_id.to_string(), CALLER_SPAN);
    assert!(span.parent_span_is_remote);
    assert_eq!(span.span_context.trace_state().header(), "congo=t61rcWkgMzE");
}

#[tokio::test]
async fn without_the_link_or_a_trace_context_work_has_a_trace_of_its_own() {
    let otel = Otel::install();
    // Registered, but the work has no trace context: emitted outside any request.
    let app = build(true).await;
    app.events().deliver(Shipped).await;
    app.shutdown().await.unwrap();
    let span = otel.named("event handler");
    assert_eq!(span.parent_span_id, SpanId::INVALID);
    assert_ne!(span.span_context.trace_id().to_string(), TRACE_ID);

    // Not registered: the handler's scope has the trace context (tegu-core registers its
    // lineage types), its span's `trace_id` field shows it, but the span is a root.
    let otel = Otel::install();
    let app = build(false).await;
    let lineage = app.lineage_from_headers([("traceparent", TRACEPARENT)]);
    app.events().deliver_with(Shipped, &lineage).await;
    app.shutdown().await.unwrap();
    assert_eq!(otel.named("event handler").parent_span_id, SpanId::INVALID);
}

#[tokio::test]
async fn work_in_this_process_is_internal_with_a_local_parent() {
    let otel = Otel::install();
    let app = build(true).await;
    request(&app).await;
    app.shutdown().await.unwrap();
    let server = otel.server();
    for name in ["event handler", "job"] {
        let span = otel.named(name);
        assert_eq!(span.parent_span_id, server.span_context.span_id(), "{name}");
        assert_eq!(span.span_kind, SpanKind::Internal, "{name}");
        assert!(!span.parent_span_is_remote, "{name}: its parent is a span of this process");
        assert!(span.links.is_empty(), "{name}: {:?}", span.links);
    }
}

#[tokio::test]
async fn an_event_from_a_transport_is_processed_in_a_consumer_span_linked_to_its_creation() {
    let otel = Otel::install();
    let app = build(true).await;
    let lineage = app.lineage_from_headers([("traceparent", TRACEPARENT)]);
    app.events().deliver_with(Shipped, &lineage).await;
    app.shutdown().await.unwrap();
    let span = otel.named("event handler");
    assert_eq!(span.span_kind, SpanKind::Consumer);
    assert_eq!((span.parent_span_id.to_string(), span.parent_span_is_remote), (CALLER_SPAN.to_owned(), true));
    assert_eq!(text(&span, "messaging.operation.type"), "process");
    assert_eq!(text(&span, "messaging.operation.name"), "process");
    let links: Vec<String> = span.links.iter().map(|l| l.span_context.span_id().to_string()).collect();
    assert_eq!(links, [CALLER_SPAN], "the message's creation context");
}
