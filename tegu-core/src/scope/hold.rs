//! Holding a context scope open past its work: [`hold_scope`] and [`ScopeHold`].

use std::fmt;
use std::sync::Arc;

use super::handle::{CURRENT, ScopeHandle, TaskCache};
use super::table::ScopeShared;

/// Keeps the current context scope open after its work has returned, for what the work handed
/// on and that still runs in the scope: a streamed response body (tegu-http takes one for every
/// body it cannot send whole), a reply produced frame by frame.
///
/// The scope's end (step 4 of [`App::run_in_context`](crate::App::run_in_context)) waits until
/// every hold is dropped, with no deadline, then for its background tasks, then runs the destroy
/// hooks. A scope with a hold alive when its work returns ends on a task of its own, as with
/// [`ContextFuture::end_in_background`](crate::futures::ContextFuture::end_in_background)
/// (awaiting the scope returns its output at once). The completion phase does not wait: it runs
/// when the work returns, as always, so an object with a completion hook cannot be created
/// under a hold ([`DiError::LateCompletion`](crate::DiError::LateCompletion)).
///
/// `None` outside a scope, and once the scope's destroy hooks have begun (a hold taken then
/// could not keep its objects alive).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use tegu_core::{App, ContextRef, ProtoDef};
///
/// #[derive(Default)]
/// struct Tracer { destroyed: AtomicBool }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::context::<Tracer>(|_| Ok(Tracer::default()))
///         .on_destroy(|t: Arc<Tracer>| async move { t.destroyed.store(true, Ordering::SeqCst); Ok(()) }))
///     .build()
///     .await?;
/// // The work returns a hold with its output: the scope stays open for it.
/// let (tracer, mut hold) = app
///     .run_in_context(async { (app.get_object::<Tracer>().unwrap(), tegu_core::scope::hold_scope().unwrap()) })
///     .await;
/// // Later (a body polled by the server), code runs in the same scope.
/// let same = hold.enter(|| Arc::ptr_eq(&app.get_object::<Tracer>().unwrap(), &tracer));
/// assert!(same && !tracer.destroyed.load(Ordering::SeqCst));
/// drop(hold); // the scope's end goes on: destroy hooks, on a task of its own
/// app.shutdown().await?; // waits for it
/// assert!(tracer.destroyed.load(Ordering::SeqCst));
/// # Ok(()) }
/// ```
pub fn hold_scope() -> Option<ScopeHold> {
    let shared = CURRENT.try_with(|h| h.shared().clone()).ok()?;
    shared.hold().then(|| ScopeHold { shared, cache: TaskCache::default() })
}

/// A hold on a context scope, from [`hold_scope`]: the scope's end waits until it is dropped,
/// and [`enter`](Self::enter) runs code inside the scope.
pub struct ScopeHold {
    shared: Arc<ScopeShared>,
    /// The objects code entered through this hold resolved, kept between calls so that a warm
    /// `ContextRef::get` takes no lock, as in the scope's own tasks.
    cache: TaskCache,
}

impl ScopeHold {
    /// Runs `f` inside the held scope: `ContextRef::get`, `App::get_object` and
    /// [`spawn`](crate::spawn) see its objects, as in the scope's own tasks. Synchronous, so
    /// that a `poll` can be wrapped in it (what tegu-http does for each frame of a body).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let mut hold = app.run_in_context(async { tegu_core::scope::hold_scope().unwrap() }).await;
    /// assert!(!tegu_core::scope::in_scope());
    /// assert!(hold.enter(tegu_core::scope::in_scope));
    /// # Ok(()) }
    /// ```
    pub fn enter<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let handle = ScopeHandle::joining_with(self.shared.clone(), std::mem::take(&mut self.cache));
        let out = CURRENT.enter(&handle, f);
        self.cache = handle.cache.take();
        out
    }
}

impl Drop for ScopeHold {
    fn drop(&mut self) {
        self.shared.release_hold();
    }
}

impl fmt::Debug for ScopeHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeHold").finish_non_exhaustive()
    }
}

/// The count of holds lives in the scope's table (under the lock `hold_scope` takes anyway) and
/// is signalled through the table's `Notify`: a scope's shared part stays the size it was.
impl ScopeShared {
    /// Counts a hold, unless the destroy hooks have begun; whether it did.
    fn hold(&self) -> bool {
        let mut table = self.table();
        if table.destroying || table.ended {
            return false;
        }
        table.holds += 1;
        true
    }

    /// Counts a hold off; the last one wakes the scope's end.
    fn release_hold(&self) {
        let mut table = self.table();
        table.holds -= 1;
        if table.holds == 0 {
            self.built_async.notify_waiters();
        }
    }

    /// Waits until no hold is alive (the end of a held scope), however long that takes.
    pub(super) async fn holds_released(&self) {
        loop {
            let released = self.built_async.notified();
            tokio::pin!(released);
            released.as_mut().enable(); // before the check: a release cannot slip by
            if self.table().holds == 0 {
                return;
            }
            released.await;
        }
    }
}
