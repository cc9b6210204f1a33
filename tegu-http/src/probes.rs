//! What a [`Server`](crate::Server) puts in front of the router on each connection: the
//! liveness and readiness probes (answered without a scope, before routing), and the note that
//! the connection's first request has come (a connection that sends none within the header
//! read timeout is closed).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use tegu_core::{App, health::HealthReport};

use crate::tracked::Tracker;

/// The paths of the probes, as [`Server::health_paths`](crate::Server::health_paths) sets them.
#[derive(Clone, Debug)]
pub(crate) struct ProbePaths {
    pub(crate) live: String,
    pub(crate) ready: String,
}

impl Default for ProbePaths {
    fn default() -> Self {
        ProbePaths { live: "/health/live".to_owned(), ready: "/health/ready".to_owned() }
    }
}

/// The service of one connection: the probes, then the router.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) router: Router,
    pub(crate) app: App,
    pub(crate) probes: Option<Arc<ProbePaths>>,
    pub(crate) tracker: Arc<Tracker>,
}

/// A hyper service, not a tower one: hyper calls it by reference, so a request clones only the
/// router (as hyper-util's tower adapter would), not the App and the probe paths too.
impl hyper::service::Service<Request<Incoming>> for Entry {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = EntryFuture;

    fn call(&self, req: Request<Incoming>) -> EntryFuture {
        self.tracker.requested();
        if let Some(paths) = &self.probes
            && (req.method() == Method::GET || req.method() == Method::HEAD)
        {
            let path = req.uri().path();
            if path == paths.live {
                return EntryFuture::Probe { inner: Box::pin(std::future::ready(live(&self.app))) };
            }
            if path == paths.ready {
                let app = self.app.clone();
                return EntryFuture::Probe { inner: Box::pin(async move { ready(&app.health().await) }) };
            }
        }
        // axum's router is always ready: no `poll_ready` to wait for.
        EntryFuture::Routed { inner: tower_service::Service::call(&mut self.router.clone(), req) }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Entry`]: a probe's answer, or the router's.
    #[project = EntryProj]
    pub(crate) enum EntryFuture {
        Routed { #[pin] inner: axum::routing::future::RouteFuture<Infallible> },
        Probe { inner: Pin<Box<dyn Future<Output = Response<Body>> + Send>> },
    }
}

impl Future for EntryFuture {
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            EntryProj::Routed { inner } => inner.poll(cx),
            EntryProj::Probe { inner } => inner.as_mut().poll(cx).map(Ok),
        }
    }
}

/// `GET /health/live`: 200 while the App serves, 503 once it is shut down or a hosted service
/// stopped it. Runs no check.
fn live(app: &App) -> Response<Body> {
    let state = app.state();
    let live = state != tegu_core::health::AppState::Stopped;
    json(live, &serde_json::json!({ "status": up(live), "state": state.as_str() }))
}

/// `GET /health/ready`: 200 only when the App is ready; the checks and the hosted services by
/// name, with their status (never a check's error, which can name a host or a user: that is
/// logged).
pub(crate) fn ready(report: &HealthReport) -> Response<Body> {
    let checks: Vec<serde_json::Value> = report
        .checks
        .iter()
        .map(|c| {
            serde_json::json!({ "name": c.name, "status": up(c.ok), "took_ms": (c.took.as_secs_f64() * 1e4).round() / 10.0 })
        })
        .collect();
    let services: Vec<serde_json::Value> =
        report.services.iter().map(|s| serde_json::json!({ "name": s.name, "state": s.state.as_str() })).collect();
    json(
        report.ready,
        &serde_json::json!({ "status": up(report.ready), "state": report.state.as_str(), "checks": checks, "services": services }),
    )
}

fn up(ok: bool) -> &'static str {
    if ok { "up" } else { "down" }
}

fn json(ok: bool, body: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
