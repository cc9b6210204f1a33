//! The flagship example: todos per user, on an embedded SQLite database by default or on
//! PostgreSQL (`TODOS_DB__URL=postgres://…`, with the `postgres` feature), its events to every
//! instance through NATS with the `nats` feature (`TODOS_NATS__URL`). Neither feature is on by
//! default: a first `cargo run -p example-todos` compiles neither driver.
//!
//! - [`db::DbConfig`], [`HttpConfig`] (config sections): `config/todos.toml`, overridden by
//!   `TODOS_*` environment variables.
//! - [`db::Db`] (singleton): tegu-sqlx's data source for the configured database, connected by
//!   its async constructor when the App is built; the data source of tegu-tx's transactions.
//!   The request's transaction is begun by its first `#[transactional]` method and committed in
//!   its completion phase if the request succeeded (a failed COMMIT answers 500), rolled back if
//!   not, or after a panic or a disconnect. Reads of a request that did not write run on the
//!   pool, outside any transaction: they never wait for a writer.
//! - [`todo::RequestTracer`] (context): the request id and what the request did.
//! - [`todo::TodoRepository`], [`todo::TodoService`] (singletons) and [`todo::TodoController`];
//!   the service asks [`todo::Users`] (a trait; [`todo::OpenUsers`] by default, a fake in tests)
//!   whether a user exists.
//! - [`advice`]: the advice around the service's methods ([`advice::Timing`]), the
//!   [`advice::TodoCompleted`] event counted by [`advice::TodoStats`] (`GET /stats`), and the
//!   hourly [`advice::TodoPurger`] job, once per cluster.
//!
//! `cargo run -p example-todos` serves it on 127.0.0.1:7001.

pub mod advice;
pub mod db;
pub mod todo;

use std::path::PathBuf;

use serde::Deserialize;
use tegu_core::{App, AppBuilder, DiError, config_proto};

/// The `[http]` section of `config/todos.toml` (`TODOS_HTTP__ADDR`, `TODOS_HTTP__BACKLOG`,
/// `TODOS_HTTP__DRAIN_DELAY_SECS`).
#[config_proto(prefix = "http")]
#[derive(Debug, Deserialize)]
pub struct HttpConfig {
    /// Where the service listens.
    #[serde(default = "default_addr")]
    pub addr: String,
    /// How many connections the kernel queues before the service accepts them (capped by the
    /// kernel's `net.core.somaxconn`).
    #[serde(default = "default_backlog")]
    pub backlog: u32,
    /// How long the service goes on serving after SIGTERM, with `/health/ready` already 503,
    /// before it drains its connections (`tegu_http::Server::drain_delay`). Default: 0.
    #[serde(default)]
    pub drain_delay_secs: f64,
}

fn default_addr() -> String {
    "127.0.0.1:7001".to_owned()
}

fn default_backlog() -> u32 {
    tegu_http::DEFAULT_BACKLOG
}

impl HttpConfig {
    /// Binds the service's listener as this section says.
    ///
    /// # Errors
    ///
    /// The I/O error of binding `addr` (in use, not allowed).
    pub async fn listen(&self) -> std::io::Result<tokio::net::TcpListener> {
        tegu_http::listen(&self.addr, self.backlog).await
    }

    /// The drain delay, as a duration (negative counts as zero).
    pub fn drain_delay(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.drain_delay_secs).unwrap_or_default()
    }
}

/// The example's configuration file, `config/todos.toml` in its folder.
pub fn config_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/todos.toml")
}

/// The App's builder: every proto of the binary (they register themselves), configured by
/// [`config_file`] and `TODOS_*` environment variables; with the outbox to NATS
/// ([`with_nats`]) when `TODOS_NATS__URL` is set. Tests add `config_value`s on top.
pub fn builder() -> AppBuilder {
    let builder = App::builder().config_file_required(config_file()).config_env("TODOS_");
    if std::env::var_os("TODOS_NATS__URL").is_some() { with_nats(builder) } else { builder }
}

/// `builder` with the external events ([`advice::TodoCompleted`], [`advice::TodoCreated`])
/// going through the transactional outbox to NATS JetStream, and from there to every instance:
/// tegu-outbox's `Outbox` (its outbox is [`db::Db`]'s table) and tegu-nats' `JetStream`, set by
/// `[nats]` (`url`, `consumer`: this instance's name; `TODOS_NATS__URL`, `TODOS_NATS__CONSUMER`).
///
/// Without the `nats` feature (off by default; `--features nats` turns it on), this registers
/// instead a singleton whose factory fails, so that `build()` fails naming the feature rather
/// than keep the events to this instance.
#[cfg(feature = "nats")]
pub fn with_nats(builder: AppBuilder) -> AppBuilder {
    builder.register(tegu_outbox::Outbox::proto()).register(tegu_nats::JetStream::proto())
}

/// See the `nats` feature's [`with_nats`]: this build has no NATS support, so `build()` fails,
/// naming the feature.
#[cfg(not(feature = "nats"))]
pub fn with_nats(builder: AppBuilder) -> AppBuilder {
    /// What `build()` fails on: NATS is configured, the build cannot reach it.
    struct NatsFeatureMissing;
    builder.register(tegu_core::ProtoDef::singleton::<NatsFeatureMissing>(|_| {
        Err(DiError::ConfigInvalid {
            key: "nats.url".into(),
            section: "example-todos",
            message: "NATS is configured, but this build has no `nats` feature: \
                      cargo run -p example-todos --features nats"
                .into(),
            origin: Some("env TODOS_NATS__URL".into()),
        })
    }))
}

/// Builds the App with the configuration of [`builder`].
///
/// # Errors
///
/// [`DiError`] if the configuration or the object graph is broken, or the database cannot be
/// opened.
pub async fn app() -> Result<App, DiError> {
    builder().build().await
}

/// The curl commands `main` prints, for the service on `addr`.
pub fn try_it(addr: &str) -> String {
    let json = "-H 'content-type: application/json'";
    [
        format!("curl -i {addr}/users/ada/todos {json} -d '{{\"title\":\"write the docs\"}}'"),
        format!("curl -i {addr}/users/ada/todos"),
        format!("curl -i -X PATCH {addr}/users/ada/todos/1 {json} -d '{{\"done\":true}}'"),
        format!("curl -i {addr}/users/ada/todos/batch {json} -d '[{{\"title\":\"kept?\"}},{{\"title\":\"\"}}]'   # 400: rolled back"),
        format!("curl -i {addr}/users/ada/todos/import {json} -d '[[{{\"title\":\"a\"}}],[{{\"title\":\"b\"}},{{\"title\":\"\"}}]]'   # a saved, b rolled back"),
        format!("curl -i {addr}/stats"),
        format!("curl -i {addr}/health/ready   # also over HTTP/2: curl --http2-prior-knowledge"),
        format!("curl {addr}/metrics"),
        format!("curl -i -X DELETE {addr}/users/ada/todos/1"),
    ]
    .join("\n  ")
}
