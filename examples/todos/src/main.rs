//! Run with: cargo run -p example-todos
//!
//! Serves the todo example as `config/todos.toml` says: on 127.0.0.1:7001, with its database in
//! `examples/todos/todos.sqlite3` (both printed at start). Environment variables override the
//! file: `TODOS_HTTP__ADDR`, `TODOS_HTTP__BACKLOG`, `TODOS_DB__PATH`; `TODOS_PROFILE=prod` also reads
//! `config/todos.prod.toml`. Ctrl-C or SIGTERM stops it: in-flight requests get 30 s, a second
//! signal stops it at once.

use todos::HttpConfig;
use todos::db::Db;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).init();
    let mut builder = todos::builder();
    if let Ok(profile) = std::env::var("TODOS_PROFILE") {
        builder = builder.profile(profile);
    }
    let app = builder.build().await?;
    let db = app.get_object::<Db>()?;
    let router = di_http::RouterBuilder::new(&app).build()?;
    let listener = app.get_object::<HttpConfig>()?.listen().await?;
    let addr = format!("http://{}", listener.local_addr()?);
    println!("todos on {addr}, database {}; try:\n  {}", db.file().display(), todos::try_it(&addr));
    di_http::Server::new(app, router).run(listener).await?;
    Ok(())
}
