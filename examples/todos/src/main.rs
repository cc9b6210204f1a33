//! Run with: cargo run -p example-todos
//!
//! Serves the todo example as `config/todos.toml` says: on 127.0.0.1:7001, with its database in
//! `examples/todos/todos.sqlite3` (both printed at start), over HTTP/1.1 and HTTP/2 (h2c) on
//! the same port. Environment variables override the file: `TODOS_HTTP__ADDR`,
//! `TODOS_HTTP__BACKLOG`, `TODOS_HTTP__DRAIN_DELAY_SECS`, `TODOS_DB__PATH`, `TODOS_DB__URL`
//! (`postgres://user:password@host/db` runs it on PostgreSQL, with `--features postgres`); `TODOS_PROFILE=prod` also reads
//! `config/todos.prod.toml`.
//!
//! Operating it: `GET /health/live` and `GET /health/ready` (the database answers a query),
//! `GET /metrics` (Prometheus' text format), the start-up timeline printed at start. SIGTERM or
//! Ctrl-C: readiness turns 503 at once, requests are still served for the drain delay (3 s),
//! then in-flight requests get 30 s; a second signal stops it at once.
//!
//! Logs and traces: the log lines go to stderr (the start-up report and the address to
//! stdout), each in the spans it belongs to, whose fields carry the request's lineage: a
//! request's `request{..}` span, and the `event handler{..}` span of each handler of its events
//! in this instance or another, have its `trace_id`, `tenant` (`x-tenant`) and `request_id`
//! (`x-request-id`, or one made up). Every request gets an OpenTelemetry server span in its
//! caller's trace (`traceparent`), and each handler's span is that span's child. The spans stay
//! in the process unless the binary is built with `--features otlp` and
//! `OTEL_EXPORTER_OTLP_ENDPOINT` names an OTLP/HTTP collector (`http://localhost:4318`): then
//! they are exported there, as service `todos`, with the metric `http.server.request.duration`.

use std::io::IsTerminal;
use std::sync::Arc;

use tegu_otel::opentelemetry::trace::TracerProvider as _;
use todos::HttpConfig;
use todos::db::Db;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The service's name in the exported spans.
const SERVICE: &str = "todos";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let telemetry = Telemetry::install()?;
    // Before the App is built: it registers its metrics with the recorder installed then.
    let metrics = Arc::new(metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?);
    let mut builder = todos::builder();
    if let Ok(profile) = std::env::var("TODOS_PROFILE") {
        builder = builder.profile(profile);
    }
    let app = builder.build().await?;
    println!("{}", app.startup_report());
    let db = app.get_object::<Db>()?;
    let http = app.get_object::<HttpConfig>()?;
    // `/metrics` after the scope layer and the server spans: rendering them opens no scope, and
    // the scrapes make no spans.
    let mut router = todos::router(todos::routes(&app))?.route(
        "/metrics",
        axum::routing::get(move || async move {
            metrics.run_upkeep();
            metrics.render()
        }),
    );
    // The dead letters' routes, with NATS and `TODOS_ADMIN_TOKEN` only.
    if let Some(admin) = todos::admin_routes(&app) {
        router = router.merge(admin);
    }
    let listener = http.listen().await?;
    let addr = format!("http://{}", listener.local_addr()?);
    println!("todos on {addr}, database {}; try:\n  {}", db.shown(), todos::try_it(&addr));
    tegu_http::Server::new(app, router).drain_delay(http.drain_delay()).run(listener).await?;
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    Ok(())
}

/// The `tracing` subscriber: log lines to stderr (colored on a terminal, without `NO_COLOR`), and
/// OpenTelemetry spans of the `tracing` spans, exported over OTLP when configured.
struct Telemetry {
    /// The exporter, when there is one.
    #[cfg(feature = "otlp")]
    otlp: Option<tegu_otel::otlp::Otlp>,
}

impl Telemetry {
    /// Installs the subscriber as the global default, with the tracer provider of OTLP when
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and the `otlp` feature on), else one that exports
    /// nothing: the spans still get their ids, which the requests' work and logs carry.
    fn install() -> Result<Telemetry, Box<dyn std::error::Error>> {
        let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok().filter(|e| !e.is_empty());
        #[cfg(feature = "otlp")]
        let otlp = endpoint
            .as_deref()
            .map(|endpoint| tegu_otel::otlp::install(endpoint, SERVICE))
            .transpose()
            .map_err(|e| e as Box<dyn std::error::Error>)?;
        #[cfg(feature = "otlp")]
        let tracer = match &otlp {
            Some(otlp) => otlp.tracer(SERVICE),
            None => opentelemetry_sdk::trace::SdkTracerProvider::builder().build().tracer(SERVICE),
        };
        #[cfg(not(feature = "otlp"))]
        let tracer = opentelemetry_sdk::trace::SdkTracerProvider::builder().build().tracer(SERVICE);
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()));
        tracing_subscriber::registry().with(logs).with(tegu_otel::layer(tracer)).with(LevelFilter::INFO).try_init()?;
        #[cfg(not(feature = "otlp"))]
        if endpoint.is_some() {
            tracing::warn!("OTEL_EXPORTER_OTLP_ENDPOINT is set, but this build exports nothing: --features otlp");
        }
        #[cfg(feature = "otlp")]
        if let Some(endpoint) = &endpoint {
            tracing::info!(endpoint = ?endpoint, "exporting spans and metrics over OTLP");
        }
        Ok(Telemetry {
            #[cfg(feature = "otlp")]
            otlp,
        })
    }

    /// Exports what is left, when there is an exporter.
    fn shutdown(self) {
        #[cfg(feature = "otlp")]
        if let Some(otlp) = self.otlp
            && let Err(error) = otlp.shutdown()
        {
            eprintln!("exporting the last spans failed: {error}");
        }
    }
}
