//! W3C trace context and OpenTelemetry for tegu: a request's trace follows its work.
//!
//! - **Requests**: [`TraceLayer`], a tower layer for axum and tonic, gives each request a
//!   server span in its caller's trace (`traceparent`, `tracestate`), named and described as the
//!   OpenTelemetry HTTP semantic conventions (v1.44.0) say, records `http.server.request.duration`, and
//!   seeds the request's scope with the span's [`TraceContext`](tegu_core::lineage::TraceContext).
//! - **Its work**: with [`OtelLink`] registered (`App::builder().register(OtelLink::proto())`),
//!   the span of each event handler and job that a request caused, in this instance or another
//!   (an outbox carries the trace context as headers), is a child of the request's span:
//!   `INTERNAL` in this instance, a messaging `CONSUMER` ("process") span for an event a
//!   transport delivered.
//! - **Outgoing calls**: [`inject`] writes the current span's `traceparent` and `tracestate`
//!   into a request's headers; [`current_trace`] gives its trace context.
//! - **Export**: [`layer`] is the `tracing` layer that makes OpenTelemetry spans of `tracing`
//!   spans; with the cargo feature `otlp`, `otlp::install` exports spans and metrics to a
//!   collector over OTLP/HTTP.
//!
//! # Setting up
//!
//! ```no_run
//! use opentelemetry::trace::TracerProvider as _;
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Any tracer provider: the SDK's with an exporter, or `tegu_otel::otlp::install(..)`'s.
//! let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
//! let subscriber = tracing_subscriber::registry().with(tegu_otel::layer(provider.tracer("todos")));
//! tracing::subscriber::set_global_default(subscriber)?;
//!
//! let app = tegu_core::App::builder().register(tegu_otel::OtelLink::proto()).build().await?;
//! // Outside tegu-http's context layer, inside the routing: `MatchedPath` names the span.
//! let router = tegu_http::router(&app).layer(tegu_otel::TraceLayer::new());
//! # let _ = router;
//! # Ok(()) }
//! ```
//!
//! The `opentelemetry` and `tracing-opentelemetry` crates this one is built on are re-exported,
//! so that an application names the same versions.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod context;
mod http;
mod link;
#[cfg(feature = "otlp")]
#[cfg_attr(docsrs, doc(cfg(feature = "otlp")))]
pub mod otlp;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod tracer;

pub use context::{current_trace, inject};
pub use http::{ResponseFuture, TARGET, TraceLayer, TraceService};
pub use link::OtelLink;
pub use tracer::{LogFieldsOut, LogFieldsOutSpan};
pub use {opentelemetry, tracing_opentelemetry};

use tracing_subscriber::registry::LookupSpan;

/// The guide's chapter on context that travels (`docs/guide/lineage.md`), compiled and run as
/// doctests here, where tegu-core, tegu-http and this crate are all in reach.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guide/lineage.md")]
pub struct GuideLineage;

/// The `tracing` layer that makes an OpenTelemetry span of each `tracing` span, with
/// `tracer`: [`tracing_opentelemetry::layer`] with that tracer and its defaults (among them:
/// entering a span makes its OpenTelemetry context current). [`TraceLayer`] and [`OtelLink`]
/// set the parents of the spans it makes. Each field of a span is an attribute, but for the
/// `trace_id` tegu's spans carry for their log lines ([`LogFieldsOut`]): the span's own trace
/// id is that.
///
/// # Examples
///
/// ```
/// use opentelemetry::trace::TracerProvider as _;
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
/// let subscriber = tracing_subscriber::registry().with(tegu_otel::layer(provider.tracer("example")));
/// tracing::subscriber::with_default(subscriber, || {
///     let _span = tracing::info_span!("work").entered();
///     assert!(tegu_otel::current_trace().is_some());
/// });
/// ```
pub fn layer<S, T>(tracer: T) -> tracing_opentelemetry::OpenTelemetryLayer<S, LogFieldsOut<T>>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    T: opentelemetry::trace::Tracer + 'static,
    T::Span: Send + Sync,
{
    tracing_opentelemetry::layer().with_tracer(LogFieldsOut::new(tracer))
}
