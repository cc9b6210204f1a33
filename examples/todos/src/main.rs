//! Serves the todo example on 127.0.0.1:7001 (`TODOS_ADDR`), with its database in
//! `todos.sqlite3` (`TODOS_DB`). Ctrl-C stops it gracefully.

use todos::{Config, DbPath};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).init();
    let addr = std::env::var("TODOS_ADDR").unwrap_or_else(|_| "127.0.0.1:7001".to_owned());
    let app = todos::app(Config { db_path: DbPath::default() }).await?;
    println!("todos on http://{addr}; try:\n  {}", todos::try_it(&addr));
    di_http::serve(app, addr.as_str()).await?;
    Ok(())
}
