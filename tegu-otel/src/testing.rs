//! Spans recorded in memory, for the tests of traced code (feature `testing`): a tracer
//! provider exporting each span to the SDK's in-memory exporter as it ends, the `tracing`
//! layer of this crate over it, and what tests read of the spans.
//!
//! # Examples
//!
//! ```
//! use tegu_otel::testing::{SpanRecorder, text};
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let recorder = SpanRecorder::new();
//! let subscriber = tracing_subscriber::registry().with(recorder.layer("tests"));
//! tracing::subscriber::with_default(subscriber, || {
//!     tracing::info_span!("checkout", order = 7).in_scope(|| {});
//! });
//! assert_eq!(text(&recorder.named("checkout"), "order"), "7");
//! ```

use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracer, SdkTracerProvider, SpanData};
use tracing_subscriber::registry::LookupSpan;

/// A tracer provider whose spans are kept in memory as they end.
#[derive(Debug, Clone)]
pub struct SpanRecorder {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
}

impl Default for SpanRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl SpanRecorder {
    /// A recorder with no span yet.
    pub fn new() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        SpanRecorder { exporter, provider }
    }

    /// This crate's `tracing` layer ([`crate::layer`]) over a tracer named `name` of the
    /// recorder's provider: the spans of a subscriber with it are recorded.
    pub fn layer<S>(
        &self,
        name: &'static str,
    ) -> tracing_opentelemetry::OpenTelemetryLayer<S, crate::LogFieldsOut<SdkTracer>>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        crate::layer(self.provider.tracer(name))
    }

    /// The spans that ended so far, in the order they ended.
    pub fn spans(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().expect("the in-memory exporter is not shut down")
    }

    /// The one server span that ended.
    ///
    /// # Panics
    ///
    /// If none or several did.
    pub fn server(&self) -> SpanData {
        let mut servers: Vec<_> = self.spans().into_iter().filter(|s| s.span_kind == SpanKind::Server).collect();
        assert_eq!(servers.len(), 1, "one server span: {servers:#?}");
        servers.remove(0)
    }

    /// The first span named `name` that ended.
    ///
    /// # Panics
    ///
    /// If none did.
    pub fn named(&self, name: &str) -> SpanData {
        let spans = self.spans();
        spans.iter().find(|s| s.name == name).cloned().unwrap_or_else(|| panic!("no span `{name}` in {spans:#?}"))
    }
}

/// The value of `span`'s attribute `key`.
pub fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.clone())
}

/// `span`'s attribute `key` as text (a string without quotes).
///
/// # Panics
///
/// If the span has no such attribute.
pub fn text(span: &SpanData, key: &str) -> String {
    attribute(span, key).map(|v| v.to_string()).unwrap_or_else(|| panic!("no `{key}` in {:#?}", span.attributes))
}
