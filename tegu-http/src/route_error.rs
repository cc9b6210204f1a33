//! Why the routes of an App's controllers cannot be served: [`RouteError`], found when the
//! router is built.

use tegu_core::DiError;

/// Why the routes of an App's controllers cannot be served. Found when the router is built, at
/// start-up, never during a request.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use tegu_http::{RouteError, http_controller, http_routes};
///
/// #[http_controller(path = "/things")]
/// pub struct ThingController;
///
/// #[http_routes]
/// impl ThingController {
///     #[get("/")]
///     fn list(&self) -> &'static str {
///         "things"
///     }
/// }
///
/// /// Another controller, the same route.
/// #[http_controller]
/// pub struct LegacyController;
///
/// #[http_routes]
/// impl LegacyController {
///     #[get("/things")]
///     fn things(&self) -> &'static str {
///         "old things"
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = tegu_core::App::builder().build().await?;
/// let error = tegu_http::RouterBuilder::new(&app).build().err().expect("GET /things is declared twice");
/// match &error {
///     RouteError::Clash { http_method, path, .. } => assert_eq!((http_method.as_str(), path.as_str()), ("GET", "/things")),
///     other => panic!("not a clash: {other}"),
/// }
/// assert_eq!(
///     error.to_string(),
///     "route `GET /things` is declared twice: by `LegacyController::things` and by `ThingController::list`"
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// Two handlers for the same method and path.
    #[error("route `{http_method} {path}` is declared twice: by `{first}` and by `{second}`")]
    Clash {
        /// The HTTP method.
        http_method: String,
        /// The full path.
        path: String,
        /// The first handler, `Controller::method`.
        first: String,
        /// The second handler.
        second: String,
    },
    /// Two paths that match the same requests with different capture names, which axum's
    /// router cannot tell apart.
    #[error(
        "route `{path}` of `{second}` overlaps route `{other}` of `{first}`: captures at the same place need the same name"
    )]
    Overlap {
        /// The path of the second handler.
        path: String,
        /// The path of the first handler.
        other: String,
        /// The first handler.
        first: String,
        /// The second handler.
        second: String,
    },
    /// A controller is not in the App.
    #[error("controller `{controller}` cannot be served: {source}")]
    Controller {
        /// The controller's type.
        controller: &'static str,
        /// Why the App could not give it.
        source: DiError,
    },
    /// [`RouterBuilder::tenant`](crate::RouterBuilder::tenant) reads each request's tenant, but the App has no [`Tenant`]
    /// context proto to give it to.
    ///
    /// [`Tenant`]: tegu_core::tenant::Tenant
    #[error(
        "the router reads each request's tenant, but the App has no `Tenant` to seed: build it with `.lineage::<Tenant>()`, or hold a `TenantRef` in a proto"
    )]
    NoTenant,
    /// A [`TenantFrom`](crate::TenantFrom) rule that cannot read a tenant safely: a host suffix
    /// without its leading dot (`"todos.example"` would make `eviltodos.example` the tenant
    /// `evil`), or one that is no host name after it.
    #[error("the tenant rule `{rule}` is refused: {why}")]
    TenantRule {
        /// The rule, as written in code: `TenantFrom::host("todos.example")`.
        rule: String,
        /// What is wrong with it.
        why: String,
    },
    /// Several of the above, all found in one pass.
    #[error("{} route errors:{}", .0.len(), .0.iter().map(|e| format!("\n  - {e}")).collect::<String>())]
    Multiple(Vec<RouteError>),
}
