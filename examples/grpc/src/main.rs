//! Run with: cargo run -p example-grpc
//!
//! Serves the todo example's HTTP API and its gRPC service (`todos.v1.Todos`) on one port:
//! `GRPC_ADDR`, default 127.0.0.1:7002. The rest of the configuration is the todo example's
//! (`examples/todos/config/todos.toml`, `TODOS_*` environment variables).

use todos::db::Db;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).init();
    let app = todos::builder().build().await?;
    let db = app.get_object::<Db>()?;
    let router = grpc_todos::router(&app)?;
    let addr = std::env::var("GRPC_ADDR").unwrap_or_else(|_| "127.0.0.1:7002".to_owned());
    let listener = tegu_http::listen(addr, tegu_http::DEFAULT_BACKLOG).await?;
    let addr = format!("http://{}", listener.local_addr()?);
    println!(
        "todos over gRPC (todos.v1.Todos) and HTTP on {addr}, database {}\n  curl -i {addr}/users/ada/todos\n  \
         call it with the test client: cargo test -p example-grpc",
        db.shown()
    );
    tegu_http::Server::new(app, router).run(listener).await?;
    Ok(())
}
