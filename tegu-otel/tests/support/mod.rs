//! What the tests share: a `tracing` subscriber for the current thread only, with the
//! OpenTelemetry layer exporting to the SDK's in-memory exporter and the log lines in a buffer.

#![allow(dead_code, unreachable_pub)]

use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tegu_test_support::LogBuffer;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;

pub const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const CALLER_SPAN: &str = "00f067aa0ba902b7";
pub const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Spans exported as they end, and log lines (span events too), while it lives: the default
/// subscriber of this thread only (a current-thread runtime runs the test's tasks on it).
pub struct Otel {
    exporter: InMemorySpanExporter,
    logs: LogBuffer,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Otel {
    pub fn install() -> Otel {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        let logs = LogBuffer::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::registry().with(tegu_otel::layer(provider.tracer("tests"))).with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
                .with_writer(move || writer.clone()),
        );
        Otel { exporter, logs, _guard: tracing::subscriber::set_default(subscriber) }
    }

    /// The spans that ended so far.
    pub fn spans(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().unwrap()
    }

    /// The one server span that ended.
    pub fn server(&self) -> SpanData {
        let mut servers: Vec<_> = self.spans().into_iter().filter(|s| s.span_kind == SpanKind::Server).collect();
        assert_eq!(servers.len(), 1, "{servers:#?}");
        servers.remove(0)
    }

    /// The span named `name` that ended.
    pub fn named(&self, name: &str) -> SpanData {
        let spans = self.spans();
        spans.iter().find(|s| s.name == name).cloned().unwrap_or_else(|| panic!("no span `{name}` in {spans:#?}"))
    }

    pub fn logs(&self) -> String {
        self.logs.contents()
    }
}

/// The value of `span`'s attribute `key`.
pub fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes.iter().find(|kv| kv.key == Key::from(key.to_owned())).map(|kv| kv.value.clone())
}

/// `span`'s attribute `key` as text.
pub fn text(span: &SpanData, key: &str) -> String {
    attribute(span, key).map(|v| v.to_string()).unwrap_or_else(|| panic!("no `{key}` in {:#?}", span.attributes))
}
