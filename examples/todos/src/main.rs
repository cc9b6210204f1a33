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

use std::sync::Arc;

use todos::HttpConfig;
use todos::db::Db;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).init();
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
    // `/metrics` after the scope layer: rendering them opens no scope.
    let router = tegu_http::RouterBuilder::new(&app).build()?.route(
        "/metrics",
        axum::routing::get(move || async move {
            metrics.run_upkeep();
            metrics.render()
        }),
    );
    let listener = http.listen().await?;
    let addr = format!("http://{}", listener.local_addr()?);
    println!("todos on {addr}, database {}; try:\n  {}", db.shown(), todos::try_it(&addr));
    tegu_http::Server::new(app, router).drain_delay(http.drain_delay()).run(listener).await?;
    Ok(())
}
