//! What the divan micro benchmarks (`benches/benches/*.rs`) share.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use tokio::runtime::Runtime;

/// A current-thread runtime with every driver on, as a service would have.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime")
}

/// Polls `fut` once with a no-op waker, inside whatever runtime context the caller is in: a
/// scope's own cost without `block_on`'s (about 200 ns here). The futures benchmarked with it
/// complete on their first poll.
pub fn poll_once<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("the benchmarked future completes on its first poll"),
    }
}
