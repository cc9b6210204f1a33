//! Context scopes: the task-local that carries the current request's objects.
//!
//! - `mod.rs`: the task-local handle, the accessors behind `ContextRef`, `spawn`.
//! - `table.rs`: the scope's shared table and the construction of its objects.
//! - `end.rs`: completion, destruction, and the futures that run a scope.

mod end;
mod hold;
mod table;

use std::any::Any;
use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::app::AppInner;
use crate::error::DiError;
use crate::graph::FastMap;
use crate::pending::PendingGuard;
use crate::proto::AnyArc;

pub use end::{CompleteScope, ContextFuture, TryContextFuture, complete_scope};
pub(crate) use end::{catch_hook, drop_isolated, run_hook};
pub use hold::{ScopeHold, hold_scope};
pub(crate) use table::ScopeShared;

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
    cache: RefCell<TaskCache>,
    /// Objects given by whoever opened the scope (`App::run_in_context_with`, `App::scope`).
    /// Copied into the shared table when that is created, so that other tasks and factories
    /// find them there.
    seed: Seeds,
    /// [`discard_events`] ran before the shared part existed: it starts dropping events.
    discarded: std::cell::Cell<bool>,
    /// [`complete_scope`] ran before the shared part existed: it starts with the completion
    /// phase over.
    completed: std::cell::Cell<bool>,
}

/// Objects a scope starts with: proto index and value. The first is held inline (di-http's
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

    fn get(&self, key: u32) -> Option<&AnyArc> {
        self.iter().find(|(k, _)| *k == key).map(|(_, obj)| obj)
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
    fn new(app: Arc<AppInner>, seed: Seeds) -> Self {
        let hooked = seed.any_hooked();
        let handle = ScopeHandle {
            app_id: app.id,
            app,
            shared: OnceCell::new(),
            cache: RefCell::new(TaskCache::default()),
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

    fn joining(shared: Arc<ScopeShared>) -> Self {
        Self::joining_with(shared, TaskCache::default())
    }

    /// A task's handle on an existing scope, starting from the objects it resolved before.
    fn joining_with(shared: Arc<ScopeShared>, cache: TaskCache) -> Self {
        ScopeHandle {
            app_id: shared.app.id,
            app: shared.app.clone(),
            shared: OnceCell::from(shared),
            cache: RefCell::new(cache),
            seed: Seeds::default(),
            discarded: std::cell::Cell::new(false),
            completed: std::cell::Cell::new(false),
        }
    }

    fn shared(&self) -> &Arc<ScopeShared> {
        self.shared.get_or_init(|| {
            let shared = ScopeShared::new(self.app.clone(), self.seed.clone());
            if self.completed.get() {
                shared.completed_before(!self.discarded.get());
            } else if self.discarded.get() {
                shared.settle_events(false);
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

/// A task's cache of the scope's objects: the first inline (a request that reaches one context
/// object allocates nothing for its cache), the rest in a [`SmallMap`].
#[derive(Default)]
pub(crate) struct TaskCache {
    first: Option<(u32, AnyArc)>,
    rest: SmallMap<AnyArc>,
}

impl TaskCache {
    #[inline]
    fn get(&self, key: u32) -> Option<&AnyArc> {
        match &self.first {
            Some((k, obj)) if *k == key => Some(obj),
            _ => self.rest.get(key),
        }
    }

    fn insert(&mut self, key: u32, obj: AnyArc) {
        match self.first {
            None => self.first = Some((key, obj)),
            Some(_) => {
                self.rest.insert(key, obj);
            }
        }
    }
}

/// A small map from proto index to value: a linear scan while small (the common case: a request
/// touches a handful of context objects), an index once it grows.
pub(crate) struct SmallMap<V> {
    items: Vec<(u32, V)>,
    index: Option<Index>,
}

/// Where each key of a grown [`SmallMap`] is.
enum Index {
    Hash(FastMap<u32, usize>),
    /// Position + 1 by key (0: absent), for a map expected to hold a good share of the keys:
    /// a lookup is a load, where hashing costs tens of instructions and a cache miss.
    Dense(Box<[u32]>),
}

impl Index {
    #[inline]
    fn get(&self, key: u32) -> Option<usize> {
        match self {
            Index::Hash(index) => index.get(&key).copied(),
            Index::Dense(index) => index.get(key as usize).and_then(|&p| (p as usize).checked_sub(1)),
        }
    }

    fn insert(&mut self, key: u32, pos: usize) {
        match self {
            Index::Hash(index) => {
                index.insert(key, pos);
            }
            Index::Dense(index) => {
                if index.len() <= key as usize {
                    let mut grown = std::mem::take(index).into_vec();
                    grown.resize(key as usize + 1, 0);
                    *index = grown.into_boxed_slice();
                }
                index[key as usize] = u32::try_from(pos + 1).expect("fewer than 2^32 objects in a scope");
            }
        }
    }
}

impl<V> Default for SmallMap<V> {
    fn default() -> Self {
        SmallMap { items: Vec::new(), index: None }
    }
}

pub(crate) const LINEAR_LIMIT: usize = 16;

/// A dense index costs four bytes per key in the map's key space: worth it from one entry per
/// this many keys (a table of 10,000 objects in a graph of 20,000 protos: 80 KB, zeroed by the
/// allocator, against 10,000 hash insertions).
const DENSE_SHARE: usize = 64;

impl<V> SmallMap<V> {
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// The entries, in insertion order.
    pub(crate) fn into_items(self) -> std::vec::IntoIter<(u32, V)> {
        self.items.into_iter()
    }

    /// Makes room for `total` entries in all (the index included, once there is one). With
    /// `keys`, the size of the key space, an index expected to hold a good share of it is made
    /// dense.
    pub(crate) fn reserve_total(&mut self, total: usize, keys: Option<usize>) {
        self.items.reserve(total.saturating_sub(self.items.len()));
        match (&mut self.index, keys) {
            (Some(Index::Hash(_)), Some(keys)) if total.saturating_mul(DENSE_SHARE) >= keys => {
                let mut index = Index::Dense(vec![0u32; keys].into_boxed_slice());
                for (pos, (key, _)) in self.items.iter().enumerate() {
                    index.insert(*key, pos);
                }
                self.index = Some(index);
            }
            (Some(Index::Hash(index)), _) => index.reserve(total.saturating_sub(index.len())),
            _ => {}
        }
    }

    #[inline]
    fn get(&self, key: u32) -> Option<&V> {
        match &self.index {
            None => self.items.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            Some(index) => index.get(key).map(|i| &self.items[i].1),
        }
    }

    /// Where `key` is, for [`at_mut`](Self::at_mut).
    fn position(&self, key: u32) -> Option<usize> {
        match &self.index {
            None => self.items.iter().position(|(k, _)| *k == key),
            Some(index) => index.get(key),
        }
    }

    /// The value of `key` at position `pos` (entries never move): no lookup.
    fn at_mut(&mut self, pos: usize, key: u32) -> Option<&mut V> {
        self.items.get_mut(pos).filter(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Adds `key` (absent) and returns its position.
    fn insert(&mut self, key: u32, value: V) -> usize {
        self.items.push((key, value));
        let pos = self.items.len() - 1;
        if let Some(index) = &mut self.index {
            index.insert(key, pos);
        } else if self.items.len() > LINEAR_LIMIT {
            self.index = Some(Index::Hash(self.items.iter().enumerate().map(|(i, (k, _))| (*k, i)).collect()));
        }
        pos
    }
}

/// Runs `fut` in a new scope of `app`, with an object given by the caller. Inlined, as are its
/// callers on the request path: a call here would move the request's future once more.
#[inline]
pub(crate) fn run<F: Future>(app: Arc<AppInner>, seed: Seeds, fut: F) -> ContextFuture<F> {
    ContextFuture::new(CURRENT.scope(ScopeHandle::new(app, seed), fut))
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
    let shared = CURRENT
        .try_with(|h| (h.app_id == app_id).then(|| h.shared().clone()).ok_or(DiError::ForeignScope { wanted }))
        .unwrap_or(Err(DiError::NoScope { wanted }))?;
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
        .unwrap_or(Err(DiError::NoScope { wanted }))
}

/// Drops the events the current context scope holds, and those it emits from now on: for a
/// scope whose work failed without a completion hook failing. di-http calls it when a request
/// is answered with a 4xx or 5xx status. Does nothing outside a scope.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use di_core::{handlers, singleton_proto, App};
///
/// pub struct Paid;
///
/// #[singleton_proto]
/// #[derive(Default)]
/// pub struct Receipts { sent: AtomicUsize }
///
/// #[handlers]
/// impl Receipts {
///     #[event_handler]
///     async fn on_paid(&self, _: &Paid) { self.sent.fetch_add(1, Ordering::Relaxed); }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = App::builder().build().await?;
/// let charged: Result<(), &str> = app
///     .run_in_context(async {
///         app.events().emit(Paid);
///         let result = Err("card declined"); // the job fails after emitting
///         if result.is_err() {
///             di_core::discard_events();
///         }
///         result
///     })
///     .await;
/// assert!(charged.is_err());
/// app.shutdown().await?;
/// assert_eq!(app.get_object::<Receipts>()?.sent.load(Ordering::Relaxed), 0);
/// # Ok(()) }
/// ```
pub fn discard_events() {
    // Without a shared part the scope has emitted nothing, and no other task of it exists
    // (`spawn` creates the part): marking this task's handle is enough, and allocates nothing
    // (di-http calls this for every 4xx and 5xx response).
    let _ = CURRENT.try_with(|h| match h.shared.get() {
        Some(shared) => shared.settle_events(false),
        None => h.discarded.set(true),
    });
}

/// Fails the current scope: its completion phase will not run, its held events are dropped.
pub(crate) fn fail_current() {
    if let Ok(Some(shared)) = CURRENT.try_with(|h| h.shared.get().cloned()) {
        shared.fail();
    }
}

/// Runs `work` in a new scope of `app`: its completion phase if `work` succeeds, none (and its
/// events dropped) if it fails. What an event handler and a scheduled job run in.
pub(crate) async fn run_job(
    app: &Arc<AppInner>,
    work: impl Future<Output = Result<(), crate::error::BoxError>>,
) -> Result<(), crate::error::BoxError> {
    run(app.clone(), Seeds::default(), async move {
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
/// it ends in the background (di-http: after the response was sent). Outside any scope it is
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
    match current_shared_any() {
        Some(shared) => {
            let guard = PendingGuard::new(shared.clone());
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
///
/// # Examples
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), di_core::DiError> {
/// let app = di_core::App::builder().build().await?;
/// let in_scope = app
///     .run_in_context(async {
///         // A blocking thread that still sees the request's scope.
///         di_core::spawn_blocking(di_core::in_scope).await.unwrap()
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

#[cfg(test)]
mod tests {
    use super::{Index, LINEAR_LIMIT, SmallMap};

    fn filled(keys: impl Iterator<Item = u32>) -> SmallMap<u32> {
        let mut map = SmallMap::default();
        for key in keys {
            map.insert(key, key * 10);
        }
        map
    }

    fn assert_finds(map: &mut SmallMap<u32>, keys: &[u32], absent: &[u32]) {
        for &key in keys {
            assert_eq!(map.get(key), Some(&(key * 10)), "key {key}");
            let pos = map.position(key).unwrap();
            assert_eq!(map.at_mut(pos, key).copied(), Some(key * 10));
        }
        for &key in absent {
            assert_eq!(map.get(key), None, "key {key}");
            assert_eq!(map.position(key), None);
        }
    }

    #[test]
    fn a_map_finds_its_keys_linear_hashed_and_dense() {
        // Keys spread as a large graph's context protos are (every third).
        let keys: Vec<u32> = (0..40).map(|i| i * 3 + 1).collect();
        let absent = [0, 2, 300, u32::MAX];

        let mut linear = filled(keys[..LINEAR_LIMIT].iter().copied());
        assert!(linear.index.is_none());
        assert_finds(&mut linear, &keys[..LINEAR_LIMIT], &absent);

        let mut hashed = filled(keys.iter().copied());
        assert!(matches!(hashed.index, Some(Index::Hash(_))));
        assert_finds(&mut hashed, &keys, &absent);

        // Expected to hold 40 of 130 keys: dense; a key past its end grows it.
        let mut dense = filled(keys[..LINEAR_LIMIT + 1].iter().copied());
        dense.reserve_total(40, Some(130));
        assert!(matches!(dense.index, Some(Index::Dense(_))));
        for &key in &keys[LINEAR_LIMIT + 1..] {
            dense.insert(key, key * 10);
        }
        dense.insert(500, 5000);
        assert_finds(&mut dense, &keys, &absent);
        assert_eq!(dense.get(500), Some(&5000));

        // Expected to hold 40 of 100,000 keys: stays hashed.
        let mut sparse = filled(keys[..LINEAR_LIMIT + 1].iter().copied());
        sparse.reserve_total(40, Some(100_000));
        assert!(matches!(sparse.index, Some(Index::Hash(_))));
    }

    #[test]
    fn a_position_that_no_longer_holds_its_key_finds_nothing() {
        let mut map = filled([7, 8].into_iter());
        assert_eq!(map.at_mut(0, 8), None);
        assert_eq!(map.at_mut(5, 7), None);
    }
}
