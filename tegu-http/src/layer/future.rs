//! The futures of [`ContextLayer`](super::ContextLayer): the response's, and the steps inside it.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use http::{Response, StatusCode};
use tegu_core::futures::{CompleteScope, ContextFuture};
use tracing::instrument::Instrumented;

use crate::head::RequestHead;

pin_project_lite::pin_project! {
    /// The request inside its scope: the handler, then the completion phase, whose failure
    /// turns the response into a 500.
    pub(crate) struct Work<F: Future> {
        #[pin]
        pub(super) handler: F,
        pub(super) head: Arc<RequestHead>,
        // Boxed: a scope with completion hooks to run is the rarer request, and the future of
        // every request stays one response smaller.
        pub(super) completing: Option<Box<(CompleteScope, F::Output)>>,
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
        let (completed, response) = match this.completing {
            Some(completing) => {
                let completed = std::task::ready!(Pin::new(&mut completing.0).poll(cx));
                (completed, this.completing.take().expect("polled above").1)
            }
            None => {
                let response = std::task::ready!(this.handler.poll(cx));
                if let Some(status) = response.status() {
                    this.head.set_status(Some(status));
                    // gRPC runs on HTTP/2 (gRPC-Web over HTTP/1.1 is not read): HTTP/1.1
                    // requests skip the header lookup.
                    let grpc_failed = this.head.version() == http::Version::HTTP_2
                        && response.grpc_status(this.head).is_some_and(|code| code != 0);
                    if status.is_client_error() || status.is_server_error() || grpc_failed {
                        // The request failed: the events it emitted are not dispatched,
                        // and its transactions roll back.
                        tegu_core::scope::fail_scope();
                    }
                }
                // Polled before the response is stored: a scope with nothing to complete (the
                // common request) finishes here, and the response is not moved twice.
                let mut complete = tegu_core::scope::complete_scope();
                match Pin::new(&mut complete).poll(cx) {
                    Poll::Ready(completed) => (completed, response),
                    Poll::Pending => {
                        *this.completing = Some(Box::new((complete, response)));
                        return Poll::Pending;
                    }
                }
            }
        };
        Poll::Ready(match completed {
            Ok(()) => response.scope_body(this.head),
            // A resource did not come free in time (a busy database): a failure to try again.
            Err(error) if error.is_busy() => {
                tracing::warn!(%error, "completing the request found the database busy; answering 503 instead");
                this.head.set_status(Some(StatusCode::SERVICE_UNAVAILABLE));
                F::Output::unavailable()
            }
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
    /// use tegu_http::ContextLayer;
    /// use tegu_http::future::ResponseFuture;
    /// use tower::{Layer, Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let app = tegu_core::App::builder().build().await?;
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
        kind: Kind<F>,
    }
}

pin_project_lite::pin_project! {
    /// What a [`ResponseFuture`] awaits: the request's work in its scope, or the answer of a
    /// request refused before its scope opened (its tenant could not be read). One enum, so
    /// that the common future is no larger than the work's (the refusal takes a niche).
    #[project = KindProj]
    enum Kind<F: Future>
    where
        F::Output: PanicResponse,
    {
        Work { #[pin] inner: Instrumented<CatchPanic<ContextFuture<Work<F>>>> },
        Refused { response: Option<Box<Response<Body>>> },
    }
}

impl<F: Future<Output: PanicResponse>> ResponseFuture<F> {
    pub(super) fn new(inner: Instrumented<CatchPanic<ContextFuture<Work<F>>>>) -> Self {
        ResponseFuture { kind: Kind::Work { inner } }
    }

    pub(super) fn refused(response: Box<Response<Body>>) -> Self {
        ResponseFuture { kind: Kind::Refused { response: Some(response) } }
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
        match self.project().kind.project() {
            KindProj::Work { inner } => inner.poll(cx),
            KindProj::Refused { response } => match response.take() {
                Some(response) => Poll::Ready(F::Output::answer(*response)),
                None => panic!("a refused request's future polled after it was answered"),
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// Answers a panic of the request's scope (its handler, a context object's construction)
    /// with 500, recorded as the status the destroy hooks see; the scope is then dropped,
    /// which ends it on a task of its own, with no completion.
    #[doc(hidden)]
    pub struct CatchPanic<F> {
        #[pin]
        pub(super) inner: F,
        pub(super) head: Arc<RequestHead>,
    }
}

/// What the layer needs of a service's answer: its status, a 500 for a panic, and its body
/// kept in the request's scope while it streams. Sealed, and not exported: a bound of
/// [`ResponseFuture`] that only axum's response type meets.
pub trait PanicResponse: sealed::Sealed {
    /// The 500 response.
    fn internal_error() -> Self;
    /// `response`, as the service would have answered it.
    fn answer(response: Response<Body>) -> Self;
    /// The 503 response, with `Retry-After: 1`.
    fn unavailable() -> Self;
    /// The status, if this is a response.
    fn status(&self) -> Option<StatusCode>;
    /// The `grpc-status` of the response's headers, recorded on `head`.
    fn grpc_status(&self, head: &RequestHead) -> Option<u16>;
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

    fn answer(response: Response<Body>) -> Self {
        Ok(response)
    }

    fn unavailable() -> Self {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
        Ok(response)
    }

    fn status(&self) -> Option<StatusCode> {
        self.as_ref().ok().map(Response::status)
    }

    fn grpc_status(&self, head: &RequestHead) -> Option<u16> {
        head.record_grpc_status(self.as_ref().ok()?.headers())
    }

    #[inline]
    fn scope_body(self, head: &Arc<RequestHead>) -> Self {
        let response = self?;
        if !crate::body::is_streamed(response.body(), head, response.status()) {
            return Ok(response); // a buffered body pays nothing
        }
        let Some(hold) = tegu_core::scope::hold_scope() else { return Ok(response) };
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
                let message = tegu_core::__private::panic_message(&*panic);
                tracing::error!(panic = ?message, "request handler panicked; answering 500");
                this.head.set_status(Some(StatusCode::INTERNAL_SERVER_ERROR));
                Poll::Ready(F::Output::internal_error())
            }
        }
    }
}
