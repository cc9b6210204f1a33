//! What a task spawned in a scope carries from the task that spawned it besides the scope:
//! the task-locals of features and integrations that belong to the work in progress (the
//! events' hold of a unit of work, tegu-tx's transactions of the methods in progress). Each
//! registers a [`Carrier`]; `spawn` and `spawn_blocking` capture every carrier's value when
//! called and set it in the new task around each poll.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

/// A value a carrier captured, erased.
pub type CarriedValue = Arc<dyn Any + Send + Sync>;

/// A task-local carried into tasks spawned in a scope: submitted through `inventory` by the
/// crate that owns the task-local. Used by tegu-core and tegu-tx; not public API.
#[doc(hidden)]
#[derive(Debug)]
pub struct Carrier {
    /// The spawning task's value, if it has one (taken when `spawn` is called).
    pub capture: fn() -> Option<CarriedValue>,
    /// Runs the closure with `value` as the task's value.
    pub enter: fn(&CarriedValue, &mut dyn FnMut()),
}

inventory::collect!(Carrier);

/// The values the carriers captured when a task was spawned.
#[derive(Default)]
pub(crate) struct Carried {
    values: Vec<(&'static Carrier, CarriedValue)>,
}

impl Carried {
    /// Every carrier's value in the calling task.
    pub(crate) fn capture() -> Carried {
        let values = inventory::iter::<Carrier>().filter_map(|c| (c.capture)().map(|v| (c, v))).collect();
        Carried { values }
    }

    /// Runs `f` with the values set.
    pub(crate) fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let mut f = Some(f);
        let mut out = None;
        enter_all(&self.values, &mut || out = f.take().map(|f| f()));
        out.expect("every carrier runs the closure it is given once")
    }

    /// `fut`, polled with the values set.
    pub(crate) async fn run<F: Future>(self, fut: F) -> F::Output {
        if self.values.is_empty() {
            return fut.await;
        }
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| self.enter(|| fut.as_mut().poll(cx))).await
    }
}

fn enter_all(values: &[(&'static Carrier, CarriedValue)], f: &mut dyn FnMut()) {
    match values.split_first() {
        None => f(),
        Some(((carrier, value), rest)) => (carrier.enter)(value, &mut || enter_all(rest, f)),
    }
}
