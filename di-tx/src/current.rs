//! The transactions of a task's `#[transactional]` methods in progress: a task-local list, set
//! around each method's future, so that the methods it calls (awaited in it, on the same
//! task) join them.

use std::future::Future;
use std::sync::Arc;

use crate::tx::Tx;

/// One method's transaction, and the frames of the methods around it.
struct Frame {
    tx: Arc<Tx>,
    outer: Option<Arc<Frame>>,
}

tokio::task_local! {
    static FRAMES: Option<Arc<Frame>>;
}

/// The innermost transaction of data source `source` among the calling task's methods in
/// progress.
pub(crate) fn innermost(source: &str) -> Option<Arc<Tx>> {
    FRAMES
        .try_with(|frames| {
            let mut frame = frames.as_ref();
            while let Some(f) = frame {
                if f.tx.source() == source {
                    return Some(Arc::clone(&f.tx));
                }
                frame = f.outer.as_ref();
            }
            None
        })
        .ok()
        .flatten()
}

/// `fut` with `tx` as its task's innermost transaction of `tx`'s data source.
pub(crate) async fn within<F: Future>(tx: Arc<Tx>, fut: F) -> F::Output {
    let outer = FRAMES.try_with(Clone::clone).ok().flatten();
    FRAMES.scope(Some(Arc::new(Frame { tx, outer })), fut).await
}
