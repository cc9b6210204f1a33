//! Polling futures concurrently on the current task, without spawning: how `build()` runs a
//! level's async constructors and init hooks, and `App::health` its checks. Floor 0.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Polls every future until it ends, or until `until` (if any) is ready, handing each output to
/// `done` with the future's index as it ends: the indices of those still running when `until`
/// fired, in order. `polling` is told the index of each future before it is polled (so that
/// one whose poll never returns can be named).
pub(crate) async fn join_each<F: Future + Unpin>(
    futures: Vec<F>,
    until: Option<impl Future<Output = ()>>,
    mut done: impl FnMut(usize, F::Output),
    mut polling: impl FnMut(usize),
) -> Vec<usize> {
    let mut running: Vec<(usize, F)> = futures.into_iter().enumerate().collect();
    let mut until = std::pin::pin!(until);
    std::future::poll_fn(|cx| {
        running.retain_mut(|(i, fut)| {
            polling(*i);
            let polled = Pin::new(fut).poll(cx);
            match polled {
                Poll::Ready(output) => {
                    done(*i, output);
                    false
                }
                Poll::Pending => true,
            }
        });
        let late = until.as_mut().as_pin_mut().is_some_and(|u| u.poll(cx).is_ready());
        if running.is_empty() || late { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    running.into_iter().map(|(i, _)| i).collect()
}
