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
//! # Context that travels
//!
//! Each request's *lineage* (its tenant, its W3C trace context, its request id) follows the
//! work it causes: its event handlers, in this instance and, through the outbox and NATS, in
//! every other.
//!
//! - **Tenants.** A request names its tenant in the header `x-tenant` ([`TENANT_HEADER`]; read by
//!   tegu-http, see [`routes`]); one that names none is served as the tenant `default`
//!   ([`DEFAULT_TENANT`]), so that the API works as it did before tenants, and a value that is
//!   no tenant key (`acme" admin=true`) is answered 400. Todos are stored per tenant (the
//!   column `tenant`; a table of an earlier version gains it, its todos `default`'s), and every
//!   query of [`todo::TodoRepository`] is the request's tenant's: a todo of `acme` is not found
//!   (404) for `globex`. [`advice::TodoStats`] counts per tenant too, reading the tenant of the
//!   request that emitted the event, in whichever instance handles it.
//! - **Traces.** [`router`] gives each request a server span in its caller's trace (tegu-otel's
//!   `TraceLayer`, from `traceparent`), and [`builder`] registers tegu-otel's `OtelLink`, so the
//!   span of each event handler a request caused is a child of the request's span, in every
//!   instance; the handler's log lines carry its span's fields `trace_id`, `tenant` and
//!   `request_id`, the request's. `main` exports the spans over OTLP when built with the `otlp`
//!   feature and `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//!
//! `cargo run -p example-todos` serves it on 127.0.0.1:7001.

pub mod advice;
pub mod db;
pub mod todo;

use std::path::PathBuf;

use serde::Deserialize;
use tegu_core::lineage::Tenant;
use tegu_core::{App, AppBuilder, ContextRef, DiError, config_proto};
use tegu_http::{RouteError, RouterBuilder, TenantFrom};

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
/// [`config_file`] and `TODOS_*` environment variables; with tegu-otel's `OtelLink` (the span of
/// each event handler is a child of the span of the request that caused it, here or in another
/// instance), and with the outbox to NATS ([`with_nats`]) when `TODOS_NATS__URL` is set. Tests
/// add `config_value`s on top.
pub fn builder() -> AppBuilder {
    let builder =
        App::builder().config_file_required(config_file()).config_env("TODOS_").register(tegu_otel::OtelLink::proto());
    let builder = if std::env::var_os("TODOS_NATS__URL").is_some() { with_nats(builder) } else { builder };
    match std::env::var("TODOS_ADMIN_TOKEN") {
        Ok(token) if !token.is_empty() => with_admin(builder, &token),
        _ => builder,
    }
}

/// `builder` with an operator who holds `token` (a bearer token of at least 32 characters) and
/// the role `admin`: what [`admin_routes`] let through. `TODOS_ADMIN_TOKEN` sets it for the
/// binary.
pub fn with_admin(builder: AppBuilder, token: &str) -> AppBuilder {
    #[derive(serde::Serialize)]
    struct Entry<'a> {
        token: &'a str,
        user: &'a str,
        roles: [&'a str; 1],
    }
    builder
        .register(tegu_http::auth::BearerTokens::proto())
        .config_value("auth.tokens", [Entry { token, user: "admin", roles: ["admin"] }])
}

/// The routes of the outbox's dead letters under `/admin` (list, replay, discard), for the
/// bearer tokens of [`with_admin`] with the role `admin`: 401 without one, 403 without the role.
/// `None` where the App has no outbox (no NATS) or no operator's token: never mounted by default.
pub fn admin_routes(app: &App) -> Option<axum::Router> {
    let outbox = app.get_object::<tegu_outbox::Outbox>().ok()?;
    let auth = tegu_http::auth::AuthLayer::new(app).ok()?;
    Some(axum::Router::new().nest("/admin", tegu_outbox::admin::routes(outbox)).layer(auth))
}

/// The header that names a request's tenant: `x-tenant: acme`.
pub const TENANT_HEADER: &str = "x-tenant";

/// The tenant of a request that names none ([`TENANT_HEADER`]), and of the work it causes: the
/// todos made before the service had tenants are its.
pub const DEFAULT_TENANT: &str = "default";

/// The tenant that the current scope serves, read through `tenant` (a request's, or, in an
/// event handler's scope, the one of the request that emitted the event, which the scope's
/// lineage carries): [`DEFAULT_TENANT`] where there is none (a request without `x-tenant`, work
/// outside any request).
///
/// # Errors
///
/// The [`DiError`] of a scope that cannot be read (ended, another App's).
pub fn current_tenant(tenant: &ContextRef<Tenant>) -> Result<Tenant, DiError> {
    match tenant.try_get() {
        Ok(tenant) => Ok((*tenant).clone()),
        Err(DiError::NoTenant { .. } | DiError::NoScope { .. }) => Ok(default_tenant()),
        Err(error) => Err(error),
    }
}

/// The tenant [`DEFAULT_TENANT`].
fn default_tenant() -> Tenant {
    static DEFAULT: std::sync::OnceLock<Tenant> = std::sync::OnceLock::new();
    DEFAULT.get_or_init(|| Tenant::new(DEFAULT_TENANT).expect("`default` is a tenant key")).clone()
}

/// The service's routes for `app`, to build: every controller, each request's scope opened for
/// the tenant its `x-tenant` header names, or for none (then [`DEFAULT_TENANT`]'s todos) when
/// it names none; a value that is no tenant key is answered 400, naming the header, before any
/// handler runs. Tests add layers to it; [`router`] builds it.
pub fn routes(app: &App) -> RouterBuilder {
    RouterBuilder::new(app).tenant(TenantFrom::header(TENANT_HEADER).optional())
}

/// `routes` built, each route in a server span of its caller's trace (tegu-otel's `TraceLayer`,
/// inside the routing so that the span is named after the route, outside the request's scope so
/// that the scope is seeded with the span's trace context): what `main` serves, with
/// `/metrics` beside it.
///
/// # Errors
///
/// [`RouteError`] if two routes clash.
pub fn router(routes: RouterBuilder) -> Result<axum::Router, RouteError> {
    Ok(routes.build()?.layer(tegu_otel::TraceLayer::new()))
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
        format!("curl -i {addr}/users/ada/todos -H 'x-tenant: acme' {json} -d '{{\"title\":\"for acme\"}}'   # tenant acme's: seen only with that header"),
        format!("curl -i {addr}/health/ready   # also over HTTP/2: curl --http2-prior-knowledge"),
        format!("curl {addr}/metrics"),
        format!("curl -i -X DELETE {addr}/users/ada/todos/1"),
    ]
    .join("\n  ")
}
