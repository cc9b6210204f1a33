//! The end of a context scope: completion hooks, then (after the output has left) background
//! tasks and destroy hooks, each isolated from the others' errors and panics.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, MutexGuard};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tracing::Instrument;

use super::handle::{CURRENT, ScopeHandle, Seeds, fail_current, scoped};
use super::table::{Completion, ScopeShared, Slot, Table};
use crate::maps::SmallMap;

use crate::erased::AnyArc;
use crate::error::DiError;
use crate::pending::PendingGuard;
use crate::runtime::AppInner;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The start of a completion phase.
enum Begun {
    /// Nothing to run: the phase is over.
    Over,
    /// Run the held items' steps and these completion hooks (newest object first).
    Run(Vec<(usize, AnyArc)>),
}

/// What follows a scope's output, decided under one lock.
enum Next {
    /// Run these completion hooks (newest object first), then end.
    Complete(Vec<(usize, AnyArc)>),
    /// The scope has ended already: no task to wait for, no hook to run.
    Closed,
    /// Wait for background tasks and run destroy hooks ([`ending`]); `held`: a hold is alive,
    /// so the end cannot run before the output is handed back.
    End { held: bool },
}

impl ScopeShared {
    /// Starts the completion phase, once: the objects with a completion hook, newest first, or
    /// [`Begun::Over`] if there is nothing to run (no hook, no held item's step). `None` if it
    /// started already.
    fn begin_completion(&self) -> Option<Begun> {
        Self::completion(&self.app, &mut self.table())
    }

    fn completion(app: &AppInner, table: &mut Table) -> Option<Begun> {
        if table.completion != Completion::Pending {
            return None;
        }
        let objects = Self::unlisted(app, table);
        // With nothing to run, the phase is over as soon as it begins.
        if objects.is_empty() && !table.held.unprepared() {
            table.completion = Completion::Over;
            return Some(Begun::Over);
        }
        table.completion = Completion::Running;
        Some(Begun::Run(objects))
    }

    /// The objects with a completion hook that the phase has not listed yet, newest first.
    fn unlisted(app: &AppInner, table: &mut Table) -> Vec<(usize, AnyArc)> {
        let protos = &app.graph.protos;
        let listed = table.listed as usize;
        let new = table.created[listed..].iter().rev().filter(|(key, _)| protos[*key].complete.is_some());
        let new = new.cloned().collect();
        table.listed = u32::try_from(table.created.len()).expect("fewer than 2^32 objects in a scope");
        new
    }

    /// After the output: the completion phase if it has not run and has work, else the end,
    /// which happens at once (objects dropped) when there is no task, no hold and no destroy
    /// hook.
    fn after_output(&self) -> Next {
        let mut table = self.table();
        let table = match Self::completion(&self.app, &mut table) {
            Some(Begun::Run(objects)) => return Next::Complete(objects),
            // Begun now, with nothing to run: the phase has succeeded.
            Some(Begun::Over) => {
                drop(table);
                self.settle_held(true);
                self.table()
            }
            None => table,
        };
        self.close_if_idle(table)
    }

    /// Ends the scope at once if that needs no async work (no task to wait for, no hold, no
    /// destroy hook to run): [`Next::Closed`] if it did, else [`Next::End`].
    fn close_if_idle(&self, mut table: MutexGuard<'_, Table>) -> Next {
        let protos = &self.app.graph.protos;
        if self.tasks.count() > 0
            || table.holds > 0
            || table.created.iter().any(|(key, _)| protos[*key].destroy.is_some())
        {
            return Next::End { held: table.holds > 0 };
        }
        let parts = self.take_all(&mut table);
        drop(table);
        Self::drop_all(parts, Vec::new());
        Next::Closed
    }

    /// Runs the completion phase: first the steps of the items the scope holds (the events'
    /// `before_commit` handlers), then the completion hooks, newest object first, until one
    /// fails: the objects left would confirm work that the scope no longer answers for. Objects
    /// with a completion hook created meanwhile (by a hook, or by another task of the scope)
    /// get a further pass, until a pass finds none; so do items held meanwhile, while no hook
    /// has run (once one has, a commit cannot wait for them: they are released after the
    /// phase, their steps run then, and a failure there fails nothing). Then the phase is
    /// over, and creating such an object is refused ([`DiError::LateCompletion`]).
    /// Then releases the items the scope held with the phase's result.
    async fn complete(&self, mut objects: Vec<(usize, AnyArc)>) -> Result<(), DiError> {
        // Once a completion hook has run (a commit), nothing can be undone: items that come
        // later are not prepared in the phase, but released after it, as at its end.
        let mut hooks_ran = false;
        let result = loop {
            // Boxed, and only where an item waits for its step: most scopes hold nothing, and the
            // step's state stays out of every scope's future (the request path's guard).
            let prepare = !hooks_ran && self.app.held.is_some() && self.table().held.unprepared();
            let mut failed = if prepare { Box::pin(self.prepare_held()).await.err() } else { None };
            for (key, obj) in objects {
                if failed.is_some() {
                    break;
                }
                let def = &self.app.graph.protos[key];
                let hook = def.complete.as_ref().expect("only objects with a completion hook are listed");
                hooks_ran = true;
                if let Err(error) = def.run_hook("complete", || hook.call(obj)).await {
                    crate::telemetry::hook_failed("complete");
                    failed = Some(error);
                }
            }
            let mut table = self.table();
            if let Some(error) = failed {
                table.completion = Completion::Over;
                break Err(error);
            }
            objects = Self::unlisted(&self.app, &mut table);
            if objects.is_empty() && (hooks_ran || !table.held.unprepared()) {
                table.completion = Completion::Over;
                break Ok(());
            }
        };
        self.settle_held(result.is_ok());
        result
    }

    /// The completion phase ran before this table existed (so with nothing to complete):
    /// events follow its result at once.
    pub(super) fn completed_before(&self, ok: bool) {
        self.table().completion = Completion::Over;
        self.settle_held(ok);
    }

    /// Whether a completion phase has begun and not ended.
    fn completion_running(&self) -> bool {
        self.table().completion == Completion::Running
    }

    /// Ends the completion phase without running it (the scope was cancelled or its future
    /// panicked), or where it stopped (its future was dropped): objects with a completion hook
    /// can no longer be created.
    fn abandon_completion(&self) {
        self.table().completion = Completion::Over;
    }

    /// Fails the scope from inside: its completion phase will not run (if it has not), and
    /// the events it holds are released as failed. For work whose result says it failed (an event
    /// handler, a scheduled job returning `Err`).
    pub(crate) fn fail(&self) {
        let mut table = self.table();
        if table.completion == Completion::Pending {
            table.completion = Completion::Over;
            drop(table);
            self.settle_held(false);
        }
    }

    async fn wait_for_tasks(&self) {
        if !self.tasks.wait(self.app.background_timeout).await {
            tracing::warn!(
                timeout = ?self.app.background_timeout,
                tasks = self.tasks.count(),
                "background tasks outlived their context scope; destroying its objects anyway"
            );
        }
    }

    /// Ends the scope: waits for its background tasks, runs destroy hooks newest first (a
    /// failing or panicking hook is logged and the others still run), then drops the objects.
    /// Objects created meanwhile (a destroy hook may resolve context objects) are destroyed
    /// too. Runs inside the scope. Each object is destroyed at most once.
    async fn finish(&self) {
        // The holds first (a streamed response, with no deadline), then the tasks; a task may
        // take a hold while it runs, so until both are done.
        loop {
            self.holds_released().await;
            self.wait_for_tasks().await;
            let mut table = self.table();
            if table.holds == 0 {
                table.destroying = true;
                break;
            }
        }
        let mut destroyed = Vec::new();
        loop {
            let Some((key, obj)) = self.table().created.pop() else { break };
            let def = &self.app.graph.protos[key];
            if let Some(destroy) = &def.destroy
                && let Err(error) = def.run_hook("destroy", || destroy.call(obj.clone())).await
            {
                crate::telemetry::hook_failed("destroy");
                tracing::error!(%error, "a destroy hook failed; the scope's other objects are destroyed all the same");
            }
            destroyed.push(obj);
        }
        self.close(destroyed);
    }

    /// Marks the scope ended and drops its objects, newest first, outside the lock: user `Drop`
    /// impls may do anything. `destroyed` holds the objects newest first; what is still in
    /// the created list (no hooks ran) follows.
    fn close(&self, destroyed: Vec<AnyArc>) {
        let parts = self.take_all(&mut self.table());
        Self::drop_all(parts, destroyed);
    }

    /// Marks the table ended and takes its contents.
    fn take_all(&self, table: &mut Table) -> (SmallMap<Slot>, Vec<(usize, AnyArc)>) {
        table.ended = true;
        self.app.record_scope_size(table.slots.len());
        // A late background task waiting for a slot learns that the scope has ended.
        self.wake(table);
        (std::mem::take(&mut table.slots), std::mem::take(&mut table.created))
    }

    /// Drops what `take_all` took, newest object first, each on its own: a panicking `Drop` is
    /// caught and logged, and the next object is still dropped (a second panic while the first
    /// unwinds would abort the process).
    fn drop_all((slots, created): (SmallMap<Slot>, Vec<(usize, AnyArc)>), destroyed: Vec<AnyArc>) {
        // The table's references first: each object's last one is in `destroyed` or `created`,
        // dropped newest first (no list gathered: a scope's end allocates nothing).
        for (_, slot) in slots.into_items() {
            crate::isolate::drop_isolated(slot);
        }
        for obj in destroyed {
            crate::isolate::drop_isolated(obj);
        }
        for (_, obj) in created.into_iter().rev() {
            crate::isolate::drop_isolated(obj);
        }
    }
}

/// The rest of a scope's end (background tasks, destroy hooks), inside the scope and the
/// current `tracing` span, counted by the App until it is done.
fn ending(shared: Arc<ScopeShared>) -> impl Future<Output = ()> + Send + 'static {
    let guard = PendingGuard::new(shared.app.clone());
    let counted = shared.app.metrics.ending();
    scoped(ScopeHandle::joining(shared.clone()), async move {
        // Counted as ending until the end of this block (nothing without the feature).
        let _ending = counted;
        shared.finish().await;
        drop(guard);
    })
    .instrument(tracing::Span::current())
}

/// Where a [`ContextFuture`] stands. The phases after the output are boxed: a scope that has
/// hooks to run or tasks to wait for allocates for them anyway, and the request with none (the
/// common one) keeps a future one output smaller, which every move of it copies.
enum Phase<O> {
    /// The scope's future runs.
    Running,
    /// Completion hooks run; `output` waits for them.
    Completing(Box<Completing<O>>),
    /// The scope ends before the output is handed back (the default).
    Ending(Box<Ending<O>>),
    Done,
}

struct Completing<O> {
    shared: Arc<ScopeShared>,
    hooks: BoxFuture<Result<(), DiError>>,
    output: Option<O>,
}

struct Ending<O> {
    end: BoxFuture<()>,
    output: Option<(O, Completed)>,
}

/// The completion phase's result; the error boxed, so that the output travels light.
type Completed = Result<(), Box<DiError>>;

pin_project! {
    /// The future returned by [`App::run_in_context`](crate::App::run_in_context): runs the
    /// inner future in a context scope, then the scope's end, in the order documented there.
    ///
    /// Dropped early (a cancelled request) or when the inner future panics, it skips the
    /// completion phase and ends the scope on a spawned task that the App tracks
    /// ([`App::shutdown`](crate::App::shutdown) waits for it). A completion phase already
    /// begun (a client gone during a `COMMIT`) is not cut: it finishes on that task, and the
    /// scope's events follow the outcome it reaches.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tegu_core::futures::ContextFuture;
    /// use tegu_core::{App, ProtoDef};
    ///
    /// static DESTROYED: AtomicBool = AtomicBool::new(false);
    /// struct Tx;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Tx>(|_| Ok(Tx)).on_destroy(|_: Arc<Tx>| async {
    ///         DESTROYED.store(true, Ordering::SeqCst);
    ///         Ok(())
    ///     }))
    ///     .build()
    ///     .await?;
    /// let scope: ContextFuture<_> = app.run_in_context(async { app.get_object::<Tx>().is_ok() });
    /// assert!(!DESTROYED.load(Ordering::SeqCst)); // nothing runs until it is awaited
    /// assert!(scope.await);
    /// assert!(DESTROYED.load(Ordering::SeqCst)); // the scope ended before the output came back
    /// # Ok(()) }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ContextFuture<F: Future> {
        #[pin]
        inner: crate::local::Scoped<ScopeHandle, F>,
        phase: Phase<F::Output>,
        in_background: bool,
        // Zero-sized without the `metrics` feature.
        open: crate::telemetry::Open,
    }

    impl<F: Future> PinnedDrop for ContextFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let end: Option<BoxFuture<()>> = match std::mem::replace(this.phase, Phase::Done) {
                // Cancelled or panicked: the events the scope holds are released as failed
                // (now, rather than with the scope).
                Phase::Running => this.inner.take_value().and_then(ScopeHandle::into_shared).and_then(|shared| {
                    // A completion phase the future had begun (`complete_scope`) goes on on a
                    // task of its own, and settles what the scope holds.
                    if !shared.completion_running() {
                        shared.abandon_completion();
                        shared.settle_held(false);
                    }
                    start_end(shared)
                }),
                Phase::Completing(completing) => {
                    let Completing { shared, hooks, .. } = *completing;
                    if let Some(hooks) = finish_completion(&shared, hooks) {
                        drop(hooks);
                        completion_cancelled();
                        shared.abandon_completion();
                        shared.settle_held(false);
                    }
                    start_end(shared)
                }
                Phase::Ending(ending) => Some(ending.end),
                Phase::Done => None,
            };
            // With no runtime to run destroy hooks on, dropping `end` drops the scope's last
            // handle, and with it the objects.
            drop(end.and_then(spawn_end));
        }
    }
}

/// Finishes a completion phase whose future was dropped before its end (a client gone during
/// a `COMMIT`) on a task of the scope's, which its end waits for: a commit under way is not cut
/// at an unknown point, and the scope's events are released with the outcome the phase
/// reaches. `hooks` runs inside the scope. Gives it back without a runtime.
fn finish_completion(
    shared: &Arc<ScopeShared>,
    hooks: BoxFuture<Result<(), DiError>>,
) -> Option<BoxFuture<Result<(), DiError>>> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return Some(hooks) };
    let guard = PendingGuard::new(shared.clone());
    drop(runtime.spawn(async move {
        let _guard = guard;
        if let Err(error) = hooks.await {
            tracing::error!(%error, "the completion phase of a cancelled scope, finished on its own, failed");
        }
    }));
    None
}

/// Spawns the end of a scope on the current runtime; gives it back if there is none.
fn spawn_end(end: BoxFuture<()>) -> Option<BoxFuture<()>> {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            drop(runtime.spawn(end));
            None
        }
        Err(_) => Some(end),
    }
}

/// Logs that a completion phase was dropped before its end; its scope still ends, as failed.
#[cold]
fn completion_cancelled() {
    tracing::warn!(
        "the completion phase of a context scope was cancelled: the completion hooks it had not reached did not run"
    );
}

/// The end of `shared` as a future, or `None` if the scope could end at once (it did).
fn start_end(shared: Arc<ScopeShared>) -> Option<BoxFuture<()>> {
    start_end_held(shared).0
}

/// [`start_end`], and whether a hold is alive (the end then cannot run before the output is
/// handed back).
fn start_end_held(shared: Arc<ScopeShared>) -> (Option<BoxFuture<()>>, bool) {
    match shared.close_if_idle(shared.table()) {
        Next::End { held } => (Some(Box::pin(ending(shared))), held),
        _ => (None, false),
    }
}

impl<F: Future> ContextFuture<F> {
    pub(crate) fn new(inner: crate::local::Scoped<ScopeHandle, F>, open: crate::telemetry::Open) -> Self {
        ContextFuture { inner, phase: Phase::Running, in_background: false, open }
    }

    /// Hands the output back as soon as the completion phase is over (step 3 of
    /// [`App::run_in_context`](crate::App::run_in_context)), and ends the scope (steps 4 and 5)
    /// on a task of its own, tracked by the App: what tegu-http does, so that a response never
    /// waits for background work or destroy hooks. Without a tokio runtime to spawn on, the
    /// scope ends before the output is handed back, as by default.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Audit(AtomicBool);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Audit>(|_| Ok(Audit::default()))
    ///         .on_destroy(|_: Arc<Audit>| async { Ok(()) }))
    ///     .build()
    ///     .await?;
    /// let answer = app.run_in_context(async {
    ///     app.get_object::<Audit>().unwrap().0.store(true, Ordering::Relaxed);
    ///     tegu_core::spawn(tokio::time::sleep(std::time::Duration::from_millis(50)));
    ///     42
    /// })
    /// .end_in_background()
    /// .await; // back at once; the scope waits for the sleep on its own task
    /// assert_eq!(answer, 42);
    /// app.shutdown().await?; // waits for scopes still ending, then destroys singletons
    /// # Ok(()) }
    /// ```
    pub fn end_in_background(mut self) -> Self {
        self.in_background = true;
        self
    }

    /// Returns the completion phase's failure with the output: the future resolves to
    /// `Err` if a completion hook failed or panicked, as
    /// [`App::try_run_in_context`](crate::App::try_run_in_context).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, DiError, ProtoDef};
    ///
    /// struct Ledger;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Ledger>(|_| Ok(Ledger))
    ///         .on_complete(|_: Arc<Ledger>| async { Err("the disk is full".into()) }))
    ///     .build()
    ///     .await?;
    /// let work = async { app.get_object::<Ledger>().map(|_| "written") };
    /// // Awaited as is, the scope logs the failure and returns the output...
    /// assert_eq!(app.run_in_context(work).await?, "written");
    /// // ... with `try_complete`, it returns the failure instead.
    /// let work = async { app.get_object::<Ledger>().map(|_| "written") };
    /// let result = app.run_in_context(work).try_complete().await;
    /// assert!(matches!(result, Err(DiError::Hook { stage: "complete", .. })), "{result:?}");
    /// # Ok(()) }
    /// ```
    pub fn try_complete(self) -> TryContextFuture<F> {
        TryContextFuture { inner: self }
    }

    /// Drives the scope; `Ready` with the output and the completion phase's result.
    fn poll_scope(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<(F::Output, Completed)> {
        let mut this = self.project();
        loop {
            // `held`: a hold outlives the output (it is in it, or elsewhere); the end waits for
            // it, so it cannot run before the output is handed back.
            let (end, output, result, held): (Option<BoxFuture<()>>, _, Completed, bool) = match this.phase {
                Phase::Running => {
                    let output = std::task::ready!(this.inner.as_mut().poll(cx));
                    let Some(shared) = this.inner.as_mut().take_value().and_then(ScopeHandle::into_shared) else {
                        *this.phase = Phase::Done;
                        return Poll::Ready((output, Ok(())));
                    };
                    match shared.after_output() {
                        Next::Complete(objects) => {
                            let hooks = scoped(ScopeHandle::joining(shared.clone()), {
                                let shared = shared.clone();
                                async move { shared.complete(objects).await }
                            });
                            let completing = Completing { shared, hooks: Box::pin(hooks), output: Some(output) };
                            *this.phase = Phase::Completing(Box::new(completing));
                            continue;
                        }
                        // The scope's future may have run the phase itself (`complete_scope`):
                        // it received the result.
                        Next::Closed => {
                            *this.phase = Phase::Done;
                            return Poll::Ready((output, Ok(())));
                        }
                        Next::End { held } => (Some(Box::pin(ending(shared))), output, Ok(()), held),
                    }
                }
                Phase::Completing(completing) => {
                    let result = std::task::ready!(completing.hooks.as_mut().poll(cx));
                    let (end, held) = start_end_held(completing.shared.clone());
                    (end, completing.output.take().expect("taken once"), result.map_err(Box::new), held)
                }
                Phase::Ending(_) => {
                    // Out of the phase while it is polled: if it panics, `Drop` must not spawn
                    // the poisoned future again.
                    let Phase::Ending(mut ending) = std::mem::replace(this.phase, Phase::Done) else {
                        unreachable!("matched above")
                    };
                    if ending.end.as_mut().poll(cx).is_pending() {
                        *this.phase = Phase::Ending(ending);
                        return Poll::Pending;
                    }
                    return Poll::Ready(ending.output.take().expect("set with the phase"));
                }
                Phase::Done => panic!("ContextFuture polled after completion"),
            };
            let end = if *this.in_background || held { end.and_then(spawn_end) } else { end };
            if let Some(end) = end {
                *this.phase = Phase::Ending(Box::new(Ending { end, output: Some((output, result)) }));
                continue;
            }
            *this.phase = Phase::Done;
            return Poll::Ready((output, result));
        }
    }
}

impl<F: Future> Future for ContextFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let (output, result) = std::task::ready!(self.poll_scope(cx));
        if let Err(error) = result {
            tracing::error!(%error, "the completion phase of a context scope failed; its output is returned all the same (`App::try_run_in_context` returns the error instead)");
        }
        Poll::Ready(output)
    }
}

impl<F: Future> std::fmt::Debug for ContextFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phase = match self.phase {
            Phase::Running => "running",
            Phase::Completing(_) => "completing",
            Phase::Ending(_) => "ending",
            Phase::Done => "done",
        };
        f.debug_struct("ContextFuture")
            .field("phase", &phase)
            .field("in_background", &self.in_background)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// The future returned by [`App::try_run_in_context`](crate::App::try_run_in_context) and
    /// [`ContextFuture::try_complete`]: a [`ContextFuture`] that resolves to `Err` when the
    /// completion phase fails.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::futures::TryContextFuture;
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Tx;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Tx>(|_| Ok(Tx))
    ///         .on_complete(|_: Arc<Tx>| async { Err("rolled back".into()) }))
    ///     .build()
    ///     .await?;
    /// // No `Tx` in this scope, so no completion hook to fail.
    /// let untouched: TryContextFuture<_> = app.try_run_in_context(async { 42 });
    /// assert_eq!(untouched.await?, 42);
    /// // A `Tx` whose completion fails: the scope's result is that failure.
    /// let failed = app.try_run_in_context(async { app.get_object::<Tx>().map(|_| 42) }).await;
    /// assert!(failed.is_err());
    /// # Ok(()) }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct TryContextFuture<F: Future> {
        #[pin]
        inner: ContextFuture<F>,
    }
}

impl<F: Future> TryContextFuture<F> {
    /// As [`ContextFuture::end_in_background`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let (finish, finished) = tokio::sync::oneshot::channel::<()>();
    /// let answer = app
    ///     .try_run_in_context(async {
    ///         tegu_core::spawn(async { finished.await.ok(); }); // runs until `finish` is sent
    ///         42
    ///     })
    ///     .end_in_background()
    ///     .await?; // back at once: the scope waits for its task on a task of its own
    /// assert_eq!(answer, 42);
    /// assert_eq!(app.scopes_ending(), 1);
    /// finish.send(()).unwrap();
    /// app.shutdown().await?; // waits for it
    /// assert_eq!(app.scopes_ending(), 0);
    /// # Ok(()) }
    /// ```
    pub fn end_in_background(self) -> Self {
        TryContextFuture { inner: self.inner.end_in_background() }
    }
}

impl<F: Future> Future for TryContextFuture<F> {
    type Output = Result<F::Output, DiError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (output, result) = std::task::ready!(self.project().inner.poll_scope(cx));
        Poll::Ready(result.map(|()| output).map_err(|error| *error))
    }
}

/// Runs the current scope's completion phase now, from inside the scope: its completion hooks,
/// newest object first, until one fails. For code that must act on the outcome before the
/// scope's output is final (tegu-http turns a failure into a 500 and records that status for
/// destroy hooks).
///
/// The phase starts when the future is first polled, and runs once per scope: later calls,
/// and the scope's own end, do not run it again (the end does not report a failure returned
/// here). An object with a completion hook created while the hooks run (by one of them) is
/// completed in a further pass; once the phase is over, creating one is refused with
/// [`DiError::LateCompletion`]. Dropped before its end, the future leaves the hooks it had not
/// reached unrun, and logs it. Outside any scope, or in a scope with no object yet, there is
/// nothing to complete and it returns `Ok(())`.
///
/// # Errors
///
/// [`DiError::Hook`] (stage `"complete"`) for the first completion hook that fails or panics,
/// naming its object.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, ProtoDef, DiError};
///
/// struct Ledger;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder()
///     .register(ProtoDef::context::<Ledger>(|_| Ok(Ledger))
///         .on_complete(|_: Arc<Ledger>| async { Err("the ledger is closed".into()) }))
///     .build()
///     .await?;
/// let answer = app
///     .run_in_context(async {
///         app.get_object::<Ledger>().unwrap();
///         match tegu_core::scope::complete_scope().await {
///             Ok(()) => "saved".to_owned(),
///             Err(e) => format!("not saved: {e}"),
///         }
///     })
///     .await;
/// assert!(answer.starts_with("not saved: complete of `"), "{answer}");
/// # Ok(()) }
/// ```
pub fn complete_scope() -> CompleteScope {
    CompleteScope { hooks: None, started: false }
}

/// The future of [`complete_scope`]. The phase starts when it is first polled; dropped before
/// its end, it logs that the hooks it had not reached did not run.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tegu_core::futures::CompleteScope;
/// use tegu_core::{App, ProtoDef};
///
/// static COMMITS: AtomicUsize = AtomicUsize::new(0);
/// struct Tx;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::context::<Tx>(|_| Ok(Tx)).on_complete(|_: Arc<Tx>| async {
///         COMMITS.fetch_add(1, Ordering::SeqCst);
///         Ok(())
///     }))
///     .build()
///     .await?;
/// app.run_in_context(async {
///     app.get_object::<Tx>().unwrap();
///     let phase: CompleteScope = tegu_core::scope::complete_scope();
///     assert_eq!(COMMITS.load(Ordering::SeqCst), 0); // it starts when first polled
///     phase.await.unwrap();
///     assert_eq!(COMMITS.load(Ordering::SeqCst), 1);
/// })
/// .await;
/// assert_eq!(COMMITS.load(Ordering::SeqCst), 1); // the scope's end did not run it again
/// # Ok(()) }
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct CompleteScope {
    /// The hooks running, and the scope they complete, counted among its tasks while they run
    /// (its end waits for them, should they outlive this future).
    hooks: Option<(Hooks, Arc<ScopeShared>, PendingGuard<ScopeShared>)>,
    started: bool,
}

/// A completion phase running: its hooks, until one fails.
type Hooks = BoxFuture<Result<(), DiError>>;

impl Future for CompleteScope {
    type Output = Result<(), DiError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !std::mem::replace(&mut self.started, true) {
            let work = CURRENT.try_with(|handle| {
                let shared = match handle.shared.get() {
                    Some(shared) => shared,
                    // Objects this task built with a completion hook: the shared table runs it.
                    None if handle.owned_hooks(true) => handle.shared(),
                    None => {
                        // Nothing to complete; a table made later starts with the phase over.
                        handle.completed.set(true);
                        return None;
                    }
                };
                match shared.begin_completion()? {
                    Begun::Run(objects) => Some((shared.clone(), objects)),
                    Begun::Over => {
                        shared.settle_held(true);
                        None
                    }
                }
            });
            self.hooks = work.ok().flatten().map(|(shared, objects)| {
                let running = Arc::clone(&shared);
                let counted = PendingGuard::new(Arc::clone(&shared));
                (Box::pin(async move { running.complete(objects).await }) as Hooks, shared, counted)
            });
        }
        let Some((hooks, _, _)) = &mut self.hooks else { return Poll::Ready(Ok(())) };
        let done = std::task::ready!(hooks.as_mut().poll(cx));
        self.hooks = None;
        Poll::Ready(done)
    }
}

impl Drop for CompleteScope {
    /// Dropped before its end (the request cancelled: a client gone during a `COMMIT`), the
    /// phase goes on on a task of the scope's own; without a runtime, it stops where it was.
    fn drop(&mut self) {
        if let Some((hooks, shared, counted)) = self.hooks.take() {
            let hooks: Hooks = Box::pin(scoped(ScopeHandle::joining(shared.clone()), async move {
                let _counted = counted;
                hooks.await
            }));
            if let Some(hooks) = finish_completion(&shared, hooks) {
                drop(hooks);
                completion_cancelled();
                // Stopped where it was: what it had not completed never will be, and objects
                // with a completion hook are refused from now on, as after any end of the phase.
                shared.abandon_completion();
                shared.settle_held(false);
            }
        }
    }
}

impl std::fmt::Debug for CompleteScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompleteScope").field("started", &self.started).field("running", &self.hooks.is_some()).finish()
    }
}

/// Runs `fut` in a new scope of `app`, with an object given by the caller. Inlined, as are its
/// callers on the request path: a call here would move the request's future once more.
#[inline]
pub(crate) fn run<F: Future>(app: Arc<AppInner>, seed: Seeds, fut: F) -> ContextFuture<F> {
    let open = app.metrics.scope();
    ContextFuture::new(scoped(ScopeHandle::new(app, seed), fut), open)
}

/// Runs `work` in a new scope of `app`, seeded with `lineage` (that of the request that caused
/// it): its completion phase if `work` succeeds, none (and its events released as failed) if it
/// fails. What an event handler and a scheduled job run in.
pub(crate) async fn run_job(
    app: &Arc<AppInner>,
    lineage: &crate::lineage::Lineage,
    work: impl Future<Output = Result<(), crate::error::BoxError>>,
) -> Result<(), crate::error::BoxError> {
    let seeds = if lineage.is_empty() { Seeds::default() } else { super::lineage::seeds(app, lineage) };
    run(app.clone(), seeds, async move {
        match work.await {
            Ok(()) => complete_scope().await.map_err(Into::into),
            Err(error) => {
                fail_current();
                Err(error)
            }
        }
    })
    .await
}
