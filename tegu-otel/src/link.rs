//! The spans of the work a request causes, parented to the request's span.

use opentelemetry::trace::TraceContextExt;
use tegu_core::ProtoDef;
use tegu_core::lineage::{Lineage, LinkedWork, TraceContext, TraceLink, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::context;

/// Makes the span of each event handler's and job's scope that has a [`TraceContext`] in its
/// lineage a child of that context's span: the request's server span (seeded by
/// [`TraceLayer`](crate::TraceLayer)), in this instance or the one that emitted the event.
///
/// As the OpenTelemetry semantic conventions (v1.44.0) say:
///
/// - the span of a job, or of a handler of an event emitted in this process, is `INTERNAL`, and
///   its parent a span of this process (not a remote one);
/// - the span of a handler of an event a transport delivered (`EventBus::deliver_with`: from
///   another instance, or this one through a broker) is a messaging "process" span: `CONSUMER`,
///   with `messaging.operation.type` and `messaging.operation.name` `process`, a link to the
///   message's creation context (the span that emitted it) and, as the conventions allow for a
///   single message, that context as its remote parent. `messaging.system` and the destination
///   are the transport's to know, and left out; the span keeps its name, `event handler`.
///
/// It is the App's [`TraceLink`]: register it with [`OtelLink::proto`], which registers the
/// lineage types [`TraceContext`] and [`TraceState`] too, so that a request's scope keeps them
/// and its work inherits them.
///
/// # Examples
///
/// ```
/// use tegu_core::{App, lineage::{Lineage, TraceContext}};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().without_inventory().register(tegu_otel::OtelLink::proto()).build().await?;
/// let trace = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
/// let seen = app.scope().lineage(&Lineage::new().with(trace)).run(async { Lineage::current() }).await;
/// assert_eq!(seen.get::<TraceContext>(), Some(&trace));
/// # Ok(()) }
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct OtelLink;

impl OtelLink {
    /// The proto to register: `App::builder().register(OtelLink::proto())`. A singleton that
    /// provides `dyn TraceLink`, and brings the lineage types [`TraceContext`] and
    /// [`TraceState`] (once, however often they are asked for).
    pub fn proto() -> ProtoDef {
        ProtoDef::singleton::<OtelLink>(|_| Ok(OtelLink))
            .provides::<OtelLink, dyn TraceLink>(|link| link)
            .also(ProtoDef::lineage::<TraceContext>)
            .also(ProtoDef::lineage::<TraceState>)
    }
}

impl TraceLink for OtelLink {
    fn link(&self, span: &tracing::Span, lineage: &Lineage, work: LinkedWork) {
        let Some(trace) = lineage.get::<TraceContext>() else { return };
        let delivered = work == LinkedWork::Delivered;
        let parent = context::span_context(trace, lineage.get::<TraceState>(), delivered);
        if delivered {
            span.record("otel.kind", "consumer");
            span.set_attribute("messaging.operation.type", "process");
            span.set_attribute("messaging.operation.name", "process");
            span.add_link(parent.clone());
        }
        // `with_remote_span_context` takes any span context; the parent is remote only if it says so.
        if let Err(error) = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent)) {
            // No OpenTelemetry layer, a span filtered out, or one already started: the span
            // keeps its parent. The error names no value from outside.
            tracing::trace!(target: crate::http::TARGET, %error, "the span of a request's work keeps its parent");
        }
    }
}
