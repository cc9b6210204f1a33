//! The server span of each HTTP request (gRPC included), its caller's trace context, and the
//! request-duration histogram.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::extract::MatchedPath;
use http::{Method, Request, Response, Version};
use opentelemetry::metrics::{Histogram, Meter};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::{InstrumentationScope, KeyValue};
use pin_project_lite::pin_project;
use tegu_core::lineage::Lineage;
use tower_layer::Layer;
use tower_service::Service;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::context;

/// The `tracing` target of the server spans: a filter names it to keep or drop them.
pub const TARGET: &str = "tegu_otel::http";

/// The histogram's bucket boundaries, in seconds: the ones the HTTP semantic conventions
/// advise for `http.server.request.duration`.
const BOUNDARIES: [f64; 14] = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];

/// A tower layer that gives each HTTP request a server span, in the trace of its caller: for
/// axum and tonic, whose services take `http::Request`s.
///
/// For each request it:
///
/// - reads the caller's trace context from `traceparent` and `tracestate` (W3C trace context);
///   a missing or invalid one starts a new trace, and is not logged;
/// - opens a `tracing` span (target [`TARGET`], level `INFO`) that the OpenTelemetry layer
///   ([`layer`](crate::layer)) turns into a server span, named and described as the OpenTelemetry
///   HTTP semantic conventions (v1.44.0, "HTTP server span") say: `{method} {route}`
///   (`GET /users/{id}`) when axum matched a route, else `{method}`. Its fields:
///   `otel.kind = "server"`, `http.request.method`, `http.route`, `network.protocol.version`,
///   `http.response.status_code` (when the response is ready), `otel.status_code = "ERROR"` and
///   `error.type` on a 5xx answer or a service error, and `trace_id` (32 hex digits), a plain
///   field so that log lines in the request carry it. Its attributes only, kept out of log lines
///   since a client wrote them: `url.path`; `url.query` when the target has a query, the values
///   of `X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token`, `sig` and
///   `X-Goog-Signature` replaced by `REDACTED`; and `url.scheme`, the original request's
///   (`Forwarded`'s `proto`, else `X-Forwarded-Proto`), else the target's, else `http`;
/// - sets the span's parent to the caller's span (none without a trace context: a server span
///   is a trace's root or a remote span's child);
/// - puts a [`Lineage`] in the request's extensions with the [`TraceContext`] of the span (the
///   trace's id and the **server span's own id**) and the caller's [`TraceState`], merged into
///   one already there: tegu-http seeds the request's scope with it, so that the event handlers
///   and jobs the request causes, here or in another instance, are children of this span (with
///   [`OtelLink`](crate::OtelLink) registered);
/// - runs the inner service in the span, and records the request's duration in the histogram
///   `http.server.request.duration` (seconds; attributes `http.request.method`, `http.route`,
///   `http.response.status_code`, `error.type`).
///
/// Without an OpenTelemetry layer (or with the span filtered out), the span has no id of its
/// own: the lineage then carries the caller's trace context as it came.
///
/// **Where it goes**: around the routes, so that axum's `MatchedPath` is known: `.layer(..)` on
/// the axum `Router` (tegu-http's router included: `tegu_http::router(&app).layer(TraceLayer::new())`
/// puts it outside tegu-http's context layer, which then finds the lineage). Around a whole
/// server (tonic's `Server::builder().layer(..)`), the span is named `{method}` only.
///
/// [`TraceContext`]: tegu_core::lineage::TraceContext
/// [`TraceState`]: tegu_core::lineage::TraceState
///
/// # Examples
///
/// ```
/// use axum::{Router, routing::get};
/// use tegu_core::lineage::{Lineage, TraceContext};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A handler that reads the lineage the layer put in the request.
/// async fn trace(lineage: axum::Extension<Lineage>) -> String {
///     lineage.get::<TraceContext>().map(TraceContext::trace_id_hex).unwrap_or_default()
/// }
/// let router = Router::new().route("/trace", get(trace)).layer(tegu_otel::TraceLayer::new());
/// let request = http::Request::get("/trace")
///     .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
///     .body(axum::body::Body::empty())?;
/// let response = router.oneshot(request).await?;
/// let body = axum::body::to_bytes(response.into_body(), 1024).await?;
/// assert_eq!(body, "4bf92f3577b34da6a3ce929d0e0e4736");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TraceLayer {
    duration: Histogram<f64>,
}

impl TraceLayer {
    /// The layer, its histogram made by the global meter provider's meter `tegu-otel`: install
    /// the meter provider (`opentelemetry::global::set_meter_provider`) before making it, or the
    /// histogram records nothing.
    pub fn new() -> Self {
        let scope =
            InstrumentationScope::builder(env!("CARGO_PKG_NAME")).with_version(env!("CARGO_PKG_VERSION")).build();
        Self::with_meter(&opentelemetry::global::meter_with_scope(scope))
    }

    /// The layer, its histogram made by `meter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use opentelemetry::metrics::MeterProvider as _;
    ///
    /// let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder().build();
    /// let layer = tegu_otel::TraceLayer::with_meter(&provider.meter("my-service"));
    /// # let _ = layer;
    /// ```
    pub fn with_meter(meter: &Meter) -> Self {
        let duration = meter
            .f64_histogram("http.server.request.duration")
            .with_unit("s")
            .with_description("Duration of HTTP server requests.")
            .with_boundaries(BOUNDARIES.to_vec())
            .build();
        TraceLayer { duration }
    }
}

impl Default for TraceLayer {
    fn default() -> Self {
        TraceLayer::new()
    }
}

impl fmt::Debug for TraceLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for TraceLayer {
    type Service = TraceService<S>;

    fn layer(&self, inner: S) -> TraceService<S> {
        TraceService { inner, duration: self.duration.clone() }
    }
}

/// The service of [`TraceLayer`]: the inner service, each request in its server span.
#[derive(Clone)]
pub struct TraceService<S> {
    inner: S,
    duration: Histogram<f64>,
}

impl<S: fmt::Debug> fmt::Debug for TraceService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceService").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<S, B, ResB> Service<Request<B>> for TraceService<S>
where
    S: Service<Request<B>, Response = Response<ResB>>,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let start = Instant::now();
        let method = known_method(request.method());
        let route = request.extensions().get::<MatchedPath>().map(|path| path.as_str().to_owned());
        let name = match (method, &route) {
            (Some(method), Some(route)) => format!("{method} {route}"),
            (None, Some(route)) => format!("HTTP {route}"),
            (Some(method), None) => method.to_owned(),
            (None, None) => "HTTP".to_owned(),
        };
        let span = tracing::info_span!(
            target: TARGET,
            "http.server.request",
            otel.name = name.as_str(),
            otel.kind = "server",
            http.request.method = method.unwrap_or("_OTHER"),
            http.request.method_original = Empty,
            http.route = route.as_deref(),
            network.protocol.version = protocol_version(request.version()),
            http.response.status_code = Empty,
            otel.status_code = Empty,
            error.type = Empty,
            trace_id = Empty,
        );
        if method.is_none() {
            span.record("http.request.method_original", request.method().as_str());
        }
        // Attributes, not fields: a client wrote them, and a log line would show them as text.
        if !span.is_disabled() {
            span.set_attribute("url.scheme", scheme(&request).into_owned());
            span.set_attribute("url.path", request.uri().path().to_owned());
            if let Some(query) = request.uri().query() {
                span.set_attribute("url.query", redacted(query).into_owned());
            }
        }

        let caller = context::extract(request.headers());
        // The caller's span, or none: a new trace even inside another span.
        let parent = match &caller {
            Some(caller) => opentelemetry::Context::new().with_remote_span_context(caller.clone()),
            None => opentelemetry::Context::new(),
        };
        // Fails only without an OpenTelemetry layer, or with the span filtered out: nothing to parent.
        let _ = span.set_parent(parent);
        // `context()` starts the OpenTelemetry span (after `set_parent`, which it would refuse
        // then): its id is the one the request's work is parented to.
        let own = if span.is_disabled() { None } else { context::lineage_values(span.context().span().span_context()) };
        if let Some((trace, state)) = own.or_else(|| caller.as_ref().and_then(context::lineage_values)) {
            span.record("trace_id", trace.trace_id_hex().as_str());
            let extensions = request.extensions_mut();
            let mut lineage = extensions.remove::<Lineage>().unwrap_or_default().with(trace);
            if let Some(state) = state {
                lineage = lineage.with(state);
            }
            extensions.insert(lineage);
        }

        let inner = span.in_scope(|| self.inner.call(request));
        ResponseFuture {
            inner,
            span,
            start,
            method: method.unwrap_or("_OTHER"),
            route,
            duration: self.duration.clone(),
        }
    }
}

pin_project! {
    /// The future of [`TraceService`]: the inner service's, polled in the request's span; the
    /// response's status recorded in the span and the histogram when it is ready.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        span: Span,
        start: Instant,
        method: &'static str,
        route: Option<String>,
        duration: Histogram<f64>,
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").field("span", &self.span).finish_non_exhaustive()
    }
}

impl<F, ResB, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<ResB>, E>>,
{
    type Output = Result<Response<ResB>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let result = ready!(this.inner.poll(cx));
        let mut attributes = Vec::with_capacity(4);
        attributes.push(KeyValue::new("http.request.method", *this.method));
        if let Some(route) = this.route.take() {
            attributes.push(KeyValue::new("http.route", route));
        }
        let error_type = match &result {
            Ok(response) => {
                let status = response.status();
                this.span.record("http.response.status_code", status.as_u16());
                attributes.push(KeyValue::new("http.response.status_code", i64::from(status.as_u16())));
                // A 4xx is the client's error, not the server span's (semantic conventions).
                status.is_server_error().then(|| status.as_str().to_owned())
            }
            Err(_) => Some("_OTHER".to_owned()),
        };
        if let Some(error_type) = error_type {
            this.span.record("otel.status_code", "ERROR");
            this.span.record("error.type", error_type.as_str());
            attributes.push(KeyValue::new("error.type", error_type));
        }
        this.duration.record(this.start.elapsed().as_secs_f64(), &attributes);
        Poll::Ready(result)
    }
}

/// The method as the semantic conventions name it, if it is one of the known ones (others are
/// `_OTHER`, with the original in `http.request.method_original`).
fn known_method(method: &Method) -> Option<&'static str> {
    Some(match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => return None,
    })
}

/// The scheme of the original request, as the HTTP server span's `url.scheme` is: `Forwarded`'s
/// first `proto`, else `X-Forwarded-Proto`'s first value, else the target's scheme (HTTP/2, an
/// absolute-form target), else `http`. A value that is no scheme (RFC 3986: a letter, then
/// letters, digits, `+`, `-`, `.`) is passed over; one is lowercased.
fn scheme<B>(request: &Request<B>) -> Cow<'_, str> {
    let headers = request.headers();
    let forwarded = headers.get(http::header::FORWARDED).and_then(|v| v.to_str().ok()).and_then(|v| {
        // The first element (the client's side), then its `proto` pair.
        let first = v.split(',').next()?;
        first.split(';').find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            name.eq_ignore_ascii_case("proto").then(|| value.trim_matches('"'))
        })
    });
    let x_forwarded = || {
        headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).and_then(|v| v.split(',').next()).map(str::trim)
    };
    let found = forwarded
        .filter(|s| is_scheme(s))
        .or_else(|| x_forwarded().filter(|s| is_scheme(s)))
        .or(request.uri().scheme_str());
    match found {
        Some(scheme) if scheme.bytes().any(|b| b.is_ascii_uppercase()) => Cow::Owned(scheme.to_ascii_lowercase()),
        Some(scheme) => Cow::Borrowed(scheme),
        None => Cow::Borrowed("http"),
    }
}

fn is_scheme(s: &str) -> bool {
    s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// The query keys whose values the HTTP semantic conventions (v1.44.0, `url.query`) redact by
/// default; matched case-sensitively.
const SENSITIVE_QUERY_KEYS: [&str; 5] =
    ["X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "sig", "X-Goog-Signature"];

/// `query` with the values of [`SENSITIVE_QUERY_KEYS`] replaced by `REDACTED`, their keys kept.
fn redacted(query: &str) -> Cow<'_, str> {
    let sensitive = |pair: &str| SENSITIVE_QUERY_KEYS.contains(&pair.split_once('=').map_or(pair, |(key, _)| key));
    if !query.split('&').any(|pair| pair.contains('=') && sensitive(pair)) {
        return Cow::Borrowed(query);
    }
    let pairs: Vec<Cow<'_, str>> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if SENSITIVE_QUERY_KEYS.contains(&key) => Cow::Owned(format!("{key}=REDACTED")),
            _ => Cow::Borrowed(pair),
        })
        .collect();
    Cow::Owned(pairs.join("&"))
}

fn protocol_version(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "0.9",
        Version::HTTP_10 => "1.0",
        Version::HTTP_2 => "2",
        Version::HTTP_3 => "3",
        _ => "1.1",
    }
}
