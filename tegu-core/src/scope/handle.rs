//! The task-local that carries the current scope: its handle, the accessors behind
//! `ContextRef`, and `spawn`.

use crate::maps::SmallMap;

use std::any::Any;
use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::erased::AnyArc;
use crate::error::DiError;
use crate::pending::PendingGuard;
use crate::runtime::AppInner;

use super::spare;
use super::table::ScopeShared;

std::thread_local! {
    static CURRENT_SLOT: crate::local::Slot<ScopeHandle> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// The current scope's handle: a task-local that moves nothing (`local.rs`), entered by the
/// scope's futures for each poll.
pub(crate) static CURRENT: crate::local::Local<ScopeHandle> = crate::local::Local::new(&CURRENT_SLOT);

/// `fut` run in the scope of `handle`.
pub(crate) fn scoped<F>(handle: ScopeHandle, fut: F) -> crate::local::Scoped<ScopeHandle, F> {
    crate::local::Scoped::new(&CURRENT, handle, fut)
}

/// What each task of a scope holds in the task-local: the App, the scope's shared part
/// (created on the first miss or `spawn`, so an empty scope allocates nothing), and a private
/// cache of the objects this task already resolved, so that a warm `ContextRef::get` takes no
/// lock.
pub(crate) struct ScopeHandle {
    app_id: u64,
    pub(super) app: Arc<AppInner>,
    pub(super) shared: OnceCell<Arc<ScopeShared>>,
    /// Until the scope is shared, the scope's objects themselves (`owned.rs`).
    pub(super) cache: RefCell<TaskCache>,
    /// The owned scope's constructions in flight on this thread.
    pub(super) frames: super::owned::Frames,
    /// Objects given by whoever opened the scope (`App::run_in_context_with`, `App::scope`).
    /// Copied into the shared table when that is created, so that other tasks and factories
    /// find them there.
    pub(super) seed: Seeds,
    /// [`discard_events`] ran before the shared part existed: it starts dropping events.
    discarded: std::cell::Cell<bool>,
    /// [`complete_scope`] ran before the shared part existed: it starts with the completion
    /// phase over.
    pub(super) completed: std::cell::Cell<bool>,
}

/// Objects a scope starts with: proto index and value. The first is held inline (tegu-http's
/// request head: no allocation, and a handle of four words); more, and hooks asked for, are
/// rare (tests, jobs) and boxed.
#[derive(Clone, Default)]
pub(crate) struct Seeds {
    first: Option<(u32, AnyArc)>,
    rest: Option<Box<MoreSeeds>>,
}

#[derive(Clone, Default)]
struct MoreSeeds {
    more: Vec<(u32, AnyArc)>,
    /// The seeds whose complete and destroy hooks the scope runs, as if it had built them.
    hooked: Vec<u32>,
}

impl Seeds {
    #[inline]
    pub(crate) fn one(key: u32, obj: AnyArc) -> Self {
        Seeds { first: Some((key, obj)), rest: None }
    }

    /// Adds `obj` for `key`, replacing what was given for it before; with `hooks`, the scope
    /// runs its complete and destroy hooks.
    pub(crate) fn set(&mut self, key: u32, obj: AnyArc, hooks: bool) {
        if let Some(rest) = &mut self.rest {
            rest.hooked.retain(|&k| k != key);
        }
        if hooks {
            self.rest.get_or_insert_default().hooked.push(key);
        }
        let more = self.rest.iter_mut().flat_map(|r| r.more.iter_mut());
        if let Some(slot) = self.first.iter_mut().chain(more).find(|(k, _)| *k == key) {
            slot.1 = obj;
        } else if self.first.is_none() {
            self.first = Some((key, obj));
        } else {
            self.rest.get_or_insert_default().more.push((key, obj));
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &(u32, AnyArc)> {
        self.first.iter().chain(self.rest.iter().flat_map(|r| r.more.iter()))
    }

    /// The seed of `key`: the inline one first (a request's head), then the rest, if any.
    #[inline]
    pub(crate) fn get(&self, key: u32) -> Option<&AnyArc> {
        match (&self.first, &self.rest) {
            (Some((k, obj)), _) if *k == key => Some(obj),
            (_, None) => None,
            (_, Some(rest)) => rest.more.iter().find(|(k, _)| *k == key).map(|(_, obj)| obj),
        }
    }

    pub(crate) fn hooked(&self, key: u32) -> bool {
        self.rest.as_ref().is_some_and(|r| r.hooked.contains(&key))
    }

    fn any_hooked(&self) -> bool {
        self.rest.as_ref().is_some_and(|r| !r.hooked.is_empty())
    }
}

impl ScopeHandle {
    #[inline]
    pub(super) fn new(app: Arc<AppInner>, seed: Seeds) -> Self {
        let hooked = seed.any_hooked();
        let handle = ScopeHandle {
            app_id: app.id,
            app,
            shared: OnceCell::new(),
            cache: RefCell::new(TaskCache::default()),
            frames: Default::default(),
            seed,
            discarded: std::cell::Cell::new(false),
            completed: std::cell::Cell::new(false),
        };
        if hooked {
            // The end of the scope runs their hooks: it needs the table, used or not.
            handle.shared();
        }
        handle
    }

    pub(super) fn joining(shared: Arc<ScopeShared>) -> Self {
        Self::joining_with(shared, TaskCache::default())
    }

    /// A task's handle on an existing scope, starting from the objects it resolved before.
    pub(super) fn joining_with(shared: Arc<ScopeShared>, cache: TaskCache) -> Self {
        ScopeHandle {
            app_id: shared.app.id,
            app: shared.app.clone(),
            shared: OnceCell::from(shared),
            cache: RefCell::new(cache),
            frames: Default::default(),
            seed: Seeds::default(),
            discarded: std::cell::Cell::new(false),
            completed: std::cell::Cell::new(false),
        }
    }

    /// The scope's shared part, made now if the scope was still owned by this task: it takes
    /// over the objects this task built and its constructions in flight.
    pub(super) fn shared(&self) -> &Arc<ScopeShared> {
        self.shared.get_or_init(|| {
            let shared = ScopeShared::new(self.app.clone(), self.seed.clone());
            if let Ok(cache) = self.cache.try_borrow() {
                shared.adopt(cache.iter(), &self.frames.keys());
            }
            if self.completed.get() {
                shared.completed_before(!self.discarded.get());
            } else if self.discarded.get() {
                shared.settle_held(false);
            }
            shared
        })
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
        let obj = match self.seed.get(key) {
            Some(obj) => obj.clone(),
            // Refused even when it is built already: whether a `get` works must not depend on
            // whether some `get_async` happened to run first.
            _ if self.app.graph.needs_async[key as usize] => return Err(DiError::AsyncInit { wanted }),
            _ => match self.shared.get() {
                Some(shared) => shared.resolve_sync(key as usize)?,
                None => {
                    let obj = self.build_owned(key)?;
                    if self.shared.get().is_none() {
                        return Ok(obj); // in the cache: it is the owned scope's table
                    }
                    obj
                }
            },
        };
        self.remember(key, &obj);
        Ok(obj)
    }

    /// A context dependency of a factory running in this scope: a seed, an object built, or
    /// one built now (not remembered as this task's: a factory's resolution is not the task's).
    /// `wanted` names the type for an error only: read from the graph, cold memory in a large one.
    #[inline]
    fn dependency(&self, app_id: u64, key: u32, wanted: impl FnOnce() -> &'static str) -> Result<AnyArc, DiError> {
        if self.app_id != app_id {
            return Err(DiError::ForeignScope { wanted: wanted() });
        }
        if let Some(obj) = self.seed.get(key) {
            return Ok(obj.clone());
        }
        if let Some(shared) = self.shared.get() {
            return shared.resolve_sync(key as usize);
        }
        if let Some(obj) = self.cache.try_borrow().ok().and_then(|c| c.get(key).cloned()) {
            return Ok(obj);
        }
        self.miss(app_id, key, wanted())
    }

    fn remember(&self, key: u32, obj: &AnyArc) {
        // Inside a `ContextRef::with` callback the cache is borrowed: skip caching then.
        if let Ok(mut cache) = self.cache.try_borrow_mut()
            && cache.get(key).is_none()
        {
            cache.insert(key, obj.clone());
        }
    }
}

/// A task's cache of the scope's objects: the first inline (a request that reaches one context
/// object allocates nothing for its cache), the rest in a [`SmallMap`]. Until the scope is
/// shared, the scope's table: its entries are in creation order.
#[derive(Default)]
pub(crate) struct TaskCache {
    first: Option<(u32, AnyArc)>,
    /// Boxed: a request that reaches one object needs none of it, and its handle stays small.
    rest: Option<Box<SmallMap<AnyArc>>>,
    /// Whether an object an owned scope built has a completion hook, a destroy hook.
    pub(super) hooks: u8,
}

impl TaskCache {
    /// The entries, in the order they were added.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &AnyArc)> {
        self.first.iter().chain(self.rest.iter().flat_map(|r| r.iter())).map(|(k, obj)| (*k, obj))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.first.is_none() && self.rest.is_none()
    }

    pub(super) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.as_ref().map_or(0, |r| r.len())
    }

    /// Adds an object an owned scope built: a large scope makes room at once for as many as the
    /// largest one of its App so far, as the shared table does.
    pub(super) fn insert_owned(&mut self, app: &AppInner, key: u32, obj: AnyArc) {
        self.hooks |= app.graph.hooks[key as usize];
        self.insert(key, obj);
        if let Some(rest) = self.rest.as_mut().filter(|r| r.len() == crate::maps::LINEAR_LIMIT + 1) {
            app.reserve_large_scope(rest);
        }
    }

    /// Drops the entries newest first, each isolated from the others' panics (user `Drop`s).
    pub(super) fn drop_newest_first(mut self) {
        let first = self.first.take();
        drop(self); // the table: its objects newest first, isolated (`Drop`)
        if let Some((_, obj)) = first {
            crate::isolate::drop_isolated(obj);
        }
    }

    #[inline]
    pub(crate) fn get(&self, key: u32) -> Option<&AnyArc> {
        match &self.first {
            Some((k, obj)) if *k == key => Some(obj),
            _ => self.rest.as_ref()?.get(key),
        }
    }

    #[inline]
    fn insert(&mut self, key: u32, obj: AnyArc) {
        match (&self.first, &mut self.rest) {
            (None, _) => self.first = Some((key, obj)),
            (Some(_), Some(rest)) => {
                rest.insert(key, obj);
            }
            (Some(_), None) => self.insert_second(key, obj),
        }
    }

    /// [`insert`](Self::insert)'s second object, which takes a table for the rest.
    #[inline(never)]
    fn insert_second(&mut self, key: u32, obj: AnyArc) {
        self.rest.insert(spare::take()).insert(key, obj);
    }
}

impl Drop for TaskCache {
    /// The table goes back to the thread's spares, its objects dropped newest first, each
    /// isolated from the others' panics.
    fn drop(&mut self) {
        if let Some(rest) = self.rest.take() {
            spare::give_back(rest);
        }
    }
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
    CURRENT.try_with(|h| h.miss(app_id, key, wanted)).unwrap_or_else(|_| Err(DiError::NoScope { wanted }))
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

/// Where a task caches an object that needs async construction: apart from the keys `get`
/// looks up, so that a sync `get` (of a hand-registered proto, which the macros cannot check)
/// fails the same way whether or not a `get_async` built the object first.
const ASYNC_KEY: u32 = 1 << 31;

/// Where a reference's object is: App `app_id`'s context proto `key`, reached as the type its
/// cast `cast` yields (0: the proto's own type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RefKey {
    pub(crate) app_id: u64,
    pub(crate) key: u32,
    pub(crate) cast: u32,
}

impl RefKey {
    /// `obj`, this key's object, as the `Arc<U>` its cast yields in `app`'s graph.
    fn cast<U: ?Sized + 'static>(self, app: &AppInner, obj: AnyArc) -> Arc<U> {
        let target = crate::graph::Target { proto: self.key as usize, cast: self.cast as usize };
        crate::resolver::provided_as::<U>(&app.graph, target, obj)
    }
}

/// The current scope's object at `at`, built asynchronously if need be, as the `Arc<U>` its cast
/// yields (with the graph of the App whose scope holds it, whichever task polls last).
pub(crate) async fn current_async<U: ?Sized + 'static>(at: RefKey, wanted: &'static str) -> Result<Arc<U>, DiError> {
    let RefKey { app_id, key, .. } = at;
    let warm = CURRENT.try_with(|h| {
        let obj = h.cached(app_id, key | ASYNC_KEY).or_else(|| h.cached(app_id, key))?;
        Some(at.cast::<U>(&h.app, obj))
    });
    if let Ok(Some(value)) = warm {
        return Ok(value);
    }
    let sync = CURRENT.try_with(|h| (h.app_id == app_id && !h.app.graph.needs_async[key as usize]).then_some(()));
    if let Ok(Some(())) = sync {
        // Built with no await: the task's own path, which an owned scope keeps owned.
        return current_as::<U>(at, wanted);
    }
    let shared = CURRENT
        .try_with(|h| (h.app_id == app_id).then(|| h.shared().clone()).ok_or(DiError::ForeignScope { wanted }))
        .unwrap_or_else(|_| Err(DiError::NoScope { wanted }))?;
    let obj = shared.resolve_async(key as usize).await?;
    let slot = if shared.app.graph.needs_async[key as usize] { key | ASYNC_KEY } else { key };
    let _ = CURRENT.try_with(|h| h.remember(slot, &obj));
    Ok(at.cast::<U>(&shared.app, obj))
}

/// The current scope's object at `at`, as the `Arc<U>` its cast yields: a reference whose object
/// is not its own type (a `ContextRef<dyn Trait>`). Looked up and cast in one access to the
/// task-local, with the graph of the App whose scope holds the object.
pub(crate) fn current_as<U: ?Sized + 'static>(at: RefKey, wanted: &'static str) -> Result<Arc<U>, DiError> {
    CURRENT
        .try_with(|h| {
            let obj = match h.cached(at.app_id, at.key) {
                Some(obj) => obj,
                None => h.miss(at.app_id, at.key, wanted)?,
            };
            Ok(at.cast::<U>(&h.app, obj))
        })
        .unwrap_or_else(|_| Err(DiError::NoScope { wanted }))
}

/// The current scope's object at `at` if the scope has it already (a seed, or built), as the
/// `Arc<U>` its cast yields; nothing is built.
pub(crate) fn built_as<U: ?Sized + 'static>(at: RefKey) -> Option<Arc<U>> {
    CURRENT
        .try_with(|h| {
            if h.app_id != at.app_id {
                return None;
            }
            let obj = h
                .cached(at.app_id, at.key)
                .or_else(|| h.seed.get(at.key).cloned())
                .or_else(|| h.shared.get()?.built(at.key))?;
            Some(at.cast::<U>(&h.app, obj))
        })
        .ok()
        .flatten()
}

/// The lineage values of the current scope (none outside one): its seeds and objects of the
/// App's lineage types, and those built now for a lineage type whose factory builds one.
pub(crate) fn lineage_now() -> crate::lineage::Lineage {
    CURRENT
        .try_with(|h| {
            let mut lineage = crate::lineage::Lineage::new();
            for slot in h.app.lineage.iter() {
                let obj = h
                    .cached(h.app_id, slot.key)
                    .or_else(|| h.seed.get(slot.key).cloned())
                    .or_else(|| h.shared.get()?.built(slot.key));
                let obj = match obj {
                    None if slot.builds => h.miss(h.app_id, slot.key, (slot.travel.type_name)()).ok(),
                    obj => obj,
                };
                if let Some(obj) = obj {
                    lineage.put(slot.travel, obj);
                }
            }
            lineage
        })
        .unwrap_or_default()
}

/// Fails the current scope: its completion phase will not run, its held events are released as
/// failed (to their `after_rollback` handlers).
pub(crate) fn fail_current() {
    let shared = CURRENT.try_with(|h| {
        let shared = h.shared.get().cloned();
        if shared.is_none() {
            // Still owned by this task, so nothing is held: the phase is over, as `fail` marks
            // it, and a table made later starts that way, dropping what it is handed.
            h.completed.set(true);
            h.discarded.set(true);
        }
        shared
    });
    if let Ok(Some(shared)) = shared {
        shared.fail();
    }
}

/// Whether the caller runs in a scope of App `app_id`.
pub(crate) fn in_scope_of(app_id: u64) -> bool {
    CURRENT.try_with(|h| h.app_id == app_id).unwrap_or(false)
}

/// A context dependency of a factory running in the current scope (see
/// [`ScopeAt::Current`](crate::resolver::ScopeAt::Current)).
pub(crate) fn in_factory(app_id: u64, key: u32, wanted: impl Fn() -> &'static str) -> Result<AnyArc, DiError> {
    CURRENT
        .try_with(|h| h.dependency(app_id, key, &wanted))
        .unwrap_or_else(|_| Err(DiError::NoScope { wanted: wanted() }))
}

/// The App of the current scope; `None` outside a scope.
pub(crate) fn current_app() -> Option<Arc<AppInner>> {
    CURRENT.try_with(|h| h.app.clone()).ok()
}

/// Calls `f` with the App of the current scope; `None` outside a scope.
#[inline]
pub(crate) fn with_current_app<R>(f: impl FnOnce(&AppInner) -> R) -> Option<R> {
    CURRENT.try_with(|h| f(&h.app)).ok()
}

fn current_shared_any() -> Option<Arc<ScopeShared>> {
    CURRENT.try_with(|h| h.shared().clone()).ok()
}

/// The current scope's shared part, if the current scope is one of App `app_id`.
pub(crate) fn current_shared(app_id: u64) -> Option<Arc<ScopeShared>> {
    CURRENT.try_with(|h| (h.app_id == app_id).then(|| h.shared().clone())).ok().flatten()
}

/// Spawns `fut` on the tokio runtime inside the current context scope.
///
/// A task started with `tokio::spawn` does not see the scope: task-locals belong to the future
/// that set them. `spawn` carries the scope into the new task, and the scope waits for the task
/// before destroying its objects, at most for the App's background-task timeout (5 s unless
/// [`AppBuilder::background_task_timeout`](crate::AppBuilder::background_task_timeout) says
/// otherwise; tegg's `BackgroundTaskHelper` does the same). That wait is step 4 of
/// [`App::run_in_context`](crate::App::run_in_context): after the scope's output has left when
/// it ends in the background (tegu-http: after the response was sent). The task runs in the
/// current `tracing` span, so that its log lines carry the request's fields; it shares the
/// scope, and so its [lineage](crate::lineage). Outside any scope it is `tokio::spawn`.
///
/// # Examples
///
/// ```
/// use tegu_core::{App, ProtoDef};
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Default)]
/// struct AuditLog(Mutex<Vec<String>>);
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
///     tegu_core::spawn(async move {
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
    match current_shared_any() {
        Some(shared) => {
            let guard = PendingGuard::new(shared.clone());
            // In the span it was spawned in: its log lines carry the request's fields.
            let span = tracing::Span::current();
            let carried = super::carry::Carried::capture();
            tokio::spawn(async move {
                let _guard = guard;
                let work = carried.run(scoped(ScopeHandle::joining(shared), fut));
                tracing::Instrument::instrument(work, span).await
            })
        }
        None => tokio::spawn(fut),
    }
}

/// Runs the blocking closure `f` on tokio's blocking pool inside the current context scope;
/// the scope waits for it like for [`spawn`]ed tasks. Inside a scope, `f` runs in the span it
/// was spawned in, as a [`spawn`]ed task does (its log lines carry the request's fields), with
/// that span's subscriber as the thread's default.
///
/// # Panics
///
/// Panics if called outside a tokio runtime, like `tokio::task::spawn_blocking`.
///
/// # Examples
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = tegu_core::App::builder().build().await?;
/// let in_scope = app
///     .run_in_context(async {
///         // A blocking thread that still sees the request's scope.
///         tegu_core::scope::spawn_blocking(tegu_core::scope::in_scope).await.unwrap()
///     })
///     .await;
/// assert!(in_scope);
/// # Ok(()) }
/// ```
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match current_shared_any() {
        Some(shared) => {
            let guard = PendingGuard::new(shared.clone());
            // In the span it was spawned in, as `spawn`'s tasks are. A thread of the blocking
            // pool has no default subscriber of its own where the spawning thread set one
            // (`with_default`): the span's subscriber is its default meanwhile.
            let span = tracing::Span::current();
            let carried = super::carry::Carried::capture();
            tokio::task::spawn_blocking(move || {
                let _guard = guard;
                let run = || span.in_scope(|| carried.enter(|| CURRENT.enter(&ScopeHandle::joining(shared), f)));
                match span.with_subscriber(|(_, dispatch)| dispatch.clone()) {
                    Some(dispatch) => tracing::dispatcher::with_default(&dispatch, run),
                    None => run(),
                }
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
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = tegu_core::App::builder().build().await?;
/// assert!(!tegu_core::scope::in_scope());
/// assert!(app.run_in_context(async { tegu_core::scope::in_scope() }).await);
/// # Ok(()) }
/// ```
pub fn in_scope() -> bool {
    CURRENT.try_with(|_| ()).is_ok()
}

/// Marks the current scope as failed: the work it did is not to be kept. The events it holds,
/// and those it emits from now on, go to their `after_rollback` handlers only, and a unit of
/// work that reads
/// [`scope_failed`] (tegu-tx's transactions) rolls back instead of committing in the completion
/// phase. tegu-http calls it when a request is answered with a 4xx or 5xx status. Does nothing
/// outside a scope; cannot be undone.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = tegu_core::App::builder().build().await?;
/// let seen = app
///     .run_in_context(async {
///         let before = tegu_core::scope::scope_failed();
///         tegu_core::scope::fail_scope(); // the job's work failed
///         (before, tegu_core::scope::scope_failed())
///     })
///     .await;
/// assert_eq!(seen, (false, true));
/// assert!(!tegu_core::scope::scope_failed()); // outside any scope
/// # Ok(()) }
/// ```
pub fn fail_scope() {
    drop_held();
}

/// Whether the current scope was marked failed ([`fail_scope`]) or its completion phase failed:
/// what a completion hook asks before it commits. `false` outside a scope. See [`fail_scope`]
/// for an example.
pub fn scope_failed() -> bool {
    CURRENT
        .try_with(|h| match h.shared.get() {
            Some(shared) => shared.failed(),
            // Still owned by this task: what `drop_held` marked.
            None => h.discarded.get(),
        })
        .unwrap_or(false)
}

/// Drops what the current scope holds until its completion phase's end, and what it is handed
/// from now on (the events feature's [`discard_events`](crate::events::discard_events)). Does nothing
/// outside a scope.
pub(crate) fn drop_held() {
    // Without a shared part the scope has emitted nothing, and no other task of it exists
    // (`spawn` creates the part): marking this task's handle is enough, and allocates nothing
    // (tegu-http calls this for every 4xx and 5xx response).
    let _ = CURRENT.try_with(|h| match h.shared.get() {
        Some(shared) => shared.settle_held(false),
        None => h.discarded.set(true),
    });
}
