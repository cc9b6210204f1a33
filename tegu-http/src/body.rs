//! A streamed response body that belongs to its request: polled inside the request's context
//! scope, which stays open (destroy hooks waiting) until the body has ended.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use http_body::{Frame, SizeHint};
use tegu_core::scope::ScopeHold;

use crate::head::RequestHead;

/// Whether a response's body is sent after the handler returns, frame by frame, and so must
/// run in the request's scope: not when it is buffered (its length known before it is sent:
/// what axum makes of a `String`, `Json`, `Bytes` or an empty body), nor when hyper will not
/// send a body at all (a `HEAD` request, a 1xx, 204 or 304 status).
pub(crate) fn is_streamed(body: &Body, head: &RequestHead, status: http::StatusCode) -> bool {
    body.size_hint().exact().is_none()
        && head.method() != http::Method::HEAD
        && !status.is_informational()
        && status != http::StatusCode::NO_CONTENT
        && status != http::StatusCode::NOT_MODIFIED
}

/// A streamed body wrapped so that each frame is produced inside the request's scope and span;
/// the scope ends (destroy hooks run) once the last frame is out, or the body is dropped before
/// (the client went away, the connection was cut), which the request head records.
pub(crate) fn scoped(body: Body, hold: ScopeHold, head: Arc<RequestHead>) -> Body {
    Body::new(ScopedBody { inner: body, hold: Some(hold), head, span: tracing::Span::current() })
}

pin_project_lite::pin_project! {
    struct ScopedBody {
        #[pin]
        inner: Body,
        // `None` once the body has ended: the scope may end.
        hold: Option<ScopeHold>,
        head: Arc<RequestHead>,
        span: tracing::Span,
    }

    impl PinnedDrop for ScopedBody {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if this.hold.is_some() && !this.inner.is_end_stream() {
                let _span = this.span.enter();
                tracing::info!("the response body was dropped before its end (the client went away, or the connection was cut)");
                this.head.set_body_failed();
            }
        }
    }
}

impl HttpBody for ScopedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let mut this = self.project();
        let Some(hold) = this.hold.as_mut() else { return Poll::Ready(None) };
        let _span = this.span.enter();
        let inner = this.inner.as_mut();
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| hold.enter(|| inner.poll_frame(cx))));
        let (frame, failed) = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Some(Err(error)))) => {
                tracing::error!(%error, "the response body failed mid-stream; the response is cut short");
                (Some(Err(error)), true)
            }
            Ok(Poll::Ready(frame)) => {
                if let Some(trailers) = frame.as_ref().and_then(|f| f.as_ref().ok()).and_then(Frame::trailers_ref)
                    && let Some(code) = this.head.record_grpc_status(trailers).filter(|&code| code != 0)
                {
                    tracing::info!(
                        grpc_status = code,
                        "the gRPC call failed in its trailers, after its completion phase"
                    );
                }
                (frame, false)
            }
            Err(panic) => {
                let message = tegu_core::__private::panic_message(&*panic).to_owned();
                tracing::error!(panic = ?message, "the response body panicked mid-stream; the response is cut short");
                (Some(Err(axum::Error::new(format!("the response body panicked: {message}")))), true)
            }
        };
        if failed {
            this.head.set_body_failed();
            *this.hold = None;
        } else if frame.is_none() || this.inner.is_end_stream() {
            // The last frame: the scope may end.
            *this.hold = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.hold.is_none() || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
