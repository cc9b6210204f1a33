//! One context scope per request: [`ContextLayer`] and its service; `future.rs` holds the
//! response's future.

pub(crate) mod future;

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use http::{Request, Response};
use tegu_core::{App, scope::ContextSlot};
use tracing::instrument::Instrument;

use crate::head::{HEAD_DESCRIPTOR, RequestHead};
use crate::route_error::RouteError;
use crate::tenant::TenantFrom;
use future::{CatchPanic, ResponseFuture, Work};
use tegu_core::lineage::Lineage;

inventory::submit! { HEAD_DESCRIPTOR }

/// A tower layer that runs each request in its own context scope of an [`App`], with the
/// [`RequestHead`] as a context object and a `tracing` span named `request` carrying its id.
///
/// The request ends as [`App::run_in_context`] describes: the handler answers and its status
/// is recorded on the `RequestHead`; the completion hooks run (an error or a panic there
/// answers 500 instead, logged naming the object, and 500 is the status destroy hooks see);
/// the response leaves; then, on a task of its own that the App tracks, the scope waits for
/// its `tegu_core::spawn`ed tasks and runs its destroy hooks. A panic in the inner service, or in
/// a context object it builds, is answered with 500 and logged with `tracing::error!`, with no
/// completion; the scope is destroyed either way (also when the client goes away
/// mid-request). [`router`](crate::router) puts every controller route in one; wrap your own
/// routes in another.
///
/// # Examples
///
/// ```
/// use axum::{Router, routing::get};
/// use tegu_http::ContextLayer;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = tegu_core::App::builder().build().await?;
/// let mine: Router = Router::new()
///     .route("/ping", get(|| async { if tegu_core::scope::in_scope() { "pong, in a scope" } else { "no scope" } }))
///     .layer(ContextLayer::new(app.clone()));
/// let service = tegu_http::router(&app).merge(mine);
/// # let _ = service;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ContextLayer {
    app: App,
    capture_extensions: bool,
    /// Where scopes keep the `RequestHead`; `None` if the App has no such proto (built
    /// `without_inventory`), and then nothing can ask for it.
    head: Option<ContextSlot<RequestHead>>,
    /// Where each request's tenant comes from, if the router reads one.
    tenant: Option<Arc<TenantFrom>>,
}

impl ContextLayer {
    /// Scopes of `app`.
    ///
    /// # Examples
    ///
    /// ```
    /// use axum::{Router, body::Body, routing::get};
    /// use tegu_http::ContextLayer;
    /// use tower::ServiceExt; // `oneshot`
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let routes = Router::new().route("/", get(|| async { if tegu_core::scope::in_scope() { "in a scope" } else { "no scope" } }));
    /// let request = || axum::http::Request::get("/").body(Body::empty());
    ///
    /// let response = routes.clone().oneshot(request()?).await?;
    /// assert_eq!(axum::body::to_bytes(response.into_body(), 64).await?, "no scope");
    /// let response = routes.layer(ContextLayer::new(app)).oneshot(request()?).await?;
    /// assert_eq!(axum::body::to_bytes(response.into_body(), 64).await?, "in a scope");
    /// # Ok(()) }
    /// ```
    pub fn new(app: App) -> Self {
        let head = app.context_slot::<RequestHead>().ok();
        ContextLayer { app, capture_extensions: false, head, tenant: None }
    }

    /// Whether [`RequestHead::extensions`] holds a copy of the request's extensions (default:
    /// no, see there).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use axum::body::Body;
    /// use axum::http::{Request, Response};
    /// use tegu_http::{ContextLayer, RequestHead};
    /// use tower::{Layer, ServiceExt};
    ///
    /// #[derive(Clone)]
    /// struct Tenant(&'static str);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// // Answers with the tenant the request head holds, read in the request's scope.
    /// let in_scope = app.clone();
    /// let reader = tower::service_fn(move |_: Request<Body>| {
    ///     let app = in_scope.clone();
    ///     async move {
    ///         let head = app.get_object::<RequestHead>().expect("in the request's scope");
    ///         let tenant = head.extensions().get::<Tenant>().map_or("none", |tenant| tenant.0);
    ///         Ok::<_, Infallible>(Response::new(Body::from(tenant)))
    ///     }
    /// });
    /// for (capture, expected) in [(false, "none"), (true, "acme")] {
    ///     let mut request = Request::new(Body::empty());
    ///     request.extensions_mut().insert(Tenant("acme"));
    ///     let service = ContextLayer::new(app.clone()).capture_extensions(capture).layer(reader.clone());
    ///     let response = service.oneshot(request).await?;
    ///     assert_eq!(axum::body::to_bytes(response.into_body(), 64).await?, expected);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn capture_extensions(mut self, yes: bool) -> Self {
        self.capture_extensions = yes;
        self
    }

    /// Reads each request's tenant from `from` and opens its scope for that tenant, as
    /// [`RouterBuilder::tenant`](crate::RouterBuilder::tenant) does.
    ///
    /// # Errors
    ///
    /// [`RouteError::NoTenant`] if the App has no `Tenant` context proto;
    /// [`RouteError::TenantRule`] if `from` cannot read a tenant safely (a host suffix without
    /// its leading dot).
    pub fn tenant(mut self, from: TenantFrom) -> Result<Self, RouteError> {
        if self.app.context_slot::<tegu_core::tenant::Tenant>().is_err() {
            return Err(RouteError::NoTenant);
        }
        from.check()?;
        self.tenant = Some(Arc::new(from));
        Ok(self)
    }
}

impl<S> tower_layer::Layer<S> for ContextLayer {
    type Service = ContextService<S>;

    fn layer(&self, inner: S) -> ContextService<S> {
        ContextService { layer: self.clone(), inner }
    }
}

/// The service of a [`ContextLayer`].
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use axum::body::Body;
/// use axum::http::{Request, Response};
/// use tegu_http::{ContextLayer, ContextService};
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = tegu_core::App::builder().build().await?;
/// // Any service from a `Request` to a `Response`: here one that tells whether it runs in a scope.
/// let inner = tower::service_fn(|_: Request<Body>| async {
///     Ok::<_, Infallible>(Response::new(Body::from(if tegu_core::scope::in_scope() { "in a scope" } else { "no scope" })))
/// });
/// let service: ContextService<_> = ContextLayer::new(app).layer(inner);
/// let response = service.oneshot(Request::get("/").body(Body::empty())?).await?;
/// assert_eq!(axum::body::to_bytes(response.into_body(), 64).await?, "in a scope");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ContextService<S> {
    layer: ContextLayer,
    inner: S,
}

impl<S, B> tower_service::Service<Request<B>> for ContextService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let ContextLayer { app, capture_extensions, head: slot, tenant: from } = &self.layer;
        // Built first, before the tenant is resolved: in its own allocation, not moved there.
        let head = Arc::new(RequestHead::of(&req, *capture_extensions));
        // A lineage an outer layer read (a trace context, a user) seeds the scope: a lookup in
        // an extension map that is usually empty.
        let mut lineage = req.extensions_mut().remove::<Lineage>();
        if let Some(from) = from {
            match from.resolve(req.headers(), req.uri(), req.extensions(), lineage.as_ref()) {
                Ok(Some(tenant)) => lineage = Some(lineage.unwrap_or_default().with(tenant)),
                Ok(None) => {}
                Err(refused) => return ResponseFuture::refused(refused),
            }
        }
        // Two call sites: a request with no lineage to seed (the common one) builds a span
        // without the two empty fields, which cost every request that carries them.
        let span = match &lineage {
            None => tracing::info_span!("request", id = %head.id, method = %head.method, path = ?head.uri.path()),
            Some(_) => tracing::info_span!(
                "request",
                id = %head.id,
                method = %head.method,
                path = ?head.uri.path(),
                tenant = tracing::field::Empty,
                trace_id = tracing::field::Empty
            ),
        };
        let work = Work { handler: self.inner.call(req), head: Arc::clone(&head), completing: None };
        let scoped = match (*slot, lineage) {
            (Some(slot), None) => app.run_in_context_with(slot, Arc::clone(&head), work),
            (None, None) => app.run_in_context(work),
            (slot, Some(lineage)) => {
                lineage.record(&span);
                let scope = app.scope().lineage(&lineage);
                match slot {
                    Some(slot) => scope.seed(slot, Arc::clone(&head)).run(work),
                    None => scope.run(work),
                }
            }
        };
        ResponseFuture::new(CatchPanic { inner: scoped.end_in_background(), head }.instrument(span))
    }
}
