//! What the tests share: a `tracing` subscriber for the current thread only, with the
//! OpenTelemetry layer over a `SpanRecorder` and the log lines in a buffer.

#![allow(dead_code, unreachable_pub, unused_imports)]

use opentelemetry_sdk::trace::SpanData;
use tegu_otel::testing::SpanRecorder;
pub use tegu_otel::testing::{attribute, text};
use tegu_test_support::LogBuffer;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;

pub const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const CALLER_SPAN: &str = "00f067aa0ba902b7";
pub const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Spans exported as they end, and log lines (span events too), while it lives: the default
/// subscriber of this thread only (a current-thread runtime runs the test's tasks on it).
pub struct Otel {
    recorder: SpanRecorder,
    logs: LogBuffer,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Otel {
    pub fn install() -> Otel {
        let recorder = SpanRecorder::new();
        let logs = LogBuffer::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::registry().with(recorder.layer("tests")).with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
                .with_writer(move || writer.clone()),
        );
        Otel { recorder, logs, _guard: tracing::subscriber::set_default(subscriber) }
    }

    /// The spans that ended so far.
    pub fn spans(&self) -> Vec<SpanData> {
        self.recorder.spans()
    }

    /// The one server span that ended.
    pub fn server(&self) -> SpanData {
        self.recorder.server()
    }

    /// The span named `name` that ended.
    pub fn named(&self, name: &str) -> SpanData {
        self.recorder.named(name)
    }

    pub fn logs(&self) -> String {
        self.logs.contents()
    }
}
