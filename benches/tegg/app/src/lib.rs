//! The project of tegg's benchmark: generated groups and controllers (`di_codegen::tegg`) over
//! the services of `tegg-services-*`, and the one hand-written piece, the per-request `Tracer`.
//!
//! Routes: `/{flavour}/hello{N}[?touch=true]` for each N of [`NS`] and each flavour:
//! `singleton` and `context` (the container), `handwired` (plain axum, no per-request work),
//! `handwired-traced` (plain axum with the per-request tracer a careful team writes by hand:
//! [`HandTraceLayer`]) and `handwired-context` (that, plus the context flavour's per-request
//! objects built with `Arc::new`).

#![allow(missing_docs, missing_debug_implementations, non_camel_case_types)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, Method, Request, Uri, Version};
use di_core::{ContextRef, context_proto, singleton_proto};
use di_http::{RequestHead, http_controller, http_routes};
use tracing::instrument::{Instrument, Instrumented};

/// Per request: tegg's Tracer, reading the request.
#[context_proto]
pub struct Tracer {
    #[inject]
    head: Arc<RequestHead>,
}

impl Tracer {
    /// What the tracer saw: the request's method and id, consumed by `black_box`.
    pub fn seen(&self) {
        std::hint::black_box((self.head.method(), self.head.id()));
    }
}

/// The hand-written equivalent of `RequestHead` + `Tracer`: what a careful team's middleware
/// captures from each request (the same fields), shared with the handler through the request's
/// extensions.
pub struct HandTracer {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub headers: HeaderMap,
    pub id: HandRequestId,
}

impl HandTracer {
    /// What the tracer saw, as `Tracer::seen`.
    pub fn seen(&self) {
        std::hint::black_box((&self.method, &self.id));
    }
}

/// The request's id: its `x-request-id` header, else a number from a process-wide counter.
pub enum HandRequestId {
    Header(HeaderValue),
    Counter(u64),
}

impl std::fmt::Display for HandRequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandRequestId::Header(v) => f.write_str(v.to_str().unwrap_or("?")),
            HandRequestId::Counter(n) => write!(f, "{n:x}"),
        }
    }
}

/// The hand-written middleware: builds the request's [`HandTracer`], puts it in the request's
/// extensions and runs the rest in a `request` span with the same fields as di-http's. A tower
/// layer written out rather than `axum::middleware::from_fn`, which boxes the inner future: a
/// careful team's fastest version.
#[derive(Clone, Copy, Default)]
pub struct HandTraceLayer;

impl<S> tower_layer::Layer<S> for HandTraceLayer {
    type Service = HandTrace<S>;
    fn layer(&self, inner: S) -> HandTrace<S> {
        HandTrace { inner }
    }
}

/// The service of [`HandTraceLayer`].
#[derive(Clone)]
pub struct HandTrace<S> {
    inner: S,
}

impl<S: tower_service::Service<Request<B>>, B> tower_service::Service<Request<B>> for HandTrace<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = match req.headers().get("x-request-id") {
            Some(v) if !v.is_empty() && v.len() <= 128 && v.to_str().is_ok() => HandRequestId::Header(v.clone()),
            _ => HandRequestId::Counter(NEXT.fetch_add(1, Ordering::Relaxed)),
        };
        let tracer = Arc::new(HandTracer {
            method: req.method().clone(),
            uri: req.uri().clone(),
            version: req.version(),
            headers: req.headers().clone(),
            id,
        });
        let span = tracing::info_span!("request", id = %tracer.id, method = %tracer.method, path = %tracer.uri.path());
        req.extensions_mut().insert(tracer);
        self.inner.call(req).instrument(span)
    }
}

/// Whether the request asks for its services to be called.
fn touched(uri: &Uri) -> bool {
    uri.query().is_some_and(|q| q.split('&').any(|kv| kv == "touch=true"))
}

include!(concat!(env!("OUT_DIR"), "/app.rs"));
