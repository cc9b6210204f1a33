//! The request as a context object: [`RequestHead`], and its [`RequestId`].

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};

use http::{Extensions, HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, Version};
use tegu_core::ProtoDef;
use tegu_core::error::BoxError;
use tegu_core::lineage::Travels;
use tegu_core::registry::{AnyArc, Dependency, InjectKind, ProtoDescriptor};
use tegu_core::{ContextProto, DiError, Proto, Resolver, registry::Lifetime};

/// The header a request id is read from.
///
/// # Examples
///
/// ```
/// use tegu_http::{REQUEST_ID_HEADER, RequestHead};
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
/// use tegu_http::{RequestHead, RequestId};
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
    /// use tegu_http::RequestId;
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
    /// use tegu_http::RequestHead;
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

/// A request's id is part of its lineage: the handlers of the events it emits, in every
/// instance, and the jobs it starts log it as their `request_id`.
impl Travels for RequestId {
    const HEADER: &'static str = REQUEST_ID_HEADER;
    const LOG_FIELD: Option<&'static str> = Some("request_id");

    fn encode(&self) -> String {
        self.to_string()
    }

    fn decode(value: &str) -> Result<Self, BoxError> {
        match HeaderValue::from_str(value) {
            Ok(value) if Self::is_valid(value.as_bytes()) => Ok(RequestId(Repr::Header(value))),
            _ => Err("a request id is 1 to 128 ASCII letters, digits, `-`, `_`, `.` and `:`".into()),
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
/// Available in scopes opened by [`ContextLayer`](crate::ContextLayer) (every controller route), in every task of
/// the request, `tegu_core::spawn`ed ones included: the layer gives it to the scope with
/// `App::run_in_context_with`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::context_proto;
/// use tegu_http::RequestHead;
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
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    version: Version,
    headers: HeaderMap,
    extensions: Extensions,
    pub(crate) id: RequestId,
    /// The response status as a number; 0 until the handler answers.
    status: AtomicU16,
    /// Whether a streamed response body broke off (an error, a panic, dropped before its end).
    body_failed: AtomicBool,
    /// A gRPC response's `grpc-status` plus one; 0 until one is seen.
    grpc_status: AtomicU16,
}

impl RequestHead {
    pub(crate) fn of<B>(req: &Request<B>, capture_extensions: bool) -> Self {
        RequestHead {
            method: req.method().clone(),
            uri: req.uri().clone(),
            version: req.version(),
            headers: req.headers().clone(),
            extensions: if capture_extensions { req.extensions().clone() } else { Extensions::new() },
            id: RequestId::of(req.headers()),
            status: AtomicU16::new(0),
            body_failed: AtomicBool::new(false),
            grpc_status: AtomicU16::new(0),
        }
    }

    /// The head of `req` (its extensions included), as [`ContextLayer`](crate::ContextLayer) would make it: for a
    /// scope opened by hand, such as a test's (`app.scope().with(RequestHead::from_request(&req))?`).
    ///
    /// # Examples
    ///
    /// ```
    /// use axum::http::Request;
    /// use tegu_http::RequestHead;
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
    /// use tegu_http::RequestHead;
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
    /// use tegu_http::RequestHead;
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
    /// use tegu_http::RequestHead;
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
    /// use tegu_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert_eq!(head.headers()["x-request-id"], "req-7");
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The request extensions, as they were when the request entered the [`ContextLayer`](crate::ContextLayer), if
    /// it captures them ([`ContextLayer::capture_extensions`](crate::ContextLayer::capture_extensions),
    /// [`RouterBuilder::capture_extensions`](crate::RouterBuilder::capture_extensions)); empty
    /// otherwise. Off by default: the copy costs an allocation per extension and per request, and
    /// axum inserts two before the layer.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_http::RequestHead;
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
    /// use tegu_http::RequestHead;
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
    /// use tegu_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert_eq!(head.response_status(), None); // not answered yet
    /// ```
    pub fn response_status(&self) -> Option<StatusCode> {
        StatusCode::from_u16(self.status.load(Ordering::Acquire)).ok()
    }

    /// Records the status hooks see; `None` for a request that did not end with a response.
    pub(crate) fn set_status(&self, status: Option<StatusCode>) {
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
    /// use tegu_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&Request::post("/todos?limit=5").header("x-request-id", "req-7").body(()).unwrap());
    /// assert!(!head.succeeded()); // no answer yet: not a success
    /// ```
    pub fn succeeded(&self) -> bool {
        self.response_status().is_some_and(|s| !s.is_client_error() && !s.is_server_error())
            && !self.body_failed()
            && self.grpc_status().is_none_or(|code| code == 0)
    }

    /// The `grpc-status` of a gRPC response (HTTP/2), once seen: in the response's headers
    /// (what a failed call answers, "trailers-only"), before the completion phase; or in its
    /// trailers, after the body, which only destroy hooks see. Anything but 0 (`OK`) makes the
    /// request fail ([`succeeded`](Self::succeeded) is `false`): an HTTP 200 with
    /// `grpc-status: 13` rolls back and drops its events as a 500 does.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_http::RequestHead;
    ///
    /// let head = RequestHead::from_request(&http::Request::post("/todos.Todos/Add").body(()).unwrap());
    /// assert_eq!(head.grpc_status(), None); // not answered yet
    /// ```
    pub fn grpc_status(&self) -> Option<u16> {
        self.grpc_status.load(Ordering::Acquire).checked_sub(1)
    }

    /// Records a `grpc-status` read from `headers` (response headers or trailers), if any: the
    /// code.
    pub(crate) fn record_grpc_status(&self, headers: &HeaderMap) -> Option<u16> {
        let code = headers.get("grpc-status")?.to_str().ok()?.trim().parse::<u16>().ok()?.min(u16::MAX - 1);
        self.grpc_status.store(code + 1, Ordering::Release);
        Some(code)
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
    /// use tegu_http::RequestHead;
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

/// Never succeeds: scopes opened by [`ContextLayer`](crate::ContextLayer) are given their `RequestHead`.
fn head_factory(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    Err(DiError::construction::<RequestHead>(
        "requestHead",
        "there is no request: RequestHead exists in scopes opened by tegu_http::ContextLayer",
    ))
}

/// Given to each request's scope, and to no other: `seed_only`, so that `build()` refuses a
/// handler of an event a job emits whose graph reads it (or the request id built from it).
pub(crate) const HEAD_DESCRIPTOR: ProtoDescriptor =
    ProtoDescriptor::new::<RequestHead>("requestHead", Lifetime::Context, head_factory).also(&[request_id]).seed_only();

/// The request id as a lineage type: from the request's head, or inherited by the work a
/// request caused (an event's handler, in any instance).
fn request_id() -> ProtoDef {
    ProtoDef::lineage_from::<RequestId>(|r| Ok(r.arc::<RequestHead>(0)?.id.clone()))
        .name("requestId")
        .dep(Dependency::new::<RequestHead>(InjectKind::Arc, None))
}

impl Proto for RequestHead {
    const DESCRIPTOR: ProtoDescriptor = HEAD_DESCRIPTOR;
}

impl ContextProto for RequestHead {}
