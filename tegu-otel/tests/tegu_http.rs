//! `TraceLayer` outside tegu-http's context layer: the request's scope is seeded with the server
//! span's trace context, and the handlers of the events the request emits are children of the
//! server span.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

mod support;

use std::sync::Mutex;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, StatusCode};
use support::{CALLER_SPAN, Otel, TRACE_ID, TRACEPARENT};
use tegu_core::lineage::{Lineage, TraceContext};
use tegu_core::{App, handlers, singleton_proto};
use tegu_otel::{OtelLink, TraceLayer};
use tower::ServiceExt;

pub struct Shipped;

#[singleton_proto]
#[derive(Default)]
pub struct Shipping {
    seen: Mutex<Vec<String>>,
}

#[handlers]
impl Shipping {
    #[event_handler]
    async fn on_shipped(&self, _: &Shipped) {
        let trace = Lineage::current().get::<TraceContext>().map(ToString::to_string).unwrap_or_default();
        self.seen.lock().unwrap().push(trace);
    }
}

#[tokio::test]
async fn a_request_through_tegu_http_is_traced_into_its_event_handlers() {
    let otel = Otel::install();
    let app = App::builder().without_schedules().register(OtelLink::proto()).build().await.unwrap();
    let ship = {
        let app = app.clone();
        move || async move {
            // In the request's scope: its lineage is the server span's trace context.
            app.events().emit(Shipped);
            Lineage::current().get::<TraceContext>().map(ToString::to_string).unwrap_or_default()
        }
    };
    let own = Router::new().route("/ship/{id}", get(ship));
    let router = tegu_http::RouterBuilder::new(&app).merge(own).build().unwrap().layer(TraceLayer::new());
    let request = Request::get("/ship/7").header("traceparent", TRACEPARENT).body(Body::empty()).unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
    app.shutdown().await.unwrap();

    let server = otel.server();
    assert_eq!(server.name, "GET /ship/{id}");
    assert_eq!(server.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(server.parent_span_id.to_string(), CALLER_SPAN);
    let own = format!("00-{TRACE_ID}-{}-01", server.span_context.span_id());
    assert_eq!(body, own.as_bytes(), "the request's scope has the server span's context");

    // tegu-http's own span is inside the server span; the handler's is the server span's child.
    assert_eq!(otel.named("request").parent_span_id, server.span_context.span_id());
    let handler = otel.named("event handler");
    assert_eq!(handler.span_context.trace_id(), server.span_context.trace_id());
    assert_eq!(handler.parent_span_id, server.span_context.span_id());
    // The handler's scope inherited the request's lineage.
    assert_eq!(*app.get_object::<Shipping>().unwrap().seen.lock().unwrap(), [own]);
}

#[tokio::test]
async fn the_trace_id_is_in_the_log_lines_and_in_no_spans_attributes() {
    let otel = Otel::install();
    let app = App::builder().without_schedules().register(OtelLink::proto()).build().await.unwrap();
    let ship = {
        let app = app.clone();
        move || async move {
            app.events().emit(Shipped);
            tracing::info!("the order leaves the warehouse");
        }
    };
    let own = Router::new().route("/ship/{id}", get(ship));
    let router = tegu_http::RouterBuilder::new(&app).merge(own).build().unwrap().layer(TraceLayer::new());
    let request = Request::get("/ship/7").header("traceparent", TRACEPARENT).body(Body::empty()).unwrap();
    assert_eq!(router.oneshot(request).await.unwrap().status(), StatusCode::OK);
    app.shutdown().await.unwrap();

    // The span's own trace id is the trace id; an attribute would say it twice.
    for name in ["GET /ship/{id}", "request", "event handler"] {
        let span = otel.named(name);
        assert_eq!(span.span_context.trace_id().to_string(), TRACE_ID, "{name}");
        assert!(support::attribute(&span, "trace_id").is_none(), "{name}: {:#?}", span.attributes);
    }
    // The log lines still carry it, for a reader without the trace.
    let logs = otel.logs();
    let line = logs.lines().find(|l| l.contains("the order leaves the warehouse")).unwrap_or_else(|| panic!("{logs}"));
    assert!(line.contains(&format!("trace_id=\"{TRACE_ID}\"")), "{line}");
}
