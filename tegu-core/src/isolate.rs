//! User code run isolated from its panics: a hook's call and future, an object's `Drop`. Floor 0.

use std::panic::AssertUnwindSafe;
use std::task::Poll;

use crate::erased::UnitFuture;
use crate::error::BoxError;

/// A panic caught in a hook or a constructor, as the source of a [`DiError::Hook`](crate::DiError::Hook) or a
/// [`DiError::Construction`](crate::DiError::Construction).
#[derive(Debug)]
pub(crate) struct Panicked(pub(crate) String);

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "panicked: {}", self.0)
    }
}

impl std::error::Error for Panicked {}

/// The message of a caught panic: its `&str` or `String` payload.
#[doc(hidden)]
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic with a non-string payload")
}

/// Calls a hook and polls it to its end; a panic (in the call or in the future) is returned
/// as an error holding its message.
pub(crate) async fn catch_hook(call: impl FnOnce() -> UnitFuture) -> Result<(), BoxError> {
    match std::panic::catch_unwind(AssertUnwindSafe(call)) {
        Ok(hook) => catch_future(hook).await,
        Err(panic) => Err(Box::new(Panicked(panic_message(&*panic).to_owned()))),
    }
}

/// Polls `future` to its end; a panic while it is polled is returned as an error holding its
/// message, and the future is not polled again.
pub(crate) async fn catch_future<T>(future: impl Future<Output = Result<T, BoxError>>) -> Result<T, BoxError> {
    let mut future = std::pin::pin!(future);
    let caught =
        std::future::poll_fn(|cx| match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(result)) => Poll::Ready(Ok(result)),
            Err(panic) => Poll::Ready(Err(panic)),
        })
        .await;
    match caught {
        Ok(result) => result,
        Err(panic) => Err(Box::new(Panicked(panic_message(&*panic).to_owned()))),
    }
}

/// Drops each of `values` in turn, catching and logging a panic of a `Drop` and going on with
/// the next: one guard for them all, not one call per value (a large scope drops thousands).
pub(crate) fn drop_each_isolated<T>(mut values: impl Iterator<Item = T>) {
    while let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| values.by_ref().for_each(drop))) {
        tracing::error!(panic = panic_message(&*panic), "dropping an object panicked; the others are still dropped");
    }
}

/// Drops `value`, catching and logging a panic of its `Drop`.
pub(crate) fn drop_isolated<T>(value: T) {
    drop_each_isolated(std::iter::once(value));
}
