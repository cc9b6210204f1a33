//! W3C trace context between its three forms: the headers, tegu-core's lineage values
//! ([`TraceContext`], [`TraceState`]) and OpenTelemetry's [`SpanContext`].

use std::str::FromStr;

use http::{HeaderMap, HeaderValue};
use opentelemetry::trace::{self as otel, SpanContext, TraceContextExt, TraceFlags};
use tegu_core::lineage::{Lineage, TraceContext, TraceState, Travels};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The OpenTelemetry span context of a scope's trace context: `remote` when its span is one of
/// another process, with `state`'s entries where they are valid.
pub(crate) fn span_context(trace: &TraceContext, state: Option<&TraceState>, remote: bool) -> SpanContext {
    let state = state.and_then(|s| otel::TraceState::from_str(s.as_str()).ok()).unwrap_or_default();
    with_state(trace, state, remote)
}

fn with_state(trace: &TraceContext, state: otel::TraceState, remote: bool) -> SpanContext {
    SpanContext::new(
        otel::TraceId::from_bytes(trace.trace_id()),
        otel::SpanId::from_bytes(trace.span_id()),
        // `sampled` alone: W3C Trace Context Level 1, the one `TraceContext` implements.
        TraceFlags::new(trace.flags()),
        remote,
        state,
    )
}

/// The lineage values of an OpenTelemetry span context, if it is valid: the trace, and its
/// state when it has entries.
pub(crate) fn lineage_values(span: &SpanContext) -> Option<(TraceContext, Option<TraceState>)> {
    let trace =
        TraceContext::new(span.trace_id().to_bytes(), span.span_id().to_bytes(), span.trace_flags().to_u8()).ok()?;
    // A state longer than 512 characters (OpenTelemetry takes 32 entries of any length) is
    // trimmed as the W3C recommendation says.
    let state = TraceState::new(&span.trace_state().header()).ok().filter(|s| !s.as_str().is_empty());
    Some((trace, state))
}

/// The trace context of `headers`: a `traceparent` that [`TraceContext::parse`] takes (one
/// header: two are invalid) and, with it, a `tracestate` that OpenTelemetry's parser takes
/// (several headers are one list). Anything else is no trace context: a new trace starts.
pub(crate) fn extract(headers: &HeaderMap) -> Option<SpanContext> {
    let mut parents = headers.get_all(TraceContext::HEADER).iter();
    let (Some(parent), None) = (parents.next(), parents.next()) else { return None };
    let trace = TraceContext::parse(parent.to_str().ok()?).ok()?;
    let mut joined = String::new();
    for value in headers.get_all(TraceState::HEADER) {
        let Ok(value) = value.to_str() else { return Some(with_state(&trace, otel::TraceState::NONE, true)) };
        if !joined.is_empty() {
            joined.push(',');
        }
        joined.push_str(value);
    }
    // An invalid tracestate is dropped; the traceparent stays (W3C trace context, 3.3.1.1).
    let state = otel::TraceState::from_str(&joined).unwrap_or_default();
    Some(with_state(&trace, state, true))
}

/// The trace context of the current span, for the work it starts elsewhere: its trace and its
/// own span id, with its trace state.
///
/// The current `tracing` span's OpenTelemetry span when it has one (an
/// [`OpenTelemetryLayer`](tracing_opentelemetry::OpenTelemetryLayer) is installed and the span
/// is enabled); else the current scope's lineage (a request's scope seeded by
/// [`TraceLayer`](crate::TraceLayer), a handler's or job's scope that inherited one); else
/// `None`.
///
/// # Examples
///
/// ```
/// // Outside any span and any scope: no trace.
/// assert!(tegu_otel::current_trace().is_none());
/// ```
pub fn current_trace() -> Option<(TraceContext, Option<TraceState>)> {
    let span = tracing::Span::current();
    if !span.is_disabled() {
        let cx = span.context();
        if let Some(values) = lineage_values(cx.span().span_context()) {
            return Some(values);
        }
    }
    let lineage = Lineage::current();
    let trace = *lineage.get::<TraceContext>()?;
    Some((trace, lineage.get::<TraceState>().cloned()))
}

/// Writes the current span's trace context into `headers` (`traceparent`, and `tracestate`
/// when the trace has one), replacing what they had, for an outgoing HTTP or gRPC call: the
/// called service's span becomes a child of the current span. Writes nothing, and removes
/// nothing, when there is no current trace ([`current_trace`]).
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
///     let _call = tracing::info_span!("call inventory").entered();
///     let mut headers = http::HeaderMap::new();
///     tegu_otel::inject(&mut headers);
///     let (trace, _) = tegu_otel::current_trace().unwrap();
///     assert_eq!(headers["traceparent"], trace.to_string());
/// });
/// ```
pub fn inject(headers: &mut HeaderMap) {
    let Some((trace, state)) = current_trace() else { return };
    if let Ok(value) = HeaderValue::from_str(&trace.encode()) {
        headers.insert(TraceContext::HEADER, value);
    }
    match state.map(|s| HeaderValue::from_str(&s.encode())) {
        Some(Ok(value)) => {
            headers.insert(TraceState::HEADER, value);
        }
        _ => {
            headers.remove(TraceState::HEADER);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_valid_traceparent_is_a_remote_parent_with_its_state() {
        let span = extract(&headers(&[("traceparent", PARENT), ("tracestate", "a=1"), ("tracestate", "b=2")])).unwrap();
        assert_eq!(span.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(span.span_id().to_string(), "00f067aa0ba902b7");
        assert!(span.is_remote() && span.is_sampled());
        assert_eq!(span.trace_state().header(), "a=1,b=2");
        let (trace, state) = lineage_values(&span).unwrap();
        assert_eq!(trace.to_string(), PARENT);
        assert_eq!(state.unwrap().as_str(), "a=1,b=2");
    }

    #[test]
    fn an_invalid_tracestate_is_dropped_and_the_traceparent_kept() {
        let span = extract(&headers(&[("traceparent", PARENT), ("tracestate", "not a list entry")])).unwrap();
        assert_eq!(span.trace_state().header(), "");
        assert!(lineage_values(&span).unwrap().1.is_none());
    }

    #[test]
    fn no_traceparent_two_of_them_or_a_bad_one_is_no_context() {
        assert!(extract(&headers(&[])).is_none());
        assert!(extract(&headers(&[("tracestate", "a=1")])).is_none());
        assert!(extract(&headers(&[("traceparent", PARENT), ("traceparent", PARENT)])).is_none());
        for bad in [
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(extract(&headers(&[("traceparent", bad)])).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_flags_pass_through() {
        let unsampled = TraceContext::parse(PARENT).unwrap().with_flags(0);
        let span = span_context(&unsampled, Some(&TraceState::new("k=v").unwrap()), true);
        assert!(!span.is_sampled());
        assert_eq!(span.trace_state().header(), "k=v");
        assert_eq!(lineage_values(&span).unwrap().0, unsampled);
    }
}
