//! One context scope per request: [`ContextLayer`], and the request head as a context object.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::task::{Context, Poll};

use axum::body::Body;
use di_core::futures::{CompleteScope, ContextFuture};
use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
use di_core::{App, ContextProto, ContextSlot, DiError, Proto, Resolver, Scope};
use http::{Extensions, HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri, Version};
use tracing::instrument::{Instrument, Instrumented};

/// The header a request id is read from.
///
/// # Examples
///
/// ```
/// use di_http::{REQUEST_ID_HEADER, RequestHead};
///
/// assert_eq!(REQUEST_ID_HEADER, "x-request-id");
/// let request = http::Request::get("/todos").header(REQUEST_ID_HEADER, "req-7").body(()).unwrap();
/// assert_eq!(RequestHead::from_request(&request).id().to_string(), "req-7");
/// ```
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The id of a request: its `x-request-id` header if that is a plain id
/// ([`is_valid`](Self::is_valid)), or one generated for it.
///
/// # Examples
///
/// ```
/// use di_http::{RequestHead, RequestId};
///
/// let sent = RequestHead::from_request(&http::Request::get("/").header("x-request-id", "req-7").body(()).unwrap());
/// let id: &RequestId = sent.id();
/// assert_eq!(id.to_string(), "req-7");
/// assert_eq!(format!("{id:?}"), "RequestId(req-7)");
///
/// // Without the header, each request gets an id of its own, unique in the process.
/// let a = RequestHead::from_request(&http::Request::get("/").body(()).unwrap());
/// let b = RequestHead::from_request(&http::Request::get("/").body(()).unwrap());
/// assert_ne!(a.id(), b.id());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RequestId(Repr);

#[derive(Clone, PartialEq, Eq)]
enum Repr {
    Header(HeaderValue),
    /// A thread's prefix and its counter: unique in the process, with no shared counter on the
    /// request path.
    Generated(u64, u64),
}

impl RequestId {
    /// The id a request's headers carry, if it is one ([`is_valid`](Self::is_valid)), or a new
    /// one.
    fn of(headers: &HeaderMap) -> Self {
        match headers.get(REQUEST_ID_HEADER) {
            Some(value) if Self::is_valid(value.as_bytes()) => RequestId(Repr::Header(value.clone())),
            _ => RequestId::generate(),
        }
    }

    /// Whether a client's `x-request-id` is used as the request's id: 1 to 128 bytes of ASCII
    /// letters, digits, `-`, `_`, `.` and `:` (what UUIDs, trace ids and the ids proxies
    /// generate are made of). Anything else (a space, `=`, a brace, a quote, a control
    /// character) could make the request's log lines read as if they had fields the client
    /// chose (`x} user=admin request{id=y`); such a request gets a generated id.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_http::RequestId;
    ///
    /// assert!(RequestId::is_valid(b"7f3a9c2e-1b4d-4e8f-9a6b-2c5d8e1f0a3b"));
    /// assert!(RequestId::is_valid(b"trace:span.42_a"));
    /// assert!(!RequestId::is_valid(b"x} status=200 user=admin request{id=y"));
    /// assert!(!RequestId::is_valid(b""));
    /// assert!(!RequestId::is_valid("x".repeat(129).as_bytes()));
    /// ```
    pub fn is_valid(id: &[u8]) -> bool {
        (1..=128).contains(&id.len())
            && id.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    }

    fn generate() -> Self {
        static THREADS: AtomicU64 = AtomicU64::new(1);
        thread_local! {
            static NEXT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
        }
        NEXT.with(|next| {
            let (mut prefix, n) = next.get();
            if prefix == 0 {
                prefix = THREADS.fetch_add(1, Ordering::Relaxed);
            }
            next.set((prefix, n + 1));
            RequestId(Repr::Generated(prefix, n))
        })
    }

    /// Whether the id came from the request's `x-request-id` header.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_http::RequestHead;
    ///
    /// let head = |request: http::request::Builder| RequestHead::from_request(&request.body(()).unwrap());
    /// assert!(head(http::Request::get("/").header("x-request-id", "req-7")).id().is_from_header());
    /// assert!(!head(http::Request::get("/")).id().is_from_header()); // generated
    /// // Nor is a header that is no id (see `is_valid`): too long, or with a space or a `=`.
    /// assert!(!head(http::Request::get("/").header("x-request-id", "x".repeat(129))).id().is_from_header());
    /// assert!(!head(http::Request::get("/").header("x-request-id", "a user=admin")).id().is_from_header());
    /// ```
    pub fn is_from_header(&self) -> bool {
        matches!(self.0, Repr::Header(_))
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            // Checked to be of `is_valid`'s alphabet when read.
            Repr::Header(value) => f.write_str(value.to_str().unwrap_or_default()),
            Repr::Generated(prefix, n) => write!(f, "{prefix:x}-{n:x}"),
        }
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestId({self})")
    }
}

/// The head of the current request (method, URI, headers, extensions), its id and, once the
/// handler has answered, the response status: a context object every context proto can inject
/// (`#[inject] head: Arc<RequestHead>`) and every singleton can reach
/// (`#[inject] head: ContextRef<RequestHead>`).
///
/// Available in scopes opened by [`ContextLayer`] (every controller route), in every task of
/// the request, `di_core::spawn`ed ones included: the layer gives it to the scope with
/// `App::run_in_context_with`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::context_proto;
/// use di_http::RequestHead;
///
/// /// Per request: tags log lines with the request id.
/// #[context_proto]
/// pub struct Tracer {
///     #[inject]
///     head: Arc<RequestHead>,
/// }
/// impl Tracer {
///     pub fn line(&self, msg: &str) -> String {
///         format!("[{}] {} {}: {msg}", self.head.id(), self.head.method(), self.head.uri().path())
///     }
/// }
/// ```
pub struct RequestHead {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    extensions: Extensions,
    id: RequestId,
    /// The response status as a number; 0 until the handler answers.
    status: AtomicU16,
    /// Whether a streamed response body broke off (an error, a panic, dropped before its end).
    body_failed: AtomicBool,
}

impl RequestHead {
    fn of<B>(req: &Request<B>, capture_extensions: bool) -> Self {
        RequestHead {
            method: req.method().clone(),
            uri: req.uri().clone(),
            version: req.version(),
            headers: req.headers().clone(),
            extensions: if capture_extensions { req.extensions().clone() } else { Extensions::new() },
            id: RequestId::of(req.headers()),
            status: AtomicU16::new(0),
            body_failed: AtomicBool::new(false),
        }
    }

    /// The head of `req` (its extensions included), as [`ContextLayer`] would make it: for a
    /// scope opened by hand, such as a test's (`app.scope().with(RequestHead::from_request(&req))?`).
    ///
    /// # Examples
    ///
    /// ```
    /// use axum::http::Request;
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::get("/todos").header("x-user", "ada").body(()).unwrap());
    /// assert_eq!(head.uri().path(), "/todos");
    /// assert_eq!(head.headers()["x-user"], "ada");
    /// ```
    pub fn from_request<B>(req: &Request<B>) -> Self {
        Self::of(req, true)
    }

    /// The request method.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Request;
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert_eq!(head.method(), http::Method::POST);
    /// ```
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The request URI.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Request;
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert_eq!((head.uri().path(), head.uri().query()), ("/todos", Some("limit=5")));
    /// ```
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// The HTTP version.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Request;
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert_eq!(head.version(), http::Version::HTTP_11);
    /// ```
    pub fn version(&self) -> Version {
        self.version
    }

    /// The request headers.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Request;
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert_eq!(head.headers()["x-request-id"], "req-7");
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The request extensions, as they were when the request entered the [`ContextLayer`], if
    /// it captures them ([`ContextLayer::capture_extensions`],
    /// [`RouterBuilder::capture_extensions`](crate::RouterBuilder::capture_extensions)); empty
    /// otherwise. Off by default: the copy costs an allocation per extension and per request, and
    /// axum inserts two before the layer (5 of a request's 33 allocations, measured).
    ///
    /// # Examples
    ///
    /// ```
    /// use di_http::RequestHead;
    ///
    /// #[derive(Clone, Debug, PartialEq)]
    /// struct Tenant(&'static str);
    ///
    /// let mut request = http::Request::get("/todos").body(()).unwrap();
    /// request.extensions_mut().insert(Tenant("acme"));
    /// let head = RequestHead::from_request(&request); // `from_request` copies them
    /// assert_eq!(head.extensions().get::<Tenant>(), Some(&Tenant("acme")));
    /// ```
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// The request id: `x-request-id`, or generated. Also recorded on the request's span.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Request;
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert_eq!(head.id().to_string(), "req-7");
    /// assert!(head.id().is_from_header());
    /// ```
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The status of the response, once the handler has answered: what it answered, or 500
    /// if it panicked or a completion hook failed; `None` before, or if the request was
    /// cancelled (the client went away). Completion hooks read it to decide whether to commit,
    /// destroy hooks to tell a request that succeeded from one that failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Request;
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert_eq!(head.response_status(), None); // not answered yet
    /// ```
    pub fn response_status(&self) -> Option<StatusCode> {
        StatusCode::from_u16(self.status.load(Ordering::Acquire)).ok()
    }

    /// Records the status hooks see; `None` for a request that did not end with a response.
    fn set_status(&self, status: Option<StatusCode>) {
        self.status.store(status.map_or(0, |s| s.as_u16()), Ordering::Release);
    }

    /// Whether the handler answered with a 1xx, 2xx or 3xx status, and the response's body, if
    /// it was streamed, has not broken off ([`body_failed`](Self::body_failed)). Completion
    /// hooks run before a streamed body is sent, so there it says how the handler answered;
    /// destroy hooks run after the body's end, and see a body that broke off as a failure.
    ///
    /// # Examples
    ///
    /// ```
    /// use http::Request;
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert!(!head.succeeded()); // no answer yet: not a success
    /// ```
    pub fn succeeded(&self) -> bool {
        self.response_status().is_some_and(|s| !s.is_client_error() && !s.is_server_error()) && !self.body_failed()
    }

    /// Whether the response's body broke off: it was streamed (sent frame by frame after the
    /// handler returned, inside the request's scope) and yielded an error, panicked, or was
    /// dropped before its end (the client went away, the server cut the connection). The
    /// status was sent already; destroy hooks read this to tell a complete response from a
    /// truncated one. Always `false` for a buffered body, which is sent whole.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&http::Request::get("/export.csv").body(()).unwrap());
    /// assert!(!head.body_failed()); // nothing sent yet
    /// ```
    pub fn body_failed(&self) -> bool {
        self.body_failed.load(Ordering::Acquire)
    }

    pub(crate) fn set_body_failed(&self) {
        self.body_failed.store(true, Ordering::Release);
    }
}

impl fmt::Debug for RequestHead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestHead")
            .field("id", &self.id)
            .field("method", &self.method)
            .field("uri", &self.uri)
            .field("status", &self.response_status())
            .finish_non_exhaustive()
    }
}

/// Never succeeds: scopes opened by [`ContextLayer`] are given their `RequestHead`.
fn head_factory(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    Err(DiError::construction::<RequestHead>(
        "requestHead",
        "there is no request: RequestHead exists in scopes opened by di_http::ContextLayer",
    ))
}

const HEAD_DESCRIPTOR: ProtoDescriptor =
    ProtoDescriptor::new::<RequestHead>("requestHead", Scope::Context, head_factory, cast_to::<RequestHead>);

inventory::submit! { HEAD_DESCRIPTOR }

impl Proto for RequestHead {
    const DESCRIPTOR: ProtoDescriptor = HEAD_DESCRIPTOR;
}
impl ContextProto for RequestHead {}

/// A tower layer that runs each request in its own context scope of an [`App`], with the
/// [`RequestHead`] as a context object and a `tracing` span named `request` carrying its id.
///
/// The request ends as [`App::run_in_context`] describes: the handler answers and its status
/// is recorded on the `RequestHead`; the completion hooks run (an error or a panic there
/// answers 500 instead, logged naming the object, and 500 is the status destroy hooks see);
/// the response leaves; then, on a task of its own that the App tracks, the scope waits for
/// its `di_core::spawn`ed tasks and runs its destroy hooks. A panic in the inner service, or in
/// a context object it builds, is answered with 500 and logged with `tracing::error!`, with no
/// completion; the scope is destroyed either way (also when the client goes away
/// mid-request). [`router`](crate::router) puts every controller route in one; wrap your own
/// routes in another.
///
/// # Examples
///
/// ```
/// use axum::{Router, routing::get};
/// use di_http::ContextLayer;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = di_core::App::builder().build().await?;
/// let mine: Router = Router::new()
///     .route("/ping", get(|| async { if di_core::in_scope() { "pong, in a scope" } else { "no scope" } }))
///     .layer(ContextLayer::new(app.clone()));
/// let service = di_http::router(&app).merge(mine);
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
}

impl ContextLayer {
    /// Scopes of `app`.
    ///
    /// # Examples
    ///
    /// ```
    /// use axum::{Router, body::Body, routing::get};
    /// use di_http::ContextLayer;
    /// use tower::ServiceExt; // `oneshot`
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = di_core::App::builder().build().await?;
    /// let routes = Router::new().route("/", get(|| async { if di_core::in_scope() { "in a scope" } else { "no scope" } }));
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
        ContextLayer { app, capture_extensions: false, head }
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
    /// use di_http::{ContextLayer, RequestHead};
    /// use tower::{Layer, ServiceExt};
    ///
    /// #[derive(Clone)]
    /// struct Tenant(&'static str);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = di_core::App::builder().build().await?;
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
/// use di_http::{ContextLayer, ContextService};
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = di_core::App::builder().build().await?;
/// // Any service from a `Request` to a `Response`: here one that tells whether it runs in a scope.
/// let inner = tower::service_fn(|_: Request<Body>| async {
///     Ok::<_, Infallible>(Response::new(Body::from(if di_core::in_scope() { "in a scope" } else { "no scope" })))
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

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let ContextLayer { app, capture_extensions, head: slot } = &self.layer;
        let head = Arc::new(RequestHead::of(&req, *capture_extensions));
        let span = tracing::info_span!("request", id = %head.id, method = %head.method, path = %head.uri.path());
        let work = Work { handler: self.inner.call(req), head: Arc::clone(&head), completing: None };
        let scoped = match *slot {
            Some(slot) => app.run_in_context_with(slot, Arc::clone(&head), work),
            None => app.run_in_context(work),
        };
        ResponseFuture { inner: CatchPanic { inner: scoped.end_in_background(), head }.instrument(span) }
    }
}

pin_project_lite::pin_project! {
    /// The request inside its scope: the handler, then the completion phase, whose failure
    /// turns the response into a 500.
    struct Work<F: Future> {
        #[pin]
        handler: F,
        head: Arc<RequestHead>,
        completing: Option<(CompleteScope, F::Output)>,
    }

    impl<F: Future> PinnedDrop for Work<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if this.completing.is_some() {
                // Cancelled while completing (the client went away during a COMMIT): the
                // handler's status no longer says how the request ended.
                this.head.set_status(None);
            }
        }
    }
}

impl<F: Future<Output: PanicResponse>> Future for Work<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (complete, _) = match this.completing {
            Some(completing) => completing,
            None => {
                let response = std::task::ready!(this.handler.poll(cx));
                if let Some(status) = response.status() {
                    this.head.set_status(Some(status));
                    if status.is_client_error() || status.is_server_error() {
                        // The request failed: the events it emitted are not dispatched.
                        di_core::discard_events();
                    }
                }
                this.completing.insert((di_core::complete_scope(), response))
            }
        };
        let completed = std::task::ready!(Pin::new(complete).poll(cx));
        let (_, response) = this.completing.take().expect("set above");
        Poll::Ready(match completed {
            Ok(()) => response.scope_body(this.head),
            Err(error) => {
                tracing::error!(%error, "completing the request failed; answering 500 instead");
                this.head.set_status(Some(StatusCode::INTERNAL_SERVER_ERROR));
                F::Output::internal_error()
            }
        })
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`ContextService`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use axum::body::Body;
    /// use axum::http::{Request, Response, StatusCode};
    /// use di_http::{ContextLayer, ResponseFuture};
    /// use tower::{Layer, Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = di_core::App::builder().build().await?;
    /// // A service that panics on any path but `/fine`.
    /// let inner = tower::service_fn(|request: Request<Body>| async move {
    ///     assert_eq!(request.uri().path(), "/fine", "the handler gave up");
    ///     Ok::<_, Infallible>(Response::new(Body::from("fine")))
    /// });
    /// let mut service = ContextLayer::new(app).layer(inner);
    ///
    /// let future: ResponseFuture<_> = service.ready().await?.call(Request::get("/fine").body(Body::empty())?);
    /// assert_eq!(future.await?.status(), StatusCode::OK);
    /// // A panic is answered with 500 (and logged); the request's scope still ends.
    /// let future: ResponseFuture<_> = service.ready().await?.call(Request::get("/broken").body(Body::empty())?);
    /// assert_eq!(future.await?.status(), StatusCode::INTERNAL_SERVER_ERROR);
    /// # Ok(()) }
    /// ```
    pub struct ResponseFuture<F: Future>
    where
        F::Output: PanicResponse,
    {
        #[pin]
        inner: Instrumented<CatchPanic<ContextFuture<Work<F>>>>,
    }
}

impl<F: Future<Output: PanicResponse>> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F: Future<Output: PanicResponse>> Future for ResponseFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx)
    }
}

pin_project_lite::pin_project! {
    /// Answers a panic of the request's scope (its handler, a context object's construction)
    /// with 500, recorded as the status the destroy hooks see; the scope is then dropped,
    /// which ends it on a task of its own, with no completion.
    #[doc(hidden)]
    pub struct CatchPanic<F> {
        #[pin]
        inner: F,
        head: Arc<RequestHead>,
    }
}

/// What the layer needs of a service's answer: its status, a 500 for a panic, and its body
/// kept in the request's scope while it streams. Sealed, and not exported: a bound of
/// [`ResponseFuture`] that only axum's response type meets.
pub trait PanicResponse: sealed::Sealed {
    /// The 500 response.
    fn internal_error() -> Self;
    /// The status, if this is a response.
    fn status(&self) -> Option<StatusCode>;
    /// The response with its body, if streamed, produced inside the current scope (held open
    /// until the body ends). Called inside the scope, after the completion phase.
    fn scope_body(self, head: &Arc<RequestHead>) -> Self;
}

mod sealed {
    /// Only the response type below implements [`PanicResponse`](super::PanicResponse).
    pub trait Sealed {}
    impl<E> Sealed for Result<http::Response<axum::body::Body>, E> {}
}

impl<E> PanicResponse for Result<Response<Body>, E> {
    fn internal_error() -> Self {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        Ok(response)
    }

    fn status(&self) -> Option<StatusCode> {
        self.as_ref().ok().map(Response::status)
    }

    #[inline]
    fn scope_body(self, head: &Arc<RequestHead>) -> Self {
        let response = self?;
        if !crate::body::is_streamed(response.body(), head, response.status()) {
            return Ok(response); // a buffered body pays nothing
        }
        let Some(hold) = di_core::hold_scope() else { return Ok(response) };
        Ok(response.map(|body| crate::body::scoped(body, hold, Arc::clone(head))))
    }
}

impl<F: Future<Output: PanicResponse>> Future for CatchPanic<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let inner = this.inner;
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                let message = di_core::__private::panic_message(&*panic);
                tracing::error!(panic = %message, "request handler panicked; answering 500");
                this.head.set_status(Some(StatusCode::INTERNAL_SERVER_ERROR));
                Poll::Ready(F::Output::internal_error())
            }
        }
    }
}
