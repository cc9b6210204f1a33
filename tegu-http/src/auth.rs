//! Who the caller is: an [`Authenticator`] (a proto the App provides) turns a request's
//! credentials into a [`Principal`]; [`AuthLayer`] asks it for each request and puts the
//! principal, and its tenant, in the request's extensions; [`require_role`] guards routes.
//! [`BearerTokens`] is one authenticator: tokens from configuration, compared in constant time.
//!
//! The principal is the server's word, never the client's: it is read from the credentials
//! alone, and a request's extensions are the server's own (no header becomes one). It is the
//! request's: it does not travel to the work the request causes in other instances (an
//! event's handlers), where anyone who can publish to the broker could forge it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use serde::Deserialize;
use tegu_core::futures::BoxFuture;
use tegu_core::lineage::Tenant;
use tegu_core::{App, DiError, ProtoDef};
use tower_layer::Layer;
use tower_service::Service;

/// Who made a request: a user, the tenant it acts for (if any), and its roles.
///
/// # Examples
///
/// ```
/// use tegu_http::auth::Principal;
///
/// let ops = Principal::new("ops").with_roles(["admin"]);
/// assert!(ops.has_role("admin") && !ops.has_role("billing"));
/// assert_eq!((ops.user(), ops.tenant()), ("ops", None));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Principal {
    user: Arc<str>,
    tenant: Option<Tenant>,
    roles: Arc<[String]>,
}

impl Principal {
    /// The principal of `user`, with no tenant and no role.
    pub fn new(user: impl Into<Arc<str>>) -> Principal {
        Principal { user: user.into(), tenant: None, roles: Arc::from([]) }
    }

    /// The same, acting for `tenant`.
    #[must_use]
    pub fn with_tenant(mut self, tenant: Tenant) -> Principal {
        self.tenant = Some(tenant);
        self
    }

    /// The same, with `roles`.
    #[must_use]
    pub fn with_roles<R: Into<String>>(mut self, roles: impl IntoIterator<Item = R>) -> Principal {
        self.roles = roles.into_iter().map(Into::into).collect();
        self
    }

    /// The user.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The tenant it acts for, if any.
    pub fn tenant(&self) -> Option<&Tenant> {
        self.tenant.as_ref()
    }

    /// Its roles.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// Whether it has role `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

impl std::fmt::Debug for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Principal")
            .field("user", &self.user)
            .field("tenant", &self.tenant.as_ref().map(Tenant::key))
            .field("roles", &self.roles)
            .finish()
    }
}

/// Why an [`Authenticator`] refused a request's credentials: answered `401 Unauthorized`, with
/// this text, which must not repeat what the client sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unauthenticated(pub String);

/// Turns a request's credentials into its [`Principal`]: a proto the App provides (`provides(dyn
/// Authenticator)`), asked by [`AuthLayer`] for each request. [`BearerTokens`] is one; a
/// service's own checks its identity provider's tokens.
pub trait Authenticator: Send + Sync + 'static {
    /// The caller of a request with `headers`: `Ok(None)` when it carries no credentials (the
    /// routes decide whether that will do), an [`Unauthenticated`] when it carries some that
    /// are refused.
    fn authenticate<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Result<Option<Principal>, Unauthenticated>>;
}

/// One token of [`BearerTokens`], as configured.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    token: String,
    user: String,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
}

/// The `[auth]` section: the tokens.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthSettings {
    tokens: Vec<TokenEntry>,
}

/// The shortest token [`BearerTokens`] takes: 128 bits as hex.
const MIN_TOKEN: usize = 32;

/// An [`Authenticator`] of bearer tokens (`Authorization: Bearer <token>`) from the `[auth]`
/// section of the configuration, each with its user, tenant and roles:
///
/// ```toml
/// [[auth.tokens]]
/// token = "…"          # at least 32 characters: 128 random bits as hex
/// user = "ops"
/// roles = ["admin"]
/// tenant = "acme"      # optional
/// ```
///
/// A request with another scheme (`Basic`) carries no credentials of this authenticator's: it
/// goes on with no principal. A request's token is compared with every configured one, each byte of each, whatever
/// matched: how long the comparison takes says nothing of how much of a token was right. A
/// token shorter than 32 characters, two equal tokens, or a tenant that is no tenant key fail
/// `build()`, naming the entry (never the token). `Debug` shows the users, never a token.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use http::HeaderMap;
/// use tegu_core::App;
/// use tegu_http::auth::{Authenticator, BearerTokens};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let token = "0123456789abcdef0123456789abcdef";
/// let app = App::builder()
///     .register(BearerTokens::proto())
///     .config_value("auth.tokens", [serde_json::json!({ "token": token, "user": "ops", "roles": ["admin"] })])
///     .build()
///     .await?;
/// let auth = app.get_provider::<dyn Authenticator>()?;
/// let mut headers = HeaderMap::new();
/// headers.insert("authorization", format!("Bearer {token}").parse()?);
/// let ops = auth.authenticate(&headers).await?.expect("a principal");
/// assert!(ops.has_role("admin"));
/// headers.insert("authorization", "Bearer 0123456789abcdef0123456789abcdee".parse()?);
/// assert!(auth.authenticate(&headers).await.is_err());
/// assert_eq!(auth.authenticate(&HeaderMap::new()).await?, None);
/// # Ok(()) }
/// ```
pub struct BearerTokens {
    tokens: Vec<(Vec<u8>, Principal)>,
}

impl std::fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerTokens")
            .field("users", &self.tokens.iter().map(|(_, p)| p.user()).collect::<Vec<_>>())
            .finish()
    }
}

impl BearerTokens {
    /// The proto to register (`App::builder().register(BearerTokens::proto())`): reads `[auth]`
    /// and provides `dyn Authenticator`.
    pub fn proto() -> ProtoDef {
        ProtoDef::singleton::<BearerTokens>(|r| {
            let settings: AuthSettings = r.config().get("auth")?;
            BearerTokens::new(settings).map_err(|why| DiError::construction::<BearerTokens>("bearerTokens", why))
        })
        .name("bearerTokens")
        .provides::<BearerTokens, dyn Authenticator>(|tokens| tokens)
        .reads_config::<AuthSettings>("auth")
    }

    fn new(settings: AuthSettings) -> Result<BearerTokens, String> {
        let mut tokens: Vec<(Vec<u8>, Principal)> = Vec::new();
        for (i, entry) in settings.tokens.into_iter().enumerate() {
            let at = format!("`auth.tokens[{i}]` (user {:?})", entry.user);
            if entry.token.len() < MIN_TOKEN {
                return Err(format!("{at}: a token has at least {MIN_TOKEN} characters (128 random bits as hex)"));
            }
            if tokens.iter().any(|(token, _)| token == entry.token.as_bytes()) {
                return Err(format!("{at}: its token is another entry's too"));
            }
            let mut principal = Principal::new(entry.user).with_roles(entry.roles);
            if let Some(key) = entry.tenant {
                principal = principal.with_tenant(Tenant::new(key).map_err(|e| format!("{at}: {e}"))?);
            }
            tokens.push((entry.token.into_bytes(), principal));
        }
        Ok(BearerTokens { tokens })
    }
}

/// Whether `a` and `b` are equal, looking at every byte of the longer whatever differs.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

impl Authenticator for BearerTokens {
    fn authenticate<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Result<Option<Principal>, Unauthenticated>> {
        let refused = |why: &str| Err(Unauthenticated(why.to_owned()));
        let found = (|| {
            let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
            let value = match (values.next(), values.next()) {
                (None, _) => return Ok(None),
                (Some(_), Some(_)) => return refused("the request has two `Authorization` headers"),
                (Some(value), None) => value.as_bytes(),
            };
            // Another scheme (`Basic`) is no credential of this authenticator's: the routes that
            // need a principal refuse the request, the others serve it.
            let token = match value.split_at_checked(7) {
                Some((scheme, token)) if scheme.eq_ignore_ascii_case(b"bearer ") => token,
                _ => return Ok(None),
            };
            // Every token compared, none skipped once one matched.
            let mut found = None;
            for (known, principal) in &self.tokens {
                if same(known, token) {
                    found = Some(principal.clone());
                }
            }
            match found {
                Some(principal) => Ok(Some(principal)),
                None => refused("the bearer token is refused"),
            }
        })();
        Box::pin(std::future::ready(found))
    }
}

/// Asks the App's [`Authenticator`] who made each request, and puts the [`Principal`] in the
/// request's extensions (with its tenant, for [`TenantFrom::extension`](crate::TenantFrom::extension));
/// a request whose credentials are refused is answered `401 Unauthorized` with
/// `WWW-Authenticate: Bearer` before any route runs, logged without its credentials. A request
/// without credentials goes on with no principal: [`require_role`] refuses it where a route
/// needs one. Put it outside the router: `router.layer(AuthLayer::new(&app)?)`.
#[derive(Clone)]
pub struct AuthLayer {
    authenticator: Arc<dyn Authenticator>,
}

impl std::fmt::Debug for AuthLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthLayer").finish_non_exhaustive()
    }
}

impl AuthLayer {
    /// The layer of `app`'s authenticator.
    ///
    /// # Errors
    ///
    /// The App has no singleton that provides `dyn Authenticator` (register
    /// [`BearerTokens::proto`], or the service's own).
    pub fn new(app: &App) -> Result<AuthLayer, DiError> {
        Ok(AuthLayer { authenticator: app.get_provider::<dyn Authenticator>()? })
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService { authenticator: Arc::clone(&self.authenticator), inner }
    }
}

/// The service of [`AuthLayer`].
#[derive(Clone)]
pub struct AuthService<S> {
    authenticator: Arc<dyn Authenticator>,
    inner: S,
}

impl<S> std::fmt::Debug for AuthService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthService").finish_non_exhaustive()
    }
}

impl<S, B> Service<Request<B>> for AuthService<S>
where
    S: Service<Request<B>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let authenticator = Arc::clone(&self.authenticator);
        // The one made ready by `poll_ready`, as tower's services do.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        Box::pin(async move {
            // Whatever an earlier layer put there, the principal is this layer's word.
            request.extensions_mut().remove::<Principal>();
            match authenticator.authenticate(request.headers()).await {
                Ok(Some(principal)) => {
                    if let Some(tenant) = principal.tenant() {
                        request.extensions_mut().insert(tenant.clone());
                    }
                    request.extensions_mut().insert(principal);
                }
                Ok(None) => {}
                Err(refused) => {
                    tracing::warn!(why = %refused, "a request's credentials are refused; answered 401");
                    return Ok(answer(StatusCode::UNAUTHORIZED, &refused.0));
                }
            }
            inner.call(request).await
        })
    }
}

/// An answer of `status` with a text body (and `WWW-Authenticate: Bearer` for a 401).
fn answer(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    if status == StatusCode::UNAUTHORIZED {
        headers.insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// Guards the routes it wraps: a request with no [`Principal`] (no credentials, or no
/// [`AuthLayer`] outside) is answered `401 Unauthorized`, one whose principal lacks `role`
/// `403 Forbidden`, before the route runs. `Router::new().route(..).layer(require_role("admin"))`.
pub fn require_role(role: &'static str) -> RequireRole {
    RequireRole { role }
}

/// The layer of [`require_role`].
#[derive(Clone, Copy, Debug)]
pub struct RequireRole {
    role: &'static str,
}

impl<S> Layer<S> for RequireRole {
    type Service = RoleService<S>;

    fn layer(&self, inner: S) -> RoleService<S> {
        RoleService { role: self.role, inner }
    }
}

/// The service of [`RequireRole`].
#[derive(Clone, Debug)]
pub struct RoleService<S> {
    role: &'static str,
    inner: S,
}

impl<S, B> Service<Request<B>> for RoleService<S>
where
    S: Service<Request<B>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let refused = match request.extensions().get::<Principal>() {
            None => Some(answer(StatusCode::UNAUTHORIZED, "this route needs credentials")),
            Some(principal) if !principal.has_role(self.role) => {
                Some(answer(StatusCode::FORBIDDEN, &format!("this route needs the role `{}`", self.role)))
            }
            Some(_) => None,
        };
        if let Some(refused) = refused {
            return Box::pin(std::future::ready(Ok(refused)));
        }
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        Box::pin(inner.call(request))
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn same_compares_whole_byte_strings() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
        assert!(same(b"", b""));
    }
}
