//! Spans and metrics exported to an OpenTelemetry collector over OTLP/HTTP (protobuf): cargo
//! feature `otlp`.
//!
//! The transport is OTLP/HTTP with `opentelemetry-otlp`'s blocking HTTP client, which the SDK's
//! batch span processor and periodic metric reader drive from threads of their own: no gRPC
//! stack, and no TLS (a collector beside the service, on `http://`).

use std::fmt;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use tegu_core::error::BoxError;
use tracing_subscriber::registry::LookupSpan;

/// How long an export may take before it is given up.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The providers [`install`] set up: spans and metrics on their way to the collector. Keep it
/// until the service ends, then [`shutdown`](Self::shutdown) it, which exports what is left.
#[derive(Clone)]
pub struct Otlp {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
}

impl fmt::Debug for Otlp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Otlp").finish_non_exhaustive()
    }
}

/// Exports spans to `{endpoint}/v1/traces` and metrics to `{endpoint}/v1/metrics` (an OTLP/HTTP
/// collector's base URL, `http://localhost:4318`), as service `service_name`, and makes both
/// providers the global ones: [`TraceLayer::new`](crate::TraceLayer::new) made after it records
/// its histogram in the exported meter provider. Spans are sent in batches from a thread of
/// their own, metrics every 60 seconds (`OTEL_METRIC_EXPORT_INTERVAL` changes it).
///
/// Put [`Otlp::layer`] in the `tracing` subscriber so that `tracing` spans are exported.
///
/// # Errors
///
/// When `endpoint` is no URL, or the HTTP client cannot be made.
///
/// # Examples
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt;
///
/// # fn main() -> Result<(), tegu_core::error::BoxError> {
/// let otlp = tegu_otel::otlp::install("http://localhost:4318", "todos")?;
/// let subscriber = tracing_subscriber::registry().with(otlp.layer());
/// tracing::subscriber::set_global_default(subscriber)?;
/// // ... serve ...
/// otlp.shutdown()?;
/// # Ok(()) }
/// ```
pub fn install(endpoint: &str, service_name: &str) -> Result<Otlp, BoxError> {
    let resource = Resource::builder().with_service_name(service_name.to_owned()).build();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(signal_url(endpoint, "traces"))
        .with_timeout(TIMEOUT)
        .build()?;
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_endpoint(signal_url(endpoint, "metrics"))
        .with_timeout(TIMEOUT)
        .build()?;
    let tracer_provider =
        SdkTracerProvider::builder().with_resource(resource.clone()).with_batch_exporter(spans).build();
    let meter_provider = SdkMeterProvider::builder().with_resource(resource).with_periodic_exporter(metrics).build();
    opentelemetry::global::set_tracer_provider(tracer_provider.clone());
    opentelemetry::global::set_meter_provider(meter_provider.clone());
    Ok(Otlp { tracer_provider, meter_provider })
}

/// `{endpoint}/v1/{signal}`, one slash between them.
fn signal_url(endpoint: &str, signal: &str) -> String {
    format!("{}/v1/{signal}", endpoint.trim_end_matches('/'))
}

impl Otlp {
    /// A tracer of the exported provider, its instrumentation scope named `name`.
    pub fn tracer(&self, name: &'static str) -> Tracer {
        self.tracer_provider.tracer(name)
    }

    /// The `tracing` layer ([`crate::layer`]) whose spans are exported.
    pub fn layer<S>(&self) -> tracing_opentelemetry::OpenTelemetryLayer<S, crate::LogFieldsOut<Tracer>>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        crate::layer(self.tracer(env!("CARGO_PKG_NAME")))
    }

    /// The exported tracer provider.
    pub fn tracer_provider(&self) -> &SdkTracerProvider {
        &self.tracer_provider
    }

    /// The exported meter provider.
    pub fn meter_provider(&self) -> &SdkMeterProvider {
        &self.meter_provider
    }

    /// Exports what is waiting now, without stopping.
    ///
    /// # Errors
    ///
    /// When an export failed or timed out.
    pub fn flush(&self) -> Result<(), BoxError> {
        self.tracer_provider.force_flush()?;
        self.meter_provider.force_flush()?;
        Ok(())
    }

    /// Exports what is left and stops: later spans and measurements are dropped. Blocks the
    /// thread until the exports end (at most their timeout).
    ///
    /// # Errors
    ///
    /// When an export failed, or the providers were shut down already.
    pub fn shutdown(&self) -> Result<(), BoxError> {
        let spans = self.tracer_provider.shutdown();
        let metrics = self.meter_provider.shutdown();
        spans?;
        metrics?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_signal_path_follows_the_base_url() {
        assert_eq!(super::signal_url("http://localhost:4318", "traces"), "http://localhost:4318/v1/traces");
        assert_eq!(super::signal_url("http://collector:4318/", "metrics"), "http://collector:4318/v1/metrics");
    }
}
