//! The tracer [`layer`](crate::layer) gives the OpenTelemetry layer: the application's, with
//! the `tracing` fields that only log lines need kept out of span attributes.

use std::borrow::Cow;
use std::time::SystemTime;

use opentelemetry::trace::{self as otel, SpanBuilder, SpanContext, Status};
use opentelemetry::{Context, KeyValue};

/// The `tracing` fields that repeat what a span is: `trace_id`, which tegu's spans carry so that
/// every log line has it, is the OpenTelemetry span's own trace id.
const LOG_ONLY: [&str; 1] = ["trace_id"];

fn kept(attribute: &KeyValue) -> bool {
    !LOG_ONLY.contains(&attribute.key.as_str())
}

/// A tracer that makes its spans with `T`, without the attributes the OpenTelemetry layer makes
/// of `tracing` fields only log lines need: `trace_id` (tegu's spans carry it so that every log
/// line has it; a span's trace id is its own, so the attribute would say it twice). What
/// [`layer`](crate::layer) wraps its tracer in.
///
/// # Examples
///
/// ```
/// use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
/// use opentelemetry::KeyValue;
///
/// let exporter = opentelemetry_sdk::trace::InMemorySpanExporter::default();
/// let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
/// let tracer = tegu_otel::LogFieldsOut::new(provider.tracer("example"));
/// let mut span = tracer.start("work");
/// span.set_attribute(KeyValue::new("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"));
/// span.set_attribute(KeyValue::new("tenant", "acme"));
/// span.end();
/// let spans = exporter.get_finished_spans().unwrap();
/// assert_eq!(spans[0].attributes, [KeyValue::new("tenant", "acme")]);
/// ```
#[derive(Clone, Debug)]
pub struct LogFieldsOut<T>(T);

impl<T> LogFieldsOut<T> {
    /// `tracer`, its spans without the log-only attributes.
    pub fn new(tracer: T) -> Self {
        LogFieldsOut(tracer)
    }
}

impl<T: otel::Tracer> otel::Tracer for LogFieldsOut<T> {
    type Span = LogFieldsOutSpan<T::Span>;

    fn build_with_context(&self, mut builder: SpanBuilder, parent_cx: &Context) -> Self::Span {
        if let Some(attributes) = &mut builder.attributes {
            attributes.retain(kept);
        }
        LogFieldsOutSpan(self.0.build_with_context(builder, parent_cx))
    }
}

/// A span of [`LogFieldsOut`]: `S`, which it passes every call but a log-only attribute.
#[derive(Debug)]
pub struct LogFieldsOutSpan<S>(S);

impl<S: otel::Span> otel::Span for LogFieldsOutSpan<S> {
    fn add_event_with_timestamp<N>(&mut self, name: N, timestamp: SystemTime, attributes: Vec<KeyValue>)
    where
        N: Into<Cow<'static, str>>,
    {
        self.0.add_event_with_timestamp(name, timestamp, attributes);
    }

    fn span_context(&self) -> &SpanContext {
        self.0.span_context()
    }

    fn is_recording(&self) -> bool {
        self.0.is_recording()
    }

    fn set_attribute(&mut self, attribute: KeyValue) {
        if kept(&attribute) {
            self.0.set_attribute(attribute);
        }
    }

    fn set_status(&mut self, status: Status) {
        self.0.set_status(status);
    }

    fn update_name<N>(&mut self, new_name: N)
    where
        N: Into<Cow<'static, str>>,
    {
        self.0.update_name(new_name);
    }

    fn add_link(&mut self, span_context: SpanContext, attributes: Vec<KeyValue>) {
        self.0.add_link(span_context, attributes);
    }

    fn end_with_timestamp(&mut self, timestamp: SystemTime) {
        self.0.end_with_timestamp(timestamp);
    }
}
