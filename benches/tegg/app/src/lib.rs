//! The project of tegg's benchmark: generated groups and controllers (`di_codegen::tegg`) over
//! the services of `tegg-services-*`, and the one hand-written piece, the per-request `Tracer`.
//!
//! Routes: `/{singleton,context,handwired}/hello{N}[?touch=true]` for each N of [`NS`].

#![allow(missing_docs, missing_debug_implementations, non_camel_case_types)]

use std::sync::Arc;

use axum::extract::State;
use axum::http::Uri;
use di_core::{ContextRef, context_proto, singleton_proto};
use di_http::{RequestHead, http_controller, http_routes};

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

/// Whether the request asks for its services to be called.
fn touched(uri: &Uri) -> bool {
    uri.query().is_some_and(|q| q.split('&').any(|kv| kv == "touch=true"))
}

include!(concat!(env!("OUT_DIR"), "/app.rs"));
