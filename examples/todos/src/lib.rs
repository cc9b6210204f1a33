//! The flagship example: todos per user on an embedded SQLite database.
//!
//! - [`db::Db`] (singleton): a writer and four read-only connections, opened when the App is
//!   built.
//! - [`db::UnitOfWork`] (context): the request's write transaction, begun on first write and
//!   ended in its completion hook: committed if the request succeeded (a failed COMMIT answers
//!   500), rolled back if not; its destroy hook rolls back after a panic or a disconnect. Reads
//!   of a request that did not write go through read-only connections, which never wait for a
//!   writer.
//! - [`todo::RequestTracer`] (context): the request id and what the request did.
//! - [`todo::TodoRepository`], [`todo::TodoService`] (singletons) and [`todo::TodoController`].
//!
//! `cargo run -p example-todos` serves it on 127.0.0.1:7001.

pub mod db;
pub mod todo;

use di_core::{App, DiError};

pub use db::{Config, DbPath};

/// Builds the App: every proto of the binary (they register themselves), with `config`.
///
/// # Errors
///
/// [`DiError`] if the object graph is broken or the database cannot be opened.
pub async fn app(config: Config) -> Result<App, DiError> {
    App::builder().override_with(config).build().await
}

/// The curl commands `main` prints, for the service on `addr`.
pub fn try_it(addr: &str) -> String {
    let json = "-H 'content-type: application/json'";
    [
        format!("curl -i {addr}/users/ada/todos {json} -d '{{\"title\":\"write the docs\"}}'"),
        format!("curl -i {addr}/users/ada/todos"),
        format!("curl -i -X PATCH {addr}/users/ada/todos/1 {json} -d '{{\"done\":true}}'"),
        format!("curl -i {addr}/users/ada/todos/batch {json} -d '[{{\"title\":\"kept?\"}},{{\"title\":\"\"}}]'   # 400: rolled back"),
        format!("curl -i -X DELETE {addr}/users/ada/todos/1"),
    ]
    .join("\n  ")
}
