//! The router built from the registered controllers: [`RouterBuilder`] and [`router`].

use std::any::TypeId;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::response::IntoResponse;
use axum::routing::Route;
use tegu_core::{App, DiError};

use crate::controller::{Controller, ControllerRoutes, RouteDef, Routes};
use crate::layer::ContextLayer;
use crate::route_error::RouteError;

/// Builds the axum [`Router`] of an App's controllers; [`router`] with options.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = tegu_core::App::builder().build().await?;
/// let router: axum::Router = tegu_http::RouterBuilder::new(&app).body_limit(64 * 1024).build()?;
/// # Ok(()) }
/// ```
#[must_use]
pub struct RouterBuilder {
    app: App,
    body_limit: Option<usize>,
    capture_extensions: bool,
    tenant: Option<crate::tenant::TenantFrom>,
    /// Layers by code: for one controller (`Some`), or around all of them (`None`).
    layers: Vec<(Option<TypeId>, RouterFn)>,
    /// Routers of the caller's own, served in the same scopes.
    merged: Vec<Router>,
}

/// A layer applied to a router, type-erased.
type RouterFn = Box<dyn FnOnce(Router) -> Router + Send>;

/// A tower layer that axum's `Router::layer` accepts (any `tower::Layer` whose service answers
/// every request with a response, `Clone + Send + Sync`): what [`RouterBuilder::layer`] and
/// [`RouterBuilder::layer_for`] take. Implemented for every such layer; not to implement.
///
/// # Examples
///
/// ```
/// use axum::{Router, body::Body, routing::get};
/// use axum::extract::Request;
/// use axum::http::HeaderValue;
/// use axum::middleware::{Next, from_fn};
/// use axum::response::Response;
/// use tegu_http::RouteLayer;
/// use tower::ServiceExt; // `oneshot`
///
/// async fn no_store(request: Request, next: Next) -> Response {
///     let mut response = next.run(request).await;
///     response.headers_mut().insert("cache-control", HeaderValue::from_static("no-store"));
///     response
/// }
///
/// /// Takes any layer that `Router::layer` takes, as `RouterBuilder::layer` does.
/// fn wrapped(router: Router, layer: impl RouteLayer) -> Router {
///     layer.wrap(router)
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let router = wrapped(Router::new().route("/", get(|| async { "hi" })), from_fn(no_store));
/// let response = router.oneshot(axum::http::Request::get("/").body(Body::empty())?).await?;
/// assert_eq!(response.headers()["cache-control"], "no-store");
/// # Ok(()) }
/// ```
pub trait RouteLayer: Send + 'static {
    /// `router.layer(self)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use axum::{Extension, Router, body::Body, routing::get};
    /// use tegu_http::RouteLayer;
    /// use tower::ServiceExt; // `oneshot`
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let router = Router::new().route("/", get(|Extension(name): Extension<&'static str>| async move { format!("hello, {name}") }));
    /// let router = Extension("ada").wrap(router); // the same as `router.layer(Extension("ada"))`
    /// let response = router.oneshot(axum::http::Request::get("/").body(Body::empty())?).await?;
    /// assert_eq!(axum::body::to_bytes(response.into_body(), 64).await?, "hello, ada");
    /// # Ok(()) }
    /// ```
    fn wrap(self, router: Router) -> Router;
}

impl<L> RouteLayer for L
where
    L: tower_layer::Layer<Route> + Clone + Send + Sync + 'static,
    L::Service: tower_service::Service<Request> + Clone + Send + Sync + 'static,
    <L::Service as tower_service::Service<Request>>::Response: IntoResponse + 'static,
    <L::Service as tower_service::Service<Request>>::Error: Into<Infallible> + 'static,
    <L::Service as tower_service::Service<Request>>::Future: Send + 'static,
{
    fn wrap(self, router: Router) -> Router {
        router.layer(self)
    }
}

impl fmt::Debug for RouterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouterBuilder").field("body_limit", &self.body_limit).finish_non_exhaustive()
    }
}

impl RouterBuilder {
    /// The routes of every controller of `app`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router: axum::Router = tegu_http::RouterBuilder::new(&app).build()?; // every controller's routes
    /// # let _ = router;
    /// # Ok(()) }
    /// ```
    pub fn new(app: &App) -> Self {
        RouterBuilder {
            app: app.clone(),
            body_limit: None,
            capture_extensions: false,
            tenant: None,
            layers: Vec::new(),
            merged: Vec::new(),
        }
    }

    /// The largest request body the body extractors (`Json`, `String`, `Bytes`, ...) accept;
    /// a larger one is answered with 413. Default: axum's, 2 MiB.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::RouterBuilder::new(&app).body_limit(64 * 1024).build()?; // 64 KiB, then 413
    /// # let _ = router;
    /// # Ok(()) }
    /// ```
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = Some(bytes);
        self
    }

    /// Whether [`RequestHead::extensions`](crate::RequestHead::extensions) holds a copy of the
    /// request's extensions (default: no; it costs allocations on every request).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// // `RequestHead::extensions` then holds the request's extensions (a clone of each).
    /// let router = tegu_http::RouterBuilder::new(&app).capture_extensions(true).build()?;
    /// # let _ = router;
    /// # Ok(()) }
    /// ```
    pub fn capture_extensions(mut self, yes: bool) -> Self {
        self.capture_extensions = yes;
        self
    }

    /// Reads each request's tenant from `from` (a header, the host, a layer's extension) and
    /// opens its scope for that tenant; a request whose tenant cannot be read is answered 400
    /// before any handler runs. See [`TenantFrom`](crate::TenantFrom) for an example.
    ///
    /// [`build`](Self::build) fails with [`RouteError::NoTenant`] if the App has no `Tenant`
    /// (build it with `.lineage::<Tenant>()`, or hold a `TenantRef` in a proto), and with
    /// [`RouteError::TenantRule`] if `from` cannot read a tenant safely (a host suffix without
    /// its leading dot).
    pub fn tenant(mut self, from: crate::tenant::TenantFrom) -> Self {
        self.tenant = Some(from);
        self
    }

    /// Wraps every route of controller `C` in `layer`, inside its `#[middleware]` layers: the
    /// same as `#[middleware(layer)]` on its struct, written in code.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use axum::body::Body;
    /// use axum::extract::Request;
    /// use axum::http::HeaderValue;
    /// use axum::middleware::{Next, from_fn};
    /// use axum::response::Response;
    /// use tegu_http::{http_controller, http_routes};
    /// use tower::ServiceExt; // `oneshot`
    ///
    /// async fn no_store(request: Request, next: Next) -> Response {
    ///     let mut response = next.run(request).await;
    ///     response.headers_mut().insert("cache-control", HeaderValue::from_static("no-store"));
    ///     response
    /// }
    ///
    /// #[http_controller(path = "/account")]
    /// pub struct AccountController;
    ///
    /// #[http_routes]
    /// impl AccountController {
    ///     #[get("/")]
    ///     fn show(&self) -> &'static str {
    ///         "your account"
    ///     }
    /// }
    ///
    /// #[http_controller(path = "/news")]
    /// pub struct NewsController;
    ///
    /// #[http_routes]
    /// impl NewsController {
    ///     #[get("/")]
    ///     fn latest(&self) -> &'static str {
    ///         "all quiet"
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::RouterBuilder::new(&app).layer_for::<AccountController>(from_fn(no_store)).build()?;
    /// let get = |path: &str| axum::http::Request::get(path).body(Body::empty());
    /// let account = router.clone().oneshot(get("/account")?).await?;
    /// assert_eq!(account.headers()["cache-control"], "no-store");
    /// let news = router.oneshot(get("/news")?).await?;
    /// assert!(news.headers().get("cache-control").is_none()); // not `AccountController`'s
    /// # Ok(()) }
    /// ```
    pub fn layer_for<C: Controller>(mut self, layer: impl RouteLayer) -> Self {
        self.layers.push((Some(TypeId::of::<C>()), Box::new(move |router| layer.wrap(router))));
        self
    }

    /// Wraps every controller route in `layer`, inside the request's context scope: middleware
    /// that uses context objects (say, authentication filling a `CurrentUser`) goes here.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let router = tegu_http::RouterBuilder::new(&app)
    ///     .layer(tower::layer::util::Identity::new()) // any tower layer, around every route
    ///     .build()?;
    /// # let _ = router;
    /// # Ok(()) }
    /// ```
    pub fn layer(mut self, layer: impl RouteLayer) -> Self {
        self.layers.push((None, Box::new(move |router| layer.wrap(router))));
        self
    }

    /// Serves `router`'s routes beside the controllers', each request in its own context scope
    /// exactly like a controller's (a `RequestHead`, the completion phase, destroy hooks), and
    /// inside the layers of [`layer`](Self::layer): a tonic gRPC service
    /// (`Router::new().route_service("/pkg.Service/{*method}", server)`, as `examples/grpc`
    /// does), hand-written axum routes.
    /// A path that a controller serves too makes axum panic when the router is built.
    ///
    /// # Examples
    ///
    /// ```
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let own = axum::Router::new().route("/version", axum::routing::get(|| async {
    ///     // Inside the request's scope, as a controller's handler is.
    ///     let head = tegu_core::App::current().unwrap().get_object::<tegu_http::RequestHead>().unwrap();
    ///     format!("1.0 ({})", head.uri().path())
    /// }));
    /// let router = tegu_http::RouterBuilder::new(&app).merge(own).build()?;
    /// let response = router.oneshot(http::Request::get("/version").body(axum::body::Body::empty())?).await?;
    /// let body = axum::body::to_bytes(response.into_body(), 1024).await?;
    /// assert_eq!(body, "1.0 (/version)");
    /// # Ok(()) }
    /// ```
    pub fn merge(mut self, router: Router) -> Self {
        self.merged.push(router);
        self
    }

    /// Checks every route and builds the router: controllers' routes, each controller wrapped
    /// in its layers, all of them in one [`ContextLayer`].
    ///
    /// # Errors
    ///
    /// [`RouteError`] if two routes clash or overlap, or a controller is not in
    /// the App; every problem found is reported.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
    /// match tegu_http::RouterBuilder::new(&app).build() {
    ///     Ok(router) => { let _: axum::Router = router; }
    ///     // Two controllers declaring the same route, say: each clash named.
    ///     Err(error) => panic!("{error}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn build(mut self) -> Result<Router, RouteError> {
        // One group per controller, in type-name order so that errors read the same every run.
        let mut groups: BTreeMap<&'static str, Vec<&'static ControllerRoutes>> = BTreeMap::new();
        for entry in inventory::iter::<ControllerRoutes> {
            groups.entry((entry.type_name)()).or_default().push(entry);
        }
        let mut errors = Vec::new();
        let mut controllers = Vec::new();
        for (controller, entries) in groups {
            let first = entries[0];
            let mut routes = Routes { app: &self.app, prefix: first.prefix, controller, defs: Vec::new() };
            for entry in &entries {
                match (entry.routes)(&mut routes) {
                    Ok(()) => {}
                    // A controller the App was built without (a test App, `without_inventory`, or
                    // one its roots do not reach) is not served.
                    Err(DiError::NotFound { .. } | DiError::NotBuilt { .. }) => continue,
                    Err(source) => errors.push(RouteError::Controller { controller, source }),
                }
            }
            if !routes.defs.is_empty() {
                controllers.push(((first.type_id)(), first.layers, routes.defs));
            }
        }
        check_routes(controllers.iter().flat_map(|(_, _, defs)| defs), &mut errors);
        if let Some(from) = &self.tenant {
            if self.app.context_slot::<tegu_core::tenant::Tenant>().is_err() {
                errors.push(RouteError::NoTenant);
            }
            errors.extend(from.check().err());
        }
        if !errors.is_empty() {
            return Err(if errors.len() == 1 { errors.remove(0) } else { RouteError::Multiple(errors) });
        }

        let mut router = Router::new();
        for (type_id, layers, defs) in controllers {
            let mut sub = Router::new();
            for def in defs {
                sub = sub.route(&def.path, def.router);
            }
            let (mine, others) = std::mem::take(&mut self.layers).into_iter().partition(|(t, _)| *t == Some(type_id));
            self.layers = others;
            sub = mine.into_iter().fold(sub, |sub, (_, layer): (_, RouterFn)| layer(sub));
            router = router.merge(layers(sub));
        }
        for own in std::mem::take(&mut self.merged) {
            router = router.merge(own);
        }
        // What is left: layers around every controller, and those for controllers not served.
        for (target, layer) in self.layers {
            if target.is_none() {
                router = layer(router);
            }
        }
        if let Some(limit) = self.body_limit {
            router = router.layer(DefaultBodyLimit::max(limit));
        }
        let mut layer = ContextLayer::new(self.app).capture_extensions(self.capture_extensions);
        if let Some(from) = self.tenant {
            layer = layer.tenant(from)?;
        }
        Ok(router.layer(layer))
    }
}

/// Finds clashing and overlapping routes before axum sees them (axum would panic without
/// naming the handlers). Each path alone was checked where it was written, by `#[http_routes]`.
fn check_routes<'a>(defs: impl Iterator<Item = &'a RouteDef>, errors: &mut Vec<RouteError>) {
    // Key: the path with capture names erased; value: the raw path and its handlers by method.
    let mut seen: BTreeMap<String, (&str, &str, BTreeMap<&str, &str>)> = BTreeMap::new();
    for def in defs {
        let (path, first_handler, methods) =
            seen.entry(shape(&def.path)).or_insert_with(|| (&def.path, &def.handler, BTreeMap::new()));
        if *path != def.path {
            errors.push(RouteError::Overlap {
                path: def.path.clone(),
                other: (*path).to_owned(),
                first: (*first_handler).to_owned(),
                second: def.handler.clone(),
            });
            continue;
        }
        if let Some(first) = methods.insert(def.http_method, &def.handler) {
            errors.push(RouteError::Clash {
                http_method: def.http_method.to_owned(),
                path: def.path.clone(),
                first: first.to_owned(),
                second: def.handler.clone(),
            });
        }
    }
}

/// `/users/{id}/todos/{*rest}` -> `/users/{}/todos/{*}`.
fn shape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut capture = None::<bool>;
    for c in path.chars() {
        match (c, capture) {
            ('{', None) => {
                out.push('{');
                capture = Some(true);
            }
            ('*', Some(true)) => {
                out.push('*');
                capture = Some(false);
            }
            ('}', Some(_)) => {
                out.push('}');
                capture = None;
            }
            (_, Some(_)) => capture = Some(false),
            (c, None) => out.push(c),
        }
    }
    out
}

/// The router of every controller of `app`, each request in its own context scope.
///
/// Merge it with your own routes and layers as any axum `Router`; wrap the merged router in a
/// [`ContextLayer`] to give your own routes scopes too (the controllers' routes keep the one
/// they have).
///
/// # Panics
///
/// Panics with the [`RouteError`] message if two routes clash or overlap, like axum
/// does on a conflicting `route`; use [`RouterBuilder::build`] to handle it.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = tegu_core::App::builder().build().await?;
/// let router: axum::Router = tegu_http::router(&app).route("/ping", axum::routing::get(|| async { "pong" }));
/// # let _ = router;
/// # Ok(()) }
/// ```
pub fn router(app: &App) -> Router {
    match RouterBuilder::new(app).build() {
        Ok(router) => router,
        Err(err) => panic!("{err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_erases_capture_names() {
        assert_eq!(shape("/u/{id}/t/{*rest}"), "/u/{}/t/{*}");
        assert_eq!(shape("/u/{name}/t/{*all}"), "/u/{}/t/{*}");
        assert_eq!(shape("/plain"), "/plain");
    }
}
