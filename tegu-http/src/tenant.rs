//! Each request's tenant, read once where its scope opens: [`TenantFrom`].

use std::sync::Arc;

use http::{Extensions, HeaderMap, HeaderName, Response, StatusCode, Uri};
use tegu_core::lineage::Lineage;
use tegu_core::tenant::Tenant;

use crate::route_error::RouteError;

/// Where a request's tenant comes from: a header, the host name, or a [`Tenant`] that the
/// service's own layer (its authentication, from a claim) put in the request's extensions.
/// Configured once with [`RouterBuilder::tenant`](crate::RouterBuilder::tenant); every request's
/// scope then serves its tenant: what its `TenantRef`s and `ContextRef<Tenant>`s read, and what
/// the work it causes (its tasks, its events' handlers in every instance, the jobs it starts)
/// inherits.
///
/// **Whom to trust.** A header and a host name are what the client sent: read the tenant from
/// them only behind a gateway that sets them itself (and strips a client's), or where a client
/// may choose its tenant. Where tenants must be kept apart from their clients (row-level
/// security, billing), take it from the authenticated caller: [`extension`](Self::extension),
/// put there by the layer that checked the caller's credentials.
///
/// A request whose tenant cannot be read is answered `400 Bad Request` before any handler runs,
/// with a body that names where the tenant was looked for and what was wrong (never the value
/// the client sent). [`optional`](Self::optional) lets a request without one through, with no
/// tenant. Where an outer layer put a [`Lineage`] with a [`Tenant`] in the request's extensions
/// (its authentication), a request that names no tenant is served as that one, and one that
/// names another is refused.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use axum::{Router, body::{Body, to_bytes}, http::Request};
/// use tegu_core::{App, ContextRef, lineage::Tenant};
/// use tegu_http::{RouterBuilder, TenantFrom, http_controller, http_routes};
/// use tower::ServiceExt; // `oneshot`
///
/// #[http_controller]
/// pub struct WhoAmI {
///     #[inject]
///     tenant: ContextRef<Tenant>,
/// }
///
/// #[http_routes]
/// impl WhoAmI {
///     #[get("/whoami")]
///     async fn get(&self) -> String {
///         self.tenant.try_get().map(|t| t.key().to_owned()).unwrap_or_default()
///     }
/// }
///
/// async fn send(router: &Router, request: axum::http::request::Builder) -> (u16, String) {
///     let response = router.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
///     let status = response.status().as_u16();
///     (status, String::from_utf8(to_bytes(response.into_body(), 1 << 16).await.unwrap().to_vec()).unwrap())
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = App::builder().lineage::<Tenant>().build().await?;
/// let router = RouterBuilder::new(&app).tenant(TenantFrom::header("x-tenant")).build()?;
///
/// let (status, body) = send(&router, Request::get("/whoami").header("x-tenant", "acme")).await;
/// assert_eq!((status, body.as_str()), (200, "acme"));
/// let (status, body) = send(&router, Request::get("/whoami")).await;
/// assert_eq!((status, body.as_str()), (400, "the request names no tenant: header `x-tenant` is missing"));
/// let (status, body) = send(&router, Request::get("/whoami").header("x-tenant", "acme user=admin")).await;
/// assert_eq!(status, 400);
/// assert!(body.starts_with("the tenant in header `x-tenant` is refused: a tenant key is refused: its byte 4 is"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct TenantFrom {
    source: Source,
    required: bool,
}

#[derive(Clone, Debug)]
enum Source {
    Header(HeaderName),
    Host(Arc<str>),
    Extension,
}

impl TenantFrom {
    /// The tenant is the value of header `name` (lowercase): `x-tenant: acme`. A request that
    /// gives the header twice is refused (which would be its tenant?).
    ///
    /// # Panics
    ///
    /// If `name` is no lowercase header name, as [`HeaderName::from_static`] does.
    pub fn header(name: &'static str) -> Self {
        TenantFrom { source: Source::Header(HeaderName::from_static(name)), required: true }
    }

    /// The tenant is the host name's part before `suffix`: with `".todos.example"`, a request
    /// to `acme.todos.example` serves `acme`. The host is the request target's authority where
    /// it has one (HTTP/2's `:authority`, an absolute-form target), else the `Host` header, as
    /// RFC 9112 says. A port is left out (an empty one too, as RFC 3986 allows:
    /// `acme.todos.example:`); so is a trailing dot; the key is lowercased (host names have no
    /// case). A request with two `Host` headers is refused, and so is one whose `Host` header
    /// names another host than its target, and one whose host is no host name (RFC 1123: labels
    /// of 1 to 63 ASCII letters, digits and `-`, none starting or ending with `-`, at most 253
    /// characters in all): `..todos.example` names no tenant `.`.
    ///
    /// `suffix` starts with `.` and is a host name after it: without the dot,
    /// `eviltodos.example` would serve the tenant `evil` of `"todos.example"`. A suffix that
    /// breaks this is refused where the router is built
    /// ([`RouterBuilder::build`](crate::RouterBuilder::build),
    /// [`ContextLayer::tenant`](crate::ContextLayer::tenant)) with
    /// [`RouteError::TenantRule`](crate::RouteError::TenantRule).
    ///
    /// # Examples
    ///
    /// ```
    /// use axum::{body::{Body, to_bytes}, http::Request};
    /// use tegu_core::{App, lineage::Tenant};
    /// use tegu_http::{RouterBuilder, TenantFrom};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = App::builder().without_inventory().lineage::<Tenant>().build().await?;
    /// let router = RouterBuilder::new(&app).tenant(TenantFrom::host(".todos.example")).build()?;
    /// let request = Request::get("/").header("host", "todos.example:8080").body(Body::empty())?;
    /// let response = router.oneshot(request).await?;
    /// assert_eq!(response.status(), 400);
    /// let body = to_bytes(response.into_body(), 1024).await?;
    /// assert_eq!(body, "the request names no tenant: its host is not `<tenant>.todos.example`");
    /// # Ok(()) }
    /// ```
    pub fn host(suffix: &str) -> Self {
        TenantFrom { source: Source::Host(suffix.to_ascii_lowercase().into()), required: true }
    }

    /// The tenant is a [`Tenant`] that a layer of the service (its authentication, say, from a
    /// token's claim) put in the request's extensions before the router's: alone, or in a
    /// [`Lineage`] there.
    pub fn extension() -> Self {
        TenantFrom { source: Source::Extension, required: true }
    }

    /// A request that names no tenant is served with none, instead of answered 400 (a value
    /// that is no tenant key still is): for services where some routes need no tenant.
    #[must_use]
    pub fn optional(mut self) -> Self {
        self.required = false;
        self
    }

    /// Where the tenant is looked for, as an error says it.
    fn place(&self) -> String {
        match &self.source {
            Source::Header(name) => format!("header `{name}`"),
            Source::Host(suffix) => format!("the host name before `{suffix}`"),
            Source::Extension => "the request's extensions".to_owned(),
        }
    }

    /// Refuses a rule that cannot read a tenant safely: a host suffix without its leading dot,
    /// or one that is no host name after it.
    pub(crate) fn check(&self) -> Result<(), RouteError> {
        let Source::Host(suffix) = &self.source else { return Ok(()) };
        let why = match suffix.strip_prefix('.') {
            None => format!(
                "a host suffix starts with `.` (`.{suffix}`): without it, the host `evil{suffix}` would serve the tenant `evil`"
            ),
            Some(domain) => match not_a_host_name(domain) {
                None => return Ok(()),
                Some(why) => format!("the host suffix is no host name after its `.`: {why}"),
            },
        };
        Err(RouteError::TenantRule { rule: format!("TenantFrom::host({suffix:?})"), why })
    }

    /// The request's tenant: none if it names none and none is required; or the answer that
    /// refuses it.
    pub(crate) fn resolve(
        &self,
        headers: &HeaderMap,
        uri: &Uri,
        extensions: &Extensions,
        given: Option<&Lineage>,
    ) -> Result<Option<Tenant>, Box<Response<axum::body::Body>>> {
        let once = |name: &HeaderName| {
            let mut values = headers.get_all(name).iter();
            match (values.next(), values.next()) {
                (_, Some(_)) => {
                    Err(refuse(format!("the request names its tenant twice: header `{name}` is given twice")))
                }
                (value, None) => Ok(value.map(|v| v.to_str().unwrap_or("\u{fffd}"))),
            }
        };
        let lowered;
        let key = match &self.source {
            Source::Header(name) => once(name)?,
            Source::Host(suffix) => {
                // The URI's authority first (HTTP/2, an absolute-form request), as RFC 9112 says;
                // a `Host` header that names another host is refused, not ignored: behind a
                // gateway that sets `Host` but passes the request line on, a client would choose.
                let header = once(&http::header::HOST)?.map(host_name);
                let host = match (uri.host().map(host_name), header) {
                    (Some(target), Some(header)) if !target.eq_ignore_ascii_case(header) => {
                        return Err(refuse(
                            "the request names two hosts: its target's authority and its `Host` header differ"
                                .to_owned(),
                        ));
                    }
                    (Some(target), _) => Some(target),
                    (None, header) => header,
                };
                let key = host.and_then(|host| {
                    host.len()
                        .checked_sub(suffix.len())
                        .filter(|&at| at > 0 && host.is_char_boundary(at) && host[at..].eq_ignore_ascii_case(suffix))
                        .map(|at| (host, &host[..at]))
                });
                // A host name's labels, not any text before the suffix (`..todos.example`).
                if let Some(why) = key.and_then(|(host, _)| not_a_host_name(host)) {
                    return Err(refuse(format!(
                        "the tenant in {} is refused: the host is no host name: {why}",
                        self.place()
                    )));
                }
                let key = key.map(|(_, key)| key);
                // Host names have no case: `ACME.todos.example` is acme's.
                lowered = key.map(str::to_ascii_lowercase);
                lowered.as_deref()
            }
            Source::Extension => {
                let tenant = extensions.get::<Tenant>().or_else(|| given.and_then(Lineage::get::<Tenant>));
                return self.given(tenant.cloned());
            }
        };
        match key {
            Some(key) => match Tenant::new(key) {
                // A layer's lineage (its authentication) named another: the client's is not taken.
                Ok(tenant) if given.and_then(Lineage::get::<Tenant>).is_some_and(|t| *t != tenant) => Err(refuse(
                    format!("the request names two tenants: {} and the one a layer gave it differ", self.place()),
                )),
                Ok(tenant) => Ok(Some(tenant)),
                Err(error) => Err(refuse(format!("the tenant in {} is refused: {error}", self.place()))),
            },
            // None in the request: the tenant a layer's lineage gave (its authentication), if any.
            None => self.given(given.and_then(Lineage::get::<Tenant>).cloned()),
        }
    }

    fn given(&self, tenant: Option<Tenant>) -> Result<Option<Tenant>, Box<Response<axum::body::Body>>> {
        match (tenant, &self.source) {
            (Some(tenant), _) => Ok(Some(tenant)),
            (None, _) if !self.required => Ok(None),
            (None, Source::Header(name)) => Err(refuse(format!("the request names no tenant: header `{name}` is missing"))),
            (None, Source::Host(suffix)) => {
                Err(refuse(format!("the request names no tenant: its host is not `<tenant>{suffix}`")))
            }
            (None, Source::Extension) => Err(refuse(
                "the request has no tenant: no layer put a `Tenant` in its extensions (the service's authentication does, from the caller's claims)".to_owned(),
            )),
        }
    }
}

/// A host's name: without its port (an empty one too: RFC 3986's `port = *DIGIT`), or a
/// trailing dot.
fn host_name(host: &str) -> &str {
    let host = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    host.strip_suffix('.').unwrap_or(host)
}

/// Why `host` is no host name, or `None` if it is one (RFC 1123, 2.1: dot-separated labels of 1
/// to 63 ASCII letters, digits and `-`, none starting or ending with `-`; at most 253 characters).
fn not_a_host_name(host: &str) -> Option<&'static str> {
    if host.len() > 253 {
        return Some("it is longer than 253 characters");
    }
    host.split('.').find_map(|label| {
        Some(if label.is_empty() {
            "a label is empty"
        } else if label.len() > 63 {
            "a label is longer than 63 characters"
        } else if !label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            "a label has a character other than ASCII letters, digits and `-`"
        } else if label.starts_with('-') || label.ends_with('-') {
            "a label starts or ends with `-`"
        } else {
            return None;
        })
    })
}

/// `400 Bad Request` with `why` as a plain-text body; logged without any value of the request.
fn refuse(why: String) -> Box<Response<axum::body::Body>> {
    tracing::info!(why = %why, "a request was refused: its tenant could not be read");
    let mut response = Response::new(axum::body::Body::from(why));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    Box::new(response)
}
