//! Tenant scopes: objects built once per tenant key and cached, between the singletons (once
//! per App) and the context objects (once per request).
//!
//! A singleton `F` that implements [`TenantObjects`] builds a tenant's object; a proto that
//! holds `TenantRef<F>` reaches the object of the current scope's [`Tenant`], as a
//! `ContextRef` reaches the current scope's object. The cache is the `TenantRef<F>` singleton's
//! (one per `F`), which this module registers for whoever holds one ([`ProtoDef::tenants`]).
//!
//! The cache owns each build: concurrent first reads of a tenant share one `create`, run on a
//! task of the cache's own in a scope of its own seeded with the tenant (none of a reader's
//! request objects), which a reader that goes away does not cancel. Built objects are indexed
//! by their last read, so that eviction by count (the least recently used first, once each
//! build ends) and by idle time takes the oldest without a scan. Evicted objects are destroyed
//! on tasks shutdown waits for; at shutdown, the cache refuses new reads, destroys every object
//! still cached, [`DESTROY_AT_ONCE`](TenantObjects::DESTROY_AT_ONCE) at a time, then waits for
//! the builds and evictions under way.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::context_ref::ContextRef;
use crate::error::{BoxError, DiError};
use crate::isolate::catch_future;
use crate::proto::dependency::Dependency;
use crate::proto::descriptor::ProtoDef;
use crate::proto::descriptor::short_type_name;
use crate::proto::kinds::InjectKind;

pub use crate::lineage::Tenant;

/// A singleton that builds one object per tenant: a connection pool to the tenant's database,
/// its feature flags, its rate limiter. Protos reach the current tenant's object through a
/// [`TenantRef<Self>`](TenantRef).
///
/// At most [`MAX_TENANTS`](Self::MAX_TENANTS) objects are cached; past that, the least recently
/// used is evicted. One unused for [`IDLE`](Self::IDLE) is evicted too. An evicted object's
/// [`destroy`](Self::destroy) hook runs, and the tenant's next request builds a new one. So does
/// the App's shutdown, for every object still cached.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `TenantObjects`, so `TenantRef<{Self}>` has no tenant objects to reach",
    label = "`TenantRef<T>` needs `T: TenantObjects`",
    note = "implement `tegu_core::tenant::TenantObjects` for `{Self}`: its `create` builds a tenant's object"
)]
pub trait TenantObjects: Send + Sync + 'static {
    /// The object built for each tenant.
    type Object: Send + Sync + 'static;

    /// How many tenants' objects are cached at most: past it, once a build ends, the least
    /// recently read are evicted. Builds under way are not counted until they end.
    const MAX_TENANTS: usize = 1_000;

    /// How long an object stays cached without being read. `Duration::MAX`: for ever.
    const IDLE: Duration = Duration::from_secs(600);

    /// How many destroy hooks shutdown runs at once.
    const DESTROY_AT_ONCE: usize = 64;

    /// Builds `tenant`'s object, at the first read of its [`TenantRef`] while none is cached.
    /// Concurrent first reads of one tenant share one call, which runs on a task of the
    /// cache's own, in a scope of its own seeded with `tenant`: its `ContextRef<Tenant>` is
    /// `tenant`, a `#[transactional]` method it calls begins a transaction of the tenant (its
    /// `tenant_setting`, with tegu-sqlx), committed in the scope's completion phase, and no
    /// object of the request whose read started it is reached (a reader that goes away does
    /// not cancel it).
    /// An error (or a panic) fails every read waiting for it and caches nothing: the next read
    /// calls `create` again.
    fn create(&self, tenant: &Tenant) -> impl Future<Output = Result<Self::Object, BoxError>> + Send;

    /// Runs when `tenant`'s object leaves the cache: evicted, or at the App's shutdown. A
    /// request that read it just before may still hold it; close it for new work (a pool's
    /// `close` waits for the connections in use). An error or a panic is logged.
    fn destroy(&self, tenant: &Tenant, object: Arc<Self::Object>) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = (tenant, object);
        async { Ok(()) }
    }
}

/// A proto's handle on the current tenant's object of `F` ([`TenantObjects`]), injected as
/// `#[inject] x: TenantRef<F>` (by hand: `Arc<TenantRef<F>>`, with `.also(ProtoDef::tenants::<F>)`).
///
/// [`get`](Self::get) reads the current scope's [`Tenant`] and returns its object, built by
/// `F::create` at the first read while none is cached. Two scopes of different tenants never
/// see each other's object. Cheap to clone.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tegu_core::{App, error::BoxError, DiError, ProtoDef, tenant::{Tenant, TenantObjects, TenantRef}};
///
/// struct Flags { tenant: String }
///
/// #[derive(Default)]
/// struct TenantFlags { built: AtomicUsize }
///
/// impl TenantObjects for TenantFlags {
///     type Object = Flags;
///     async fn create(&self, tenant: &Tenant) -> Result<Flags, BoxError> {
///         self.built.fetch_add(1, Ordering::Relaxed);
///         Ok(Flags { tenant: tenant.key().to_owned() })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder()
///     .without_inventory()
///     .register(ProtoDef::singleton::<TenantFlags>(|_| Ok(TenantFlags::default())))
///     .register(ProtoDef::tenants::<TenantFlags>())
///     .build()
///     .await?;
/// let flags = app.get_object::<TenantRef<TenantFlags>>()?;
/// for tenant in ["acme", "globex", "acme"] {
///     let seen = app.scope().tenant(tenant)?.run(async { flags.get().await.map(|f| f.tenant.clone()) }).await?;
///     assert_eq!(seen, tenant);
/// }
/// assert_eq!(app.get_object::<TenantFlags>()?.built.load(Ordering::Relaxed), 2); // acme once
/// # Ok(()) }
/// ```
pub struct TenantRef<F: TenantObjects> {
    cache: Arc<Cache<F>>,
    tenant: ContextRef<Tenant>,
}

impl<F: TenantObjects> Clone for TenantRef<F> {
    fn clone(&self) -> Self {
        TenantRef { cache: Arc::clone(&self.cache), tenant: self.tenant }
    }
}

impl<F: TenantObjects> fmt::Debug for TenantRef<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantRef")
            .field("objects", &std::any::type_name::<F>())
            .field("cached", &self.cached())
            .finish_non_exhaustive()
    }
}

/// A build's outcome, as its readers get it.
type Built<O> = Option<Result<Arc<O>, DiError>>;

/// The tenants' objects of one `F`.
struct Cache<F: TenantObjects> {
    objects: Arc<F>,
    /// The App: a tenant's `create` runs in a scope of it of its own.
    app: crate::runtime::AppCell,
    state: Mutex<State<F::Object>>,
    /// What "now" is counted from, in milliseconds, for each object's last read.
    epoch: Instant,
    /// The builds and the destroy hooks of evicted objects still running: shutdown waits for
    /// them.
    tasks: Mutex<tokio::task::JoinSet<()>>,
    /// Stops the idle sweep (shutdown).
    stop: tokio::sync::watch::Sender<bool>,
}

/// What the cache holds, under its lock.
struct State<O> {
    /// The objects built, by tenant.
    cached: HashMap<Tenant, Cached<O>>,
    /// The objects built, by their last read: the least recently read first.
    by_read: BTreeMap<u64, Tenant>,
    /// The builds under way: their readers wait for the outcome.
    building: HashMap<Tenant, tokio::sync::watch::Receiver<Built<O>>>,
    /// Counts the reads: each object's place in `by_read`.
    reads: u64,
    /// Shutdown has begun: no read, no build.
    closed: bool,
}

/// A built object.
struct Cached<O> {
    object: Arc<O>,
    /// Its key in `by_read`.
    read: u64,
    /// When it was last read, in milliseconds since the cache's epoch.
    used: u64,
}

impl<O> State<O> {
    /// `tenant`'s object, marked read now (`at`), if it is cached.
    fn read(&mut self, tenant: &Tenant, at: u64) -> Option<Arc<O>> {
        let cached = self.cached.get_mut(tenant)?;
        self.reads += 1;
        let tenant = self.by_read.remove(&cached.read).expect("indexed");
        cached.read = self.reads;
        cached.used = at;
        self.by_read.insert(self.reads, tenant);
        Some(Arc::clone(&cached.object))
    }

    /// Caches `tenant`'s object, read at `at`.
    fn insert(&mut self, tenant: Tenant, object: Arc<O>, at: u64) {
        self.reads += 1;
        self.by_read.insert(self.reads, tenant.clone());
        if let Some(old) = self.cached.insert(tenant, Cached { object, read: self.reads, used: at }) {
            self.by_read.remove(&old.read);
        }
    }

    /// Takes the least recently read object out, if `evict` says so of it.
    fn pop_oldest(&mut self, evict: impl Fn(&Cached<O>) -> bool) -> Option<(Tenant, Arc<O>)> {
        let (_, tenant) = self.by_read.first_key_value()?;
        if !evict(&self.cached[tenant]) {
            return None;
        }
        let (_, tenant) = self.by_read.pop_first().expect("looked at above");
        let cached = self.cached.remove(&tenant).expect("indexed");
        Some((tenant, cached.object))
    }
}

impl<F: TenantObjects> TenantRef<F> {
    /// The current scope's tenant's object, built by `F::create` if none is cached.
    ///
    /// # Errors
    ///
    /// [`DiError::NoTenant`] if the scope has no tenant, [`DiError::NoScope`] outside a scope,
    /// [`DiError::Construction`] if `create` failed or panicked (nothing is cached then),
    /// [`DiError::ShutDown`] once the App's shutdown has closed the cache.
    pub async fn get(&self) -> Result<Arc<F::Object>, DiError> {
        let tenant = match self.tenant.try_get() {
            Ok(tenant) => tenant,
            Err(DiError::NoTenant { .. }) => return Err(DiError::NoTenant { wanted: std::any::type_name::<F>() }),
            Err(e) => return Err(e),
        };
        let mut built = self.cache.read_or_build(&tenant)?;
        let outcome = built.wait_for(Option::is_some).await;
        match outcome.as_deref() {
            Ok(Some(outcome)) => outcome.clone(),
            // The build's task is gone without an outcome: the runtime is shutting down.
            _ => Err(DiError::ShutDown { wanted: std::any::type_name::<F::Object>() }),
        }
    }

    /// How many tenants' objects are cached now (built; builds under way are not counted).
    pub fn cached(&self) -> usize {
        self.cache.lock().cached.len()
    }
}

impl<F: TenantObjects> Cache<F> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<F::Object>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The outcome of `tenant`'s object to wait for: at once if it is cached; else the build
    /// under way, or one started now on a task of the cache's.
    fn read_or_build(
        self: &Arc<Self>,
        tenant: &Tenant,
    ) -> Result<tokio::sync::watch::Receiver<Built<F::Object>>, DiError> {
        let now = self.now();
        let mut state = self.lock();
        if state.closed {
            return Err(DiError::ShutDown { wanted: std::any::type_name::<F::Object>() });
        }
        if let Some(object) = state.read(tenant, now) {
            return Ok(tokio::sync::watch::channel(Some(Ok(object))).1);
        }
        if let Some(built) = state.building.get(tenant) {
            return Ok(built.clone());
        }
        let (done, built) = tokio::sync::watch::channel(None);
        state.building.insert(tenant.clone(), built.clone());
        drop(state);
        let (cache, tenant) = (Arc::clone(self), tenant.clone());
        self.spawn(async move { cache.build(tenant, done).await });
        Ok(built)
    }

    /// Runs `task` on a task shutdown waits for.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        while tasks.try_join_next().is_some() {} // what has ended
        drop(tasks.spawn(task));
    }

    /// Builds `tenant`'s object, caches it (evicting the least recently read past
    /// `MAX_TENANTS`) and hands the outcome to its readers. Built after shutdown closed the
    /// cache, it is destroyed at once.
    async fn build(self: Arc<Self>, tenant: Tenant, done: tokio::sync::watch::Sender<Built<F::Object>>) {
        let made = self.create(&tenant).await;
        let outcome = made.map(Arc::new).map_err(|source| DiError::Construction {
            type_name: std::any::type_name::<F::Object>(),
            name: format!("tenant {:?} of {}", tenant.key(), std::any::type_name::<F>()),
            source: Arc::from(source),
        });
        let mut leaving = Vec::new();
        let mut closed = None;
        {
            let now = self.now();
            let mut state = self.lock();
            state.building.remove(&tenant);
            if let Ok(object) = &outcome {
                if state.closed {
                    closed = Some(Arc::clone(object));
                } else {
                    state.insert(tenant.clone(), Arc::clone(object), now);
                    while state.cached.len() > F::MAX_TENANTS {
                        leaving.extend(state.pop_oldest(|_| true));
                    }
                }
            }
        }
        done.send_replace(Some(outcome));
        for (tenant, object) in leaving {
            self.destroy_later(tenant, object);
        }
        // Built after shutdown closed the cache: destroyed here, on the task shutdown awaits.
        if let Some(object) = closed {
            destroy(&*self.objects, tenant, object).await;
        }
    }

    /// Runs the destroy hook of an object that left the cache on a task shutdown waits for.
    fn destroy_later(&self, tenant: Tenant, object: Arc<F::Object>) {
        let objects = Arc::clone(&self.objects);
        self.spawn(async move { destroy(&*objects, tenant, object).await });
    }

    /// Evicts what has not been read for `F::IDLE`: the least recently read first, until one
    /// was read since.
    fn sweep(&self) {
        let idle = u64::try_from(F::IDLE.as_millis()).unwrap_or(u64::MAX);
        let now = self.now();
        let mut stale = Vec::new();
        {
            let mut state = self.lock();
            while let Some(evicted) = state.pop_oldest(|cached| now.saturating_sub(cached.used) >= idle) {
                stale.push(evicted);
            }
        }
        for (tenant, object) in stale {
            self.destroy_later(tenant, object);
        }
    }

    /// Runs `create` for `tenant` in a scope of the App of its own, seeded with the tenant (and
    /// nothing of the request whose read started it): its context objects, a transaction a
    /// `#[transactional]` method begins there (with the tenant's setting), committed in the
    /// scope's completion phase. A failed completion fails the build, and the object `create`
    /// made is destroyed. Outside a built App (its handle gone), `create` runs as it is.
    async fn create(&self, tenant: &Tenant) -> Result<F::Object, BoxError> {
        let Some(app) = self.app.get().and_then(Weak::upgrade) else {
            return catch_future(self.objects.create(tenant)).await;
        };
        let lineage = crate::lineage::Lineage::new().with(tenant.clone());
        let seeds = crate::scope::lineage::seeds(&app, &lineage);
        let build = async {
            let made = match catch_future(self.objects.create(tenant)).await {
                Ok(made) => made,
                Err(error) => {
                    // Nothing of it is kept: its events go to their `after_rollback` handlers.
                    crate::scope::handle::fail_current();
                    return Err(error);
                }
            };
            if let Err(error) = crate::scope::end::complete_scope().await {
                destroy(&*self.objects, tenant.clone(), Arc::new(made)).await;
                return Err(Box::new(error) as BoxError);
            }
            Ok(made)
        };
        crate::scope::end::run(app, seeds, build).await
    }

    /// Shutdown: refuses new reads and builds, stops the sweep, destroys every object still
    /// cached, `F::DESTROY_AT_ONCE` at a time, then waits for the builds and evictions under
    /// way (a build that ends now destroys what it built). One stuck `create` or destroy of an
    /// evicted object keeps no other tenant's object from being destroyed before the App's
    /// stop deadline.
    async fn close(&self) {
        self.lock().closed = true;
        self.stop.send_replace(true);
        let cached: Vec<(Tenant, Arc<F::Object>)> = {
            let mut state = self.lock();
            state.by_read.clear();
            state.cached.drain().map(|(tenant, cached)| (tenant, cached.object)).collect()
        };
        let at_once = F::DESTROY_AT_ONCE.max(1);
        let mut destroying = tokio::task::JoinSet::new();
        for (tenant, object) in cached {
            if destroying.len() >= at_once {
                destroying.join_next().await;
            }
            let objects = Arc::clone(&self.objects);
            destroying.spawn(async move { destroy(&*objects, tenant, object).await });
        }
        while destroying.join_next().await.is_some() {}
        // Until none is left: a build that ends before it sees the cache closed may start an
        // eviction's destroy.
        loop {
            let mut tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
            if tasks.is_empty() {
                break;
            }
            while tasks.join_next().await.is_some() {}
        }
    }
}

/// Runs `objects`' destroy hook on `tenant`'s object, logging an error or a panic (the key
/// quoted: it comes from a client).
async fn destroy<F: TenantObjects>(objects: &F, tenant: Tenant, object: Arc<F::Object>) {
    if let Err(e) = catch_future(objects.destroy(&tenant, object)).await {
        tracing::error!(tenant = ?tenant.key(), objects = std::any::type_name::<F>(), error = %e, "a tenant object's destroy hook failed");
    }
}

/// Evicts `cache`'s idle objects every quarter of `F::IDLE` (at least every 10 ms), until the
/// cache is gone or closed. No sweep for an `IDLE` too long to count (`Duration::MAX`).
fn start_sweep<F: TenantObjects>(cache: &Arc<Cache<F>>) {
    let every = (F::IDLE / 4).max(Duration::from_millis(10));
    if tokio::time::Instant::now().checked_add(every.saturating_mul(2)).is_none() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            objects = std::any::type_name::<F>(),
            "the App was built outside a tokio runtime: its idle tenant objects are not evicted"
        );
        return;
    };
    let weak: Weak<Cache<F>> = Arc::downgrade(cache);
    let mut stop = cache.stop.subscribe();
    drop(runtime.spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stop.wait_for(|stopped| *stopped) => return,
            }
            match weak.upgrade() {
                Some(cache) => cache.sweep(),
                None => return,
            }
        }
    }));
}

impl ProtoDef {
    /// The `TenantRef<F>` singleton, which holds the cache of `F`'s tenant objects, and (brought
    /// along) the [`Tenant`] context proto a scope is seeded with. `#[inject] x: TenantRef<F>`
    /// brings it by itself; a hand-registered proto that takes `Arc<TenantRef<F>>` adds
    /// `.also(ProtoDef::tenants::<F>)`, or the App registers it. `F` itself is a singleton
    /// registered as any other.
    ///
    /// See [`TenantRef`] for an example.
    #[track_caller]
    pub fn tenants<F: TenantObjects>() -> ProtoDef {
        let name = format!("tenantRef<{}>", short_type_name(std::any::type_name::<F>()));
        ProtoDef::singleton::<TenantRef<F>>(|r| {
            let cache = Arc::new(Cache {
                objects: r.arc::<F>(0)?,
                app: Arc::clone(r.cell),
                state: Mutex::new(State {
                    cached: HashMap::new(),
                    by_read: BTreeMap::new(),
                    building: HashMap::new(),
                    reads: 0,
                    closed: false,
                }),
                epoch: Instant::now(),
                tasks: Mutex::new(tokio::task::JoinSet::new()),
                stop: tokio::sync::watch::Sender::new(false),
            });
            start_sweep(&cache);
            Ok(TenantRef { cache, tenant: r.context_ref::<Tenant>(1)? })
        })
        .name(name)
        .dep(Dependency::new::<F>(InjectKind::Arc, None))
        .dep(Dependency::new::<Tenant>(InjectKind::ContextRef, None))
        .on_destroy(|tenants: Arc<TenantRef<F>>| async move {
            tenants.cache.close().await;
            Ok(())
        })
        .also(tenant_key)
    }
}

/// The [`Tenant`] context proto: a scope has one only if it was seeded with one.
fn tenant_key() -> ProtoDef {
    ProtoDef::lineage::<Tenant>()
}
