//! Controllers and their routes as `#[http_controller]` and `#[http_routes]` register them;
//! `router.rs` builds the router from these records.

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use axum::Router;
use axum::routing::MethodRouter;
use tegu_core::{App, DiError};

/// Implemented by `#[http_controller]`: the path prefix and the middleware of a controller.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use axum::body::Body;
/// use axum::http::{Request, StatusCode};
/// use tegu_http::{Controller, http_controller, http_routes};
/// use tower::ServiceExt; // `oneshot`
///
/// #[http_controller(path = "/todos")]
/// pub struct TodoController;
///
/// #[http_routes]
/// impl TodoController {
///     #[get("/")]
///     fn list(&self) -> &'static str {
///         "[]"
///     }
/// }
///
/// /// Where a controller's routes are served: under its `PATH`.
/// fn mount_point<C: Controller>() -> &'static str {
///     C::PATH
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// assert_eq!(mount_point::<TodoController>(), "/todos");
/// let app = tegu_core::App::builder().build().await?;
/// let response = tegu_http::router(&app).oneshot(Request::get("/todos").body(Body::empty())?).await?;
/// assert_eq!(response.status(), StatusCode::OK); // `#[get("/")]`, under `/todos`
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an HTTP controller",
    label = "`#[http_routes]` needs a controller",
    note = "add `#[http_controller]` (or `#[http_controller(path = \"/prefix\")]`) to the struct `{Self}`"
)]
pub trait Controller: Send + Sync + 'static {
    /// The prefix of every route of the controller (`""` for none).
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use tegu_http::{Controller, http_controller};
    ///
    /// #[http_controller(path = "/todos")]
    /// pub struct TodoController;
    ///
    /// #[http_controller]
    /// pub struct HealthController;
    ///
    /// # fn main() {
    /// assert_eq!(<TodoController as Controller>::PATH, "/todos");
    /// assert_eq!(<HealthController as Controller>::PATH, ""); // no `path`: no prefix
    /// # }
    /// ```
    const PATH: &'static str;
    /// Wraps the controller's routes in its `#[middleware(...)]` layers.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use axum::body::Body;
    /// use axum::extract::Request;
    /// use axum::http::HeaderValue;
    /// use axum::middleware::{Next, from_fn};
    /// use axum::response::Response;
    /// use axum::routing::get;
    /// use tegu_http::{Controller, http_controller};
    /// use tower::ServiceExt; // `oneshot`
    ///
    /// async fn no_store(request: Request, next: Next) -> Response {
    ///     let mut response = next.run(request).await;
    ///     response.headers_mut().insert("cache-control", HeaderValue::from_static("no-store"));
    ///     response
    /// }
    ///
    /// #[http_controller(path = "/account")]
    /// #[middleware(from_fn(no_store))]
    /// pub struct AccountController;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // What the router does with the controller's routes.
    /// let routes = axum::Router::new().route("/account", get(|| async { "your account" }));
    /// let routes = <AccountController as Controller>::layers(routes);
    /// let response = routes.oneshot(axum::http::Request::get("/account").body(Body::empty())?).await?;
    /// assert_eq!(response.headers()["cache-control"], "no-store");
    /// # Ok(()) }
    /// ```
    fn layers(router: Router) -> Router;
}

/// What `#[http_routes]` submits to `inventory`: how to add one impl block's routes.
#[doc(hidden)]
pub struct ControllerRoutes {
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) type_name: fn() -> &'static str,
    pub(crate) prefix: &'static str,
    pub(crate) layers: fn(Router) -> Router,
    pub(crate) routes: fn(&mut Routes) -> Result<(), DiError>,
}

impl ControllerRoutes {
    /// The routes of controller `C`, added by `routes`.
    pub const fn new<C: Controller>(routes: fn(&mut Routes) -> Result<(), DiError>) -> Self {
        ControllerRoutes {
            type_id: TypeId::of::<C>,
            type_name: std::any::type_name::<C>,
            prefix: C::PATH,
            layers: C::layers,
            routes,
        }
    }
}

impl fmt::Debug for ControllerRoutes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerRoutes").field("controller", &(self.type_name)()).finish_non_exhaustive()
    }
}

inventory::collect!(ControllerRoutes);

/// One route of a controller, before it is checked against the others.
pub(crate) struct RouteDef {
    pub(crate) http_method: &'static str,
    /// The full path: the controller's prefix and the method's path.
    pub(crate) path: String,
    /// `Controller::method`, for error messages.
    pub(crate) handler: String,
    pub(crate) router: MethodRouter,
}

/// The routes of one controller, as its `#[http_routes]` blocks add them.
#[doc(hidden)]
pub struct Routes<'a> {
    pub(crate) app: &'a App,
    pub(crate) prefix: &'static str,
    pub(crate) controller: &'static str,
    pub(crate) defs: Vec<RouteDef>,
}

impl fmt::Debug for Routes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routes").field("controller", &self.controller).field("routes", &self.defs.len()).finish()
    }
}

impl Routes<'_> {
    /// The controller singleton the routes call.
    pub fn controller<C: Send + Sync + 'static>(&self) -> Result<Arc<C>, DiError> {
        self.app.get_object::<C>()
    }

    /// Adds `method path`, served by `handler` (`router`).
    pub fn add(&mut self, http_method: &'static str, path: &'static str, handler: &'static str, router: MethodRouter) {
        self.defs.push(RouteDef {
            http_method,
            path: join(self.prefix, path),
            handler: format!("{}::{handler}", short_name(self.controller)),
            router,
        });
    }
}

/// `prefix` + `path`, without a doubled or trailing `/` (`"/todos"` + `"/"` = `"/todos"`).
fn join(prefix: &str, path: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    match (prefix.is_empty(), path) {
        (true, _) => path.to_owned(),
        (false, "/") => prefix.to_owned(),
        (false, _) => format!("{prefix}{path}"),
    }
}

/// `my_crate::api::TodoController` -> `TodoController`.
fn short_name(type_name: &str) -> &str {
    type_name.rsplit("::").next().unwrap_or(type_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_drops_doubled_and_trailing_slashes() {
        assert_eq!(join("", "/a"), "/a");
        assert_eq!(join("/todos", "/"), "/todos");
        assert_eq!(join("/todos/", "/{id}"), "/todos/{id}");
        assert_eq!(join("", "/"), "/");
    }
}
