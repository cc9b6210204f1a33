//! The HTTP layer of `tegu-core`, on axum: annotated controllers, one context scope per request,
//! graceful serving.
//!
//! - [`macro@http_controller`] makes a struct a singleton controller; [`macro@http_routes`] on
//!   its impl block turns methods marked `#[get("/path")]`, `#[post]`, `#[put]`, `#[delete]`,
//!   `#[patch]` (and `#[route("/path", method = "...")]`) into axum routes. Arguments are axum
//!   extractors, results anything `IntoResponse`.
//! - [`router`] builds the axum `Router` of every controller; [`RouterBuilder`] adds options.
//!   Bad paths fail at compile time; clashing routes at start-up, naming both handlers.
//! - [`ContextLayer`] opens one context scope per request, with the [`RequestHead`] as a context
//!   object and a `tracing` span carrying the request id; panics are answered with 500.
//! - [`serve`] and [`Server`] serve with graceful shutdown.
//! - [`testing`]: a guide to testing controllers (a fake by trait, a seeded scope, a request
//!   through the router).
//!
//! ```
//! use std::sync::Arc;
//! use axum::{Json, extract::Path, http::StatusCode};
//! use tegu_core::{App, ContextRef, context_proto, singleton_proto};
//! use tegu_http::{RequestHead, http_controller, http_routes};
//!
//! /// Per request: who is asking, read from a header.
//! #[context_proto]
//! pub struct Caller {
//!     #[inject]
//!     head: Arc<RequestHead>,
//! }
//! impl Caller {
//!     fn name(&self) -> String {
//!         let header = self.head.headers().get("x-user").and_then(|v| v.to_str().ok());
//!         header.unwrap_or("anonymous").to_owned()
//!     }
//! }
//!
//! #[singleton_proto]
//! pub struct Greeter {
//!     #[inject]
//!     caller: ContextRef<Caller>,
//! }
//!
//! #[http_controller(path = "/greet")]
//! pub struct GreetController {
//!     #[inject]
//!     greeter: Arc<Greeter>,
//! }
//!
//! #[http_routes]
//! impl GreetController {
//!     #[get("/{name}")]
//!     async fn greet(&self, Path(name): Path<String>) -> String {
//!         format!("{} greets {name}", self.greeter.caller.get().name())
//!     }
//!
//!     #[post("/")]
//!     async fn create(&self, Json(names): Json<Vec<String>>) -> Result<StatusCode, StatusCode> {
//!         if names.is_empty() { Err(StatusCode::BAD_REQUEST) } else { Ok(StatusCode::CREATED) }
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tower::ServiceExt; // for `oneshot`
//! let app = App::builder().build().await?;
//! let request = axum::http::Request::get("/greet/ada").header("x-user", "bob").body(axum::body::Body::empty())?;
//! let response = tegu_http::router(&app).oneshot(request).await?;
//! let body = axum::body::to_bytes(response.into_body(), 1024).await?;
//! assert_eq!(body, "bob greets ada");
//! // In production: tegu_http::serve(app, "127.0.0.1:7001").await?;
//! # Ok(()) }
//! ```

pub mod auth;
mod body;
mod controller;
mod head;
mod layer;
mod probes;
mod route_error;
mod router;
mod serve;
mod tenant;
pub mod testing;
mod tracked;
mod upgrade;

pub use controller::Controller;
pub use head::{REQUEST_ID_HEADER, RequestHead, RequestId};
pub use layer::{ContextLayer, ContextService};
pub use route_error::RouteError;
pub use router::{RouteLayer, RouterBuilder, router};
pub use serve::{DEFAULT_BACKLOG, ServeError, Server, listen, serve, shutdown_signal};
pub use tenant::TenantFrom;
pub use upgrade::ConnectionScope;

/// The futures tegu-http's services return, named for code that stores or wraps them.
pub mod future {
    pub use crate::layer::future::ResponseFuture;
}

pub use tegu_macros::{http_controller, http_routes};

/// The README's examples, compiled and run as doctests here, where both crates are in reach.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The guide (`docs/guide/` in the repository), a chapter per page, from a first service to
/// operating one; its code is compiled and run as doctests like the README's.
#[cfg(any(doc, doctest))]
pub mod guide {
    #[doc = include_str!("../../docs/guide/first-service.md")]
    pub struct FirstService;
    #[doc = include_str!("../../docs/guide/scopes.md")]
    pub struct Scopes;
    #[doc = include_str!("../../docs/guide/http.md")]
    pub struct Http;
    #[doc = include_str!("../../docs/guide/testing.md")]
    pub struct Testing;
    #[doc = include_str!("../../docs/guide/protos.md")]
    pub struct Protos;
    #[doc = include_str!("../../docs/guide/constructors.md")]
    pub struct Constructors;
    #[doc = include_str!("../../docs/guide/configuration.md")]
    pub struct Configuration;
    #[doc = include_str!("../../docs/guide/tenants.md")]
    pub struct Tenants;
    #[doc = include_str!("../../docs/guide/interceptors.md")]
    pub struct Interceptors;
    #[doc = include_str!("../../docs/guide/crosscuts.md")]
    pub struct Crosscuts;
    #[doc = include_str!("../../docs/guide/events.md")]
    pub struct Events;
    #[doc = include_str!("../../docs/guide/operating.md")]
    pub struct Operating;
}

/// Used by code generated by tegu-macros. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::controller::{Controller, ControllerRoutes, Routes};
    pub use ::axum::Router;
    pub use ::axum::extract::State;
    pub use ::axum::response::{IntoResponse, Response};
    pub use ::axum::routing::{MethodFilter, on};
    pub use ::tegu_core::__private::*;

    /// A route method's return value, probed by method resolution on `&&Outcome(&value)`
    /// (autoref specialization): a `Result` that is `Err` fails the request's scope
    /// ([`ErrFails`]), anything else leaves it to the status ([`NotAResult`]).
    #[derive(Debug)]
    pub struct Outcome<'a, T>(pub &'a T);

    /// [`Outcome`]'s first level: a `Result`.
    pub trait ErrFails {
        /// Fails the scope if the value is `Err`.
        fn __di_fail_on_err(&self);
    }
    impl<T, E> ErrFails for &Outcome<'_, ::core::result::Result<T, E>> {
        fn __di_fail_on_err(&self) {
            if self.0.is_err() {
                ::tegu_core::scope::fail_scope();
            }
        }
    }

    /// [`Outcome`]'s last level: any other response.
    pub trait NotAResult {
        /// Does nothing: the status decides.
        fn __di_fail_on_err(&self) {}
    }
    impl<T> NotAResult for Outcome<'_, T> {}

    /// Spanned at an argument of a route method other than the last: it reads the request head.
    pub fn assert_parts_extractor<T: ::axum::extract::FromRequestParts<()>>() {}
    /// Spanned at the last argument of a route method: it may read the body.
    pub fn assert_last_extractor<T: ::axum::extract::FromRequest<(), M>, M>() {}
}
