//! Context scopes: the task-local that carries the current request's objects.

use std::any::Any;
use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use std::task::Poll;

use pin_project_lite::pin_project;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::task::futures::TaskLocalFuture;

use crate::app::AppInner;
use crate::error::DiError;
use crate::graph::FastMap;
use crate::proto::AnyArc;
use crate::resolver::Resolver;

tokio::task_local! {
    static CURRENT: ScopeHandle;
}

/// What each task of a scope holds in the task-local: the App, the scope's shared part
/// (created on the first miss or `spawn`, so an empty scope allocates nothing), and a private
/// cache of the objects this task already resolved, so that a warm `ContextRef::get` takes no
/// lock.
pub(crate) struct ScopeHandle {
    app_id: u64,
    app: Arc<AppInner>,
    shared: OnceCell<Arc<ScopeShared>>,
    cache: RefCell<SmallMap<AnyArc>>,
    /// An object given by whoever opened the scope (`App::run_in_context_with`): its proto
    /// index and value. Moved into the shared table when that is created, so that other tasks
    /// and factories find it there.
    seed: Option<(u32, AnyArc)>,
}

impl ScopeHandle {
    fn new(app: Arc<AppInner>, seed: Option<(u32, AnyArc)>) -> Self {
        ScopeHandle { app_id: app.id, app, shared: OnceCell::new(), cache: RefCell::new(SmallMap::default()), seed }
    }

    fn joining(shared: Arc<ScopeShared>) -> Self {
        let handle = ScopeHandle::new(shared.app.clone(), None);
        let _ = handle.shared.set(shared);
        handle
    }

    fn shared(&self) -> &Arc<ScopeShared> {
        self.shared.get_or_init(|| ScopeShared::new(self.app.clone(), self.seed.clone()))
    }

    #[inline]
    fn cached(&self, app_id: u64, key: u32) -> Option<AnyArc> {
        if self.app_id != app_id {
            return None;
        }
        self.cache.try_borrow().ok()?.get(key).cloned()
    }

    #[cold]
    fn miss(&self, app_id: u64, key: u32, wanted: &'static str) -> Result<AnyArc, DiError> {
        if self.app_id != app_id {
            return Err(DiError::ForeignScope { wanted });
        }
        let obj = match &self.seed {
            Some((seeded, obj)) if *seeded == key => obj.clone(),
            _ => self.shared().resolve_sync(key as usize)?,
        };
        self.remember(key, &obj);
        Ok(obj)
    }

    fn remember(&self, key: u32, obj: &AnyArc) {
        // Inside a `ContextRef::with` callback the cache is borrowed: skip caching then.
        if let Ok(mut cache) = self.cache.try_borrow_mut() {
            if cache.get(key).is_none() {
                cache.insert(key, obj.clone());
            }
        }
    }
}

/// A small map from proto index to value: a linear scan while small (the common case: a request
/// touches a handful of context objects), an index once it grows.
pub(crate) struct SmallMap<V> {
    items: Vec<(u32, V)>,
    index: Option<FastMap<u32, usize>>,
}

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        SmallMap { items: Vec::new(), index: None }
    }
}

const LINEAR_LIMIT: usize = 16;

impl<V> SmallMap<V> {
    #[inline]
    fn get(&self, key: u32) -> Option<&V> {
        match &self.index {
            None => self.items.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            Some(index) => index.get(&key).map(|&i| &self.items[i].1),
        }
    }

    fn insert(&mut self, key: u32, value: V) {
        self.items.push((key, value));
        if let Some(index) = &mut self.index {
            index.insert(key, self.items.len() - 1);
        } else if self.items.len() > LINEAR_LIMIT {
            self.index = Some(self.items.iter().enumerate().map(|(i, (k, _))| (*k, i)).collect());
        }
    }
}

enum Entry {
    /// Built by a sync factory; racing tasks wait for the one that builds it.
    Sync(OnceLock<Result<AnyArc, DiError>>),
    /// Has an async init hook somewhere in its construction: built by `get_async`.
    Async(tokio::sync::OnceCell<AnyArc>),
}

#[derive(Default)]
struct Table {
    entries: SmallMap<Arc<Entry>>,
    /// Objects in creation order, for destruction in reverse.
    created: Vec<(usize, AnyArc)>,
    destroyed: bool,
}

/// One context scope, shared by the task that opened it and the tasks it spawned with
/// [`spawn`].
pub(crate) struct ScopeShared {
    pub(crate) app: Arc<AppInner>,
    table: Mutex<Table>,
    tasks: AtomicUsize,
    tasks_done: Notify,
    closed: AtomicBool,
}

impl ScopeShared {
    fn new(app: Arc<AppInner>, seed: Option<(u32, AnyArc)>) -> Arc<Self> {
        let mut table = Table::default();
        if let Some((key, obj)) = seed {
            // Built already: not in `created`, so the scope runs no hook for it.
            table.entries.insert(key, Arc::new(Entry::Sync(OnceLock::from(Ok(obj)))));
        }
        Arc::new(ScopeShared {
            app,
            table: Mutex::new(table),
            tasks: AtomicUsize::new(0),
            tasks_done: Notify::new(),
            closed: AtomicBool::new(false),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // No user code runs under this lock, so a poisoned lock still holds consistent data.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn entry(&self, key: usize) -> Result<Arc<Entry>, DiError> {
        let mut table = self.table();
        if let Some(entry) = table.entries.get(key as u32) {
            return Ok(entry.clone());
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(DiError::ScopeClosed { wanted: self.app.graph.protos[key].type_name });
        }
        let entry = Arc::new(if self.app.graph.needs_async[key] {
            Entry::Async(tokio::sync::OnceCell::new())
        } else {
            Entry::Sync(OnceLock::new())
        });
        table.entries.insert(key as u32, entry.clone());
        Ok(entry)
    }

    /// The scope's object for context proto `key`, built now if this is the first request.
    /// No lock is held while the factory runs, so it may resolve other context objects.
    pub(crate) fn resolve_sync(&self, key: usize) -> Result<AnyArc, DiError> {
        match &*self.entry(key)? {
            Entry::Sync(cell) => cell.get_or_init(|| self.construct(key)).clone(),
            Entry::Async(cell) => {
                cell.get().cloned().ok_or(DiError::AsyncInit { wanted: self.app.graph.protos[key].type_name })
            }
        }
    }

    /// Like [`resolve_sync`](Self::resolve_sync), running async init hooks (the object's and its
    /// by-value dependencies') on first use.
    pub(crate) fn resolve_async(
        &self,
        key: usize,
    ) -> Pin<Box<dyn Future<Output = Result<AnyArc, DiError>> + Send + '_>> {
        Box::pin(async move {
            let entry = self.entry(key)?;
            let cell = match &*entry {
                Entry::Sync(_) => return self.resolve_sync(key),
                Entry::Async(cell) => cell,
            };
            cell.get_or_try_init(|| async {
                let graph = &self.app.graph;
                for dep in &graph.resolved[key] {
                    for target in dep.construction_targets() {
                        if graph.needs_async[target] {
                            self.resolve_async(target).await?;
                        }
                    }
                }
                let def = &graph.protos[key];
                let obj = self.build(key)?;
                if let Some(init) = &def.init {
                    init(obj.clone()).await.map_err(|e| DiError::Hook {
                        stage: "init",
                        type_name: def.type_name,
                        name: def.name.to_string(),
                        source: Arc::from(e),
                    })?;
                }
                self.record(key, &obj)?;
                Ok(obj)
            })
            .await
            .cloned()
        })
    }

    fn build(&self, key: usize) -> Result<AnyArc, DiError> {
        let resolver = Resolver {
            graph: &self.app.graph,
            singletons: &self.app.singletons,
            app_id: self.app.id,
            proto: key,
            scope: Some(self),
        };
        (self.app.graph.protos[key].factory)(&resolver)
    }

    fn construct(&self, key: usize) -> Result<AnyArc, DiError> {
        let obj = self.build(key)?;
        self.record(key, &obj)?;
        Ok(obj)
    }

    fn record(&self, key: usize, obj: &AnyArc) -> Result<(), DiError> {
        let mut table = self.table();
        if table.destroyed {
            return Err(DiError::ScopeClosed { wanted: self.app.graph.protos[key].type_name });
        }
        table.created.push((key, obj.clone()));
        Ok(())
    }

    async fn wait_for_tasks(&self) {
        if self.tasks.load(Ordering::Acquire) == 0 {
            return;
        }
        let wait = async {
            loop {
                let notified = self.tasks_done.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.tasks.load(Ordering::Acquire) == 0 {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(self.app.background_timeout, wait).await.is_err() {
            tracing::warn!(
                timeout = ?self.app.background_timeout,
                tasks = self.tasks.load(Ordering::Acquire),
                "background tasks outlived their context scope; destroying its objects anyway"
            );
        }
    }

    /// Ends the scope: waits for its background tasks, then runs destroy hooks in reverse
    /// creation order and drops the objects. Each object is destroyed at most once, even when
    /// this runs twice (a cancelled scope's clean-up racing a normal end).
    async fn finish(&self) {
        self.wait_for_tasks().await;
        self.closed.store(true, Ordering::Release);
        loop {
            let (key, obj) = {
                let mut table = self.table();
                match table.created.pop() {
                    Some(next) => next,
                    None => {
                        let entries = Self::close(&mut table);
                        drop(table);
                        drop(entries); // outside the lock: user `Drop` impls may do anything
                        return;
                    }
                }
            };
            let def = &self.app.graph.protos[key];
            if let Some(destroy) = &def.destroy {
                if let Err(error) = destroy(obj).await {
                    tracing::warn!(object = %def.label(), %error, "destroy hook of a context object failed");
                }
            }
        }
    }

    fn close(table: &mut Table) -> (SmallMap<Arc<Entry>>, Vec<(usize, AnyArc)>) {
        table.destroyed = true;
        (std::mem::take(&mut table.entries), std::mem::take(&mut table.created))
    }

    /// Drops every object, newest first, without running hooks: there are none to run, or no
    /// runtime left to run them on.
    fn close_now(&self) {
        self.closed.store(true, Ordering::Release);
        let (entries, mut created) = Self::close(&mut self.table());
        // Outside the lock: user `Drop` impls may do anything.
        while let Some(object) = created.pop() {
            drop(object);
        }
        drop(entries);
    }

    /// Whether ending the scope needs no async work: no task to wait for, no destroy hook to
    /// run (objects without one are dropped, newest first, by [`close_now`](Self::close_now)).
    fn is_idle(&self) -> bool {
        let protos = &self.app.graph.protos;
        self.tasks.load(Ordering::Acquire) == 0
            && self.table().created.iter().all(|(key, _)| protos[*key].destroy.is_none())
    }
}

pin_project! {
    /// The future returned by [`App::run_in_context`](crate::App::run_in_context): runs the
    /// inner future in a context scope, then ends the scope (waits for its background tasks,
    /// destroys its objects) before completing. Dropped early, it ends the scope on a spawned
    /// task.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ContextFuture<F: Future> {
        #[pin]
        inner: TaskLocalFuture<ScopeHandle, F>,
        ending: Option<(Pin<Box<dyn Future<Output = ()> + Send>>, Option<F::Output>)>,
    }

    impl<F: Future> PinnedDrop for ContextFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            let shared = match this.ending.take() {
                Some((ending, _)) => Some(ending),
                None => this
                    .inner
                    .take_value()
                    .and_then(|handle| handle.shared.into_inner())
                    .map(|shared| Box::pin(async move { shared.finish().await }) as Pin<Box<dyn Future<Output = ()> + Send>>),
            };
            if let Some(ending) = shared {
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn(ending);
                    }
                    // No runtime to run destroy hooks on: dropping `ending` drops the scope's
                    // last handle, and with it the objects.
                    Err(_) => drop(ending),
                }
            }
        }
    }
}

impl<F: Future> Future for ContextFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        if this.ending.is_none() {
            let out = std::task::ready!(this.inner.as_mut().poll(cx));
            let shared = this.inner.as_mut().take_value().and_then(|handle| handle.shared.into_inner());
            match shared {
                None => return Poll::Ready(out),
                Some(shared) if shared.is_idle() => {
                    shared.close_now();
                    return Poll::Ready(out);
                }
                Some(shared) => *this.ending = Some((Box::pin(async move { shared.finish().await }), Some(out))),
            }
        }
        let (ending, out) = this.ending.as_mut().expect("set above");
        std::task::ready!(ending.as_mut().poll(cx));
        let out = out.take().expect("ContextFuture polled after completion");
        *this.ending = None;
        Poll::Ready(out)
    }
}

impl<F: Future> std::fmt::Debug for ContextFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextFuture").field("ending", &self.ending.is_some()).finish_non_exhaustive()
    }
}

pub(crate) fn run<F: Future>(app: Arc<AppInner>, seed: Option<(u32, AnyArc)>, fut: F) -> ContextFuture<F> {
    ContextFuture { inner: CURRENT.scope(ScopeHandle::new(app, seed), fut), ending: None }
}

/// The current scope's object for context proto `key` of App `app_id`, if this task already
/// resolved it: the warm path, kept small so that it returns in registers. Not inlined: it is
/// shared by every `ContextRef<T>::get`, which stays a call and a downcast per type.
pub(crate) fn cached(app_id: u64, key: u32) -> Option<AnyArc> {
    CURRENT.try_with(|h| h.cached(app_id, key)).ok().flatten()
}

/// The slow path of [`cached`]: creates the object, or says why it cannot.
#[cold]
#[inline(never)]
pub(crate) fn resolve(app_id: u64, key: u32, wanted: &'static str) -> Result<AnyArc, DiError> {
    CURRENT.try_with(|h| h.miss(app_id, key, wanted)).unwrap_or(Err(DiError::NoScope { wanted }))
}

/// The current scope's object for context proto `key` of App `app_id`.
#[inline]
pub(crate) fn current(app_id: u64, key: u32, wanted: &'static str) -> Result<AnyArc, DiError> {
    match cached(app_id, key) {
        Some(obj) => Ok(obj),
        None => resolve(app_id, key, wanted),
    }
}

/// Calls `f` with a borrow of the current scope's object if this task already resolved it,
/// without touching its reference count; gives `f` back if it did not. Generic so that the
/// warm path inlines into `ContextRef::with` with no dynamic call: a few instructions per type.
#[inline]
pub(crate) fn with_cached<R, F: FnOnce(&(dyn Any + Send + Sync)) -> R>(app_id: u64, key: u32, f: F) -> Result<R, F> {
    let mut f = Some(f);
    let found = CURRENT.try_with(|h| {
        if h.app_id != app_id {
            return None;
        }
        let cache = h.cache.try_borrow().ok()?;
        let obj = cache.get(key)?;
        f.take().map(|f| f(&**obj))
    });
    match (found, f) {
        (Ok(Some(r)), _) => Ok(r),
        (_, Some(f)) => Err(f),
        (_, None) => unreachable!("`f` is taken only when it runs"),
    }
}

pub(crate) async fn current_async(app_id: u64, key: u32, wanted: &'static str) -> Result<AnyArc, DiError> {
    if let Some(obj) = cached(app_id, key) {
        return Ok(obj);
    }
    let shared = CURRENT
        .try_with(|h| (h.app_id == app_id).then(|| h.shared().clone()).ok_or(DiError::ForeignScope { wanted }))
        .unwrap_or(Err(DiError::NoScope { wanted }))?;
    let obj = shared.resolve_async(key as usize).await?;
    let _ = CURRENT.try_with(|h| h.remember(key, &obj));
    Ok(obj)
}

/// Counts a background task of a scope; the scope waits for the count to reach zero.
struct TaskGuard(Arc<ScopeShared>);

impl TaskGuard {
    fn new(shared: Arc<ScopeShared>) -> Self {
        shared.tasks.fetch_add(1, Ordering::AcqRel);
        TaskGuard(shared)
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if self.0.tasks.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.tasks_done.notify_waiters();
        }
    }
}

fn current_shared() -> Option<Arc<ScopeShared>> {
    CURRENT.try_with(|h| h.shared().clone()).ok()
}

/// Spawns `fut` on the tokio runtime inside the current context scope.
///
/// A task started with `tokio::spawn` does not see the scope: task-locals belong to the future
/// that set them. `spawn` carries the scope into the new task, and the scope waits for the task
/// before destroying its objects, at most for the App's background-task timeout (5 s unless
/// [`AppBuilder::background_task_timeout`](crate::AppBuilder::background_task_timeout) says
/// otherwise; tegg's `BackgroundTaskHelper` does the same). Outside any scope it is
/// `tokio::spawn`.
///
/// # Examples
///
/// ```
/// use di_core::{App, ProtoDef};
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Default)]
/// struct AuditLog(Mutex<Vec<String>>);
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::context::<AuditLog>(|_| Ok(AuditLog::default()))
///         .on_destroy(|log: Arc<AuditLog>| async move {
///             assert_eq!(*log.0.lock().unwrap(), ["written in the background"]);
///             Ok(())
///         }))
///     .build()
///     .await?;
/// let background = app.clone();
/// app.run_in_context(async move {
///     di_core::spawn(async move {
///         tokio::task::yield_now().await;
///         let log = background.get_object::<AuditLog>().unwrap();
///         log.0.lock().unwrap().push("written in the background".into());
///     });
///     // Returns before the task ran; the scope waits for it, then destroys the log.
/// }).await;
/// # Ok(()) }
/// ```
///
/// # Panics
///
/// Panics if called outside a tokio runtime, like `tokio::spawn`. The scope waits for the task
/// with `tokio::time::timeout`, which panics on a runtime built without the time driver
/// (`enable_time`; `#[tokio::main]` enables it).
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match current_shared() {
        Some(shared) => {
            let guard = TaskGuard::new(shared.clone());
            tokio::spawn(async move {
                let _guard = guard;
                CURRENT.scope(ScopeHandle::joining(shared), fut).await
            })
        }
        None => tokio::spawn(fut),
    }
}

/// Runs the blocking closure `f` on tokio's blocking pool inside the current context scope;
/// the scope waits for it like for [`spawn`]ed tasks.
///
/// # Panics
///
/// Panics if called outside a tokio runtime, like `tokio::task::spawn_blocking`.
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match current_shared() {
        Some(shared) => {
            let guard = TaskGuard::new(shared.clone());
            tokio::task::spawn_blocking(move || {
                let _guard = guard;
                CURRENT.sync_scope(ScopeHandle::joining(shared), f)
            })
        }
        None => tokio::task::spawn_blocking(f),
    }
}

/// Whether the caller runs inside a context scope.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = di_core::App::builder().build().await?;
/// assert!(!di_core::in_scope());
/// assert!(app.run_in_context(async { di_core::in_scope() }).await);
/// # Ok(()) }
/// ```
pub fn in_scope() -> bool {
    CURRENT.try_with(|_| ()).is_ok()
}
