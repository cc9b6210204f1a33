//! `TraceLayer` on an axum router: the server span of each request, in its caller's trace and
//! named as the HTTP semantic conventions say; the lineage it puts in the request; an invalid
//! trace context starting a new trace without being logged; the duration histogram.

#![allow(missing_docs, missing_debug_implementations)]

mod support;

use axum::body::Body;
use axum::extract::Extension;
use axum::routing::{any, get};
use axum::{Router, http::StatusCode};
use http::{HeaderMap, Request};
use opentelemetry::trace::{SpanId, Status};
use support::{CALLER_SPAN, Otel, TRACE_ID, TRACEPARENT, attribute, text};
use tegu_core::lineage::{Lineage, TraceContext, TraceState};
use tegu_otel::TraceLayer;
use tower::{Layer, ServiceExt};

/// What a handler saw: the lineage's trace context and state, and the headers `inject` wrote.
async fn seen(lineage: Option<Extension<Lineage>>) -> String {
    tracing::info!("handling");
    let mut headers = HeaderMap::new();
    tegu_otel::inject(&mut headers);
    let lineage = lineage.map(|l| l.0).unwrap_or_default();
    let trace = lineage.get::<TraceContext>().map(ToString::to_string).unwrap_or_default();
    let state = lineage.get::<TraceState>().map(|s| s.as_str().to_owned()).unwrap_or_default();
    let injected = headers.get("traceparent").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    format!("{trace}|{state}|{injected}")
}

async fn call(router: Router, request: Request<Body>) -> (StatusCode, String) {
    let response = router.oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 4096).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

fn router() -> Router {
    Router::new()
        .route("/orders/{id}", get(seen))
        .route("/fail", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
        .route("/teapot", get(|| async { StatusCode::IM_A_TEAPOT }))
        .route("/any", any(seen))
        .layer(TraceLayer::new())
}

#[tokio::test]
async fn a_request_with_a_traceparent_gets_a_server_span_in_the_callers_trace() {
    let otel = Otel::install();
    let request = Request::get("/orders/7")
        .header("traceparent", TRACEPARENT)
        .header("tracestate", "congo=t61rcWkgMzE")
        .body(Body::empty())
        .unwrap();
    let (status, body) = call(router(), request).await;
    assert_eq!(status, StatusCode::OK);

    let server = otel.server();
    assert_eq!(server.name, "GET /orders/{id}");
    assert_eq!(server.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(server.parent_span_id.to_string(), CALLER_SPAN);
    assert!(server.parent_span_is_remote);
    assert_eq!(server.span_context.trace_state().header(), "congo=t61rcWkgMzE");
    assert_eq!(text(&server, "http.request.method"), "GET");
    assert_eq!(text(&server, "url.path"), "/orders/7");
    assert_eq!(text(&server, "http.route"), "/orders/{id}");
    assert_eq!(text(&server, "http.response.status_code"), "200");
    // `trace_id` is a field for the log lines; the span's own trace id says it.
    assert!(attribute(&server, "trace_id").is_none());
    assert_eq!(server.status, Status::Unset);

    // The lineage holds the server span's own id: the request's work is its child. The state
    // goes on; `inject` in the handler writes the same context for an outgoing call.
    let own = format!("00-{TRACE_ID}-{}-01", server.span_context.span_id());
    assert_eq!(body, format!("{own}|congo=t61rcWkgMzE|{own}"));
}

#[tokio::test]
async fn an_invalid_traceparent_starts_a_new_trace_and_is_never_logged() {
    let otel = Otel::install();
    let forged = "00-ffffffffffffffffffffffffffffffff-forged-value-01 admin=true";
    for bad in [forged, "00-00000000000000000000000000000000-00f067aa0ba902b7-01"] {
        let request = Request::get("/orders/7").header("traceparent", bad).body(Body::empty()).unwrap();
        let (status, body) = call(router(), request).await;
        assert_eq!(status, StatusCode::OK);
        let server = otel.spans().pop().unwrap();
        let trace_id = server.span_context.trace_id().to_string();
        assert!(server.span_context.is_valid());
        assert_eq!(server.parent_span_id, SpanId::INVALID, "a new trace: {server:#?}");
        assert!(body.starts_with(&format!("00-{trace_id}-{}-01|", server.span_context.span_id())), "{body}");
        let logs = otel.logs();
        let handled = logs.lines().rfind(|l| l.contains("handling")).unwrap_or_else(|| panic!("{logs}"));
        assert!(handled.contains(&format!("trace_id=\"{trace_id}\"")), "{handled}");
    }
    let logs = otel.logs();
    assert!(!logs.contains("forged") && !logs.contains("admin=true"), "a header value was logged: {logs}");
}

#[tokio::test]
async fn two_traceparents_or_an_invalid_tracestate_are_not_taken() {
    let otel = Otel::install();
    let request = Request::get("/orders/7")
        .header("traceparent", TRACEPARENT)
        .header("traceparent", TRACEPARENT)
        .body(Body::empty())
        .unwrap();
    call(router(), request).await;
    assert_ne!(otel.spans().pop().unwrap().span_context.trace_id().to_string(), TRACE_ID);

    // The tracestate alone is dropped; the traceparent is taken.
    let request = Request::get("/orders/7")
        .header("traceparent", TRACEPARENT)
        .header("tracestate", "no list")
        .body(Body::empty());
    let (_, body) = call(router(), request.unwrap()).await;
    let server = otel.spans().pop().unwrap();
    assert_eq!(server.parent_span_id.to_string(), CALLER_SPAN);
    assert_eq!(server.span_context.trace_state().header(), "");
    assert!(body.contains("||"), "no state in the lineage: {body}");
}

#[tokio::test]
async fn a_server_error_marks_the_span_failed_and_a_client_error_does_not() {
    let otel = Otel::install();
    let (status, _) = call(router(), Request::get("/fail").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let failed = otel.spans().pop().unwrap();
    assert_eq!(failed.name, "GET /fail");
    assert!(matches!(failed.status, Status::Error { .. }), "{:?}", failed.status);
    assert_eq!(text(&failed, "error.type"), "503");
    assert_eq!(text(&failed, "http.response.status_code"), "503");

    call(router(), Request::get("/teapot").body(Body::empty()).unwrap()).await;
    let teapot = otel.spans().pop().unwrap();
    assert_eq!(teapot.status, Status::Unset);
    assert!(attribute(&teapot, "error.type").is_none());
}

#[tokio::test]
async fn without_a_route_the_span_is_named_by_its_method_and_an_unknown_method_is_other() {
    let otel = Otel::install();
    // Around the whole router, the layer runs before the routing: no `MatchedPath`.
    let outside = TraceLayer::new().layer(Router::new().route("/orders/{id}", get(seen)));
    let response = outside.oneshot(Request::get("/orders/7").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let span = otel.spans().pop().unwrap();
    assert_eq!(span.name, "GET");
    assert!(attribute(&span, "http.route").is_none());

    let request = Request::builder().method("PURGE").uri("/any").body(Body::empty()).unwrap();
    call(router(), request).await;
    let span = otel.spans().pop().unwrap();
    assert_eq!(span.name, "HTTP /any");
    assert_eq!(text(&span, "http.request.method"), "_OTHER");
    assert_eq!(text(&span, "http.request.method_original"), "PURGE");
}

#[tokio::test]
async fn without_an_opentelemetry_layer_the_callers_context_passes_through() {
    // No subscriber at all: the span is disabled and has no id of its own. (Nor is there a
    // scope with the lineage here, so `inject` finds no trace.)
    let request = Request::get("/orders/7")
        .header("traceparent", TRACEPARENT)
        .header("tracestate", "congo=t61rcWkgMzE")
        .body(Body::empty())
        .unwrap();
    let (_, body) = call(router(), request).await;
    assert_eq!(body, format!("{TRACEPARENT}|congo=t61rcWkgMzE|"));
    // Nor a trace context: no lineage, nothing injected.
    let (_, body) = call(router(), Request::get("/orders/7").body(Body::empty()).unwrap()).await;
    assert_eq!(body, "||");
}

#[tokio::test]
async fn the_server_span_has_the_scheme_and_the_query_with_signatures_redacted() {
    let otel = Otel::install();
    let query = "q=todo&sig=abc&X-Amz-Signature=def&X-Amz-Credential=ghi&X-Amz-Security-Token=jkl&X-Goog-Signature=mno&Sig=kept";
    call(router(), Request::get(format!("/orders/7?{query}")).body(Body::empty()).unwrap()).await;
    let server = otel.server();
    assert_eq!(text(&server, "url.scheme"), "http");
    assert_eq!(
        text(&server, "url.query"),
        "q=todo&sig=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED&X-Amz-Security-Token=REDACTED&X-Goog-Signature=REDACTED&Sig=kept"
    );
    assert_eq!(text(&server, "url.path"), "/orders/7");
    for (request, scheme) in [
        (Request::get("https://shop.example/orders/7"), "https"),
        (Request::get("/orders/7").header("x-forwarded-proto", "https"), "https"),
        (Request::get("/orders/7").header("forwarded", "for=192.0.2.60;proto=HTTPS;by=203.0.113.43"), "https"),
        (Request::get("http://shop.example/orders/7").header("forwarded", "for=192.0.2.60"), "http"),
    ] {
        let otel = Otel::install();
        call(router(), request.body(Body::empty()).unwrap()).await;
        let server = otel.server();
        assert_eq!(text(&server, "url.scheme"), scheme);
        assert!(attribute(&server, "url.query").is_none(), "no query, no attribute");
    }
}

#[tokio::test]
async fn reserved_trace_flags_are_not_passed_on() {
    let ff = format!("00-{TRACE_ID}-{CALLER_SPAN}-ff");
    let request = || Request::get("/orders/7").header("traceparent", ff.as_str()).body(Body::empty()).unwrap();
    // Without an OpenTelemetry layer: the caller's context, its flags but `sampled` sent as zero.
    let (_, body) = call(router(), request()).await;
    assert_eq!(body, format!("{TRACEPARENT}||"));
    // With one: the server span's context, and what `inject` writes for an outgoing call.
    let otel = Otel::install();
    let (_, body) = call(router(), request()).await;
    let own = format!("00-{TRACE_ID}-{}-01", otel.server().span_context.span_id());
    assert_eq!(body, format!("{own}||{own}"));
}

#[tokio::test]
async fn a_lineage_already_in_the_request_keeps_its_other_values() {
    use tegu_core::lineage::Tenant;
    let _otel = Otel::install();
    let tenant = |lineage: Extension<Lineage>| async move {
        let tenant = lineage.get::<Tenant>().map(|t| t.key().to_owned()).unwrap_or_default();
        format!("{tenant} {}", lineage.get::<TraceContext>().is_some())
    };
    let router = Router::new().route("/", get(tenant)).layer(TraceLayer::new());
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    request.extensions_mut().insert(Lineage::new().with(Tenant::new("acme").unwrap()));
    assert_eq!(call(router, request).await.1, "acme true");
}

#[tokio::test]
async fn the_duration_of_each_request_is_recorded_with_method_route_and_status() {
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder().with_reader(PeriodicReader::builder(exporter.clone()).build()).build();
    let layer = TraceLayer::with_meter(&provider.meter("tests"));
    let router = Router::new()
        .route("/orders/{id}", get(|| async { "ok" }))
        .route("/fail", get(|| async { StatusCode::INTERNAL_SERVER_ERROR }))
        .layer(layer);
    for path in ["/orders/1", "/orders/2", "/fail"] {
        call(router.clone(), Request::get(path).body(Body::empty()).unwrap()).await;
    }
    provider.force_flush().unwrap();

    let metrics = exporter.get_finished_metrics().unwrap();
    let metric = metrics
        .iter()
        .flat_map(|r| r.scope_metrics())
        .flat_map(|s| s.metrics())
        .find(|m| m.name() == "http.server.request.duration")
        .expect("the histogram was exported");
    assert_eq!(metric.unit(), "s");
    let AggregatedMetrics::F64(MetricData::Histogram(histogram)) = metric.data() else {
        panic!("not an f64 histogram: {:?}", metric.data())
    };
    let mut points: Vec<(Vec<String>, u64)> = histogram
        .data_points()
        .map(|p| {
            let mut attributes: Vec<String> = p.attributes().map(|kv| format!("{}={}", kv.key, kv.value)).collect();
            attributes.sort();
            (attributes, p.count())
        })
        .collect();
    points.sort();
    assert_eq!(
        points,
        [
            (
                vec![
                    "error.type=500".to_owned(),
                    "http.request.method=GET".to_owned(),
                    "http.response.status_code=500".to_owned(),
                    "http.route=/fail".to_owned()
                ],
                1
            ),
            (
                vec![
                    "http.request.method=GET".to_owned(),
                    "http.response.status_code=200".to_owned(),
                    "http.route=/orders/{id}".to_owned()
                ],
                2
            ),
        ]
    );
}
