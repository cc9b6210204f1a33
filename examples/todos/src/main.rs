//! Run with: cargo run -p example-todos
//!
//! Serves the todo example on 127.0.0.1:7001 (`TODOS_ADDR`), with its database in
//! `examples/todos/todos.sqlite3` (`TODOS_DB`; the path is printed at start). Ctrl-C or SIGTERM
//! stops it: in-flight requests get 30 s, a second signal stops it at once.

use todos::{Config, DbPath};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).init();
    let addr = std::env::var("TODOS_ADDR").unwrap_or_else(|_| "127.0.0.1:7001".to_owned());
    let db_path = DbPath::default();
    let app = todos::app(Config { db_path: db_path.clone() }).await?;
    let router = di_http::RouterBuilder::new(&app).build()?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let addr = format!("http://{}", listener.local_addr()?);
    println!("todos on {addr}, database {}; try:\n  {}", db_path.0, todos::try_it(&addr));
    di_http::Server::new(app, router).run(listener).await?;
    Ok(())
}
