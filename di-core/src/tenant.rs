//! Tenant scopes: objects built once per tenant key and cached, between the singletons (once
//! per App) and the context objects (once per request).
//!
//! A singleton `F` that implements [`TenantObjects`] builds a tenant's object; a proto that
//! holds `TenantRef<F>` reaches the object of the current scope's [`Tenant`], as a
//! `ContextRef` reaches the current scope's object. The cache is the `TenantRef<F>` singleton's
//! (one per `F`), which this module registers for whoever holds one ([`ProtoDef::tenants`]).
//! Eviction by count (the least recently used first) and by idle time runs `F`'s destroy hook;
//! so does the App's shutdown, for every object still cached.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use crate::context_ref::ContextRef;
use crate::error::{BoxError, DiError};
use crate::isolate::catch_future;
use crate::proto::def::{ProtoDef, short_type_name};
use crate::proto::dependency::Dependency;
use crate::proto::kinds::InjectKind;

/// The tenant a scope serves: its key (a customer id, a subdomain). A scope gets one from
/// [`ScopeBuilder::tenant`](crate::ScopeBuilder::tenant); a [`TenantRef`] read in a scope
/// without one fails with [`DiError::NoTenant`]. Cheap to clone.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tenant(Arc<str>);

impl Tenant {
    /// The tenant with key `key`.
    ///
    /// ```
    /// assert_eq!(di_core::Tenant::new("acme").key(), "acme");
    /// ```
    pub fn new(key: impl Into<Arc<str>>) -> Self {
        Tenant(key.into())
    }

    /// The tenant's key.
    pub fn key(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Tenant").field(&&*self.0).finish()
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

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
    note = "implement `di_core::TenantObjects` for `{Self}`: its `create` builds a tenant's object"
)]
pub trait TenantObjects: Send + Sync + 'static {
    /// The object built for each tenant.
    type Object: Send + Sync + 'static;

    /// How many tenants' objects are cached at most.
    const MAX_TENANTS: usize = 1_000;

    /// How long an object stays cached without being read.
    const IDLE: Duration = Duration::from_secs(600);

    /// Builds `tenant`'s object, at the first read of its [`TenantRef`] while none is cached.
    /// Concurrent first reads of one tenant share one call. An error (or a panic) fails the
    /// reads waiting for it and caches nothing: the next read calls `create` again.
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
/// use di_core::{App, BoxError, DiError, ProtoDef, Tenant, TenantObjects, TenantRef};
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

/// The tenants' objects of one `F`.
struct Cache<F: TenantObjects> {
    objects: Arc<F>,
    entries: Mutex<HashMap<Tenant, Entry<F::Object>>>,
    /// What "now" is counted from, in milliseconds, for each entry's last read.
    epoch: Instant,
    /// Counts the reads: which entry was read least recently, where milliseconds tie.
    reads: AtomicU64,
    /// The destroy hooks of evicted objects still running: shutdown waits for them.
    evicting: Mutex<tokio::task::JoinSet<()>>,
    /// Stops the idle sweep (shutdown).
    stop: tokio::sync::watch::Sender<bool>,
}

struct Entry<O> {
    object: Arc<OnceCell<Arc<O>>>,
    /// When it was last read, in milliseconds since `epoch`.
    used: AtomicU64,
    /// The cache's read count at its last read.
    read: AtomicU64,
}

impl<F: TenantObjects> TenantRef<F> {
    /// The current scope's tenant's object, built by `F::create` if none is cached.
    ///
    /// # Errors
    ///
    /// [`DiError::NoTenant`] if the scope has no tenant, [`DiError::NoScope`] outside a scope,
    /// [`DiError::Construction`] if `create` failed or panicked (nothing is cached then).
    pub async fn get(&self) -> Result<Arc<F::Object>, DiError> {
        let tenant = match self.tenant.try_get() {
            Ok(tenant) => tenant,
            Err(DiError::NoTenant { .. }) => return Err(DiError::NoTenant { wanted: std::any::type_name::<F>() }),
            Err(e) => return Err(e),
        };
        let cache = &*self.cache;
        let cell = cache.entry(&tenant);
        let built = cell
            .get_or_try_init(|| async {
                let made = catch_future(cache.objects.create(&tenant)).await;
                made.map(Arc::new).map_err(|source| DiError::Construction {
                    type_name: std::any::type_name::<F::Object>(),
                    name: format!("tenant {tenant} of {}", std::any::type_name::<F>()),
                    source: Arc::from(source),
                })
            })
            .await;
        match built {
            Ok(object) => Ok(Arc::clone(object)),
            Err(e) => {
                cache.forget(&tenant, &cell);
                Err(e)
            }
        }
    }

    /// How many tenants' objects are cached now.
    pub fn cached(&self) -> usize {
        self.cache.lock().values().filter(|e| e.object.initialized()).count()
    }
}

impl<F: TenantObjects> Cache<F> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Tenant, Entry<F::Object>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// `tenant`'s cell, marked read now; a new one (evicting the least recently used past the
    /// limit) if it has none.
    fn entry(&self, tenant: &Tenant) -> Arc<OnceCell<Arc<F::Object>>> {
        let (now, read) = (self.now(), self.reads.fetch_add(1, Ordering::Relaxed));
        let mut entries = self.lock();
        if let Some(entry) = entries.get(tenant) {
            entry.used.store(now, Ordering::Relaxed);
            entry.read.store(read, Ordering::Relaxed);
            return Arc::clone(&entry.object);
        }
        let object = Arc::new(OnceCell::new());
        let entry = Entry { object: Arc::clone(&object), used: AtomicU64::new(now), read: AtomicU64::new(read) };
        entries.insert(tenant.clone(), entry);
        if entries.len() > F::MAX_TENANTS {
            // Built objects, and cells no read holds (a failed `create` left them): one being
            // built has a read waiting for it.
            let oldest = entries
                .iter()
                .filter(|(_, e)| e.object.initialized() || Arc::strong_count(&e.object) == 1)
                .min_by_key(|(_, e)| e.read.load(Ordering::Relaxed))
                .map(|(t, _)| t.clone());
            if let Some(oldest) = oldest {
                let evicted = entries.remove(&oldest).expect("found above");
                drop(entries);
                self.destroy_later(oldest, evicted);
            }
        }
        object
    }

    /// Removes `tenant`'s entry if it is still `cell`, with nothing built (its `create` failed)
    /// and no other read holding it (one that would try `create` again).
    fn forget(&self, tenant: &Tenant, cell: &Arc<OnceCell<Arc<F::Object>>>) {
        let mut entries = self.lock();
        let alone = |e: &Entry<F::Object>| Arc::ptr_eq(&e.object, cell) && Arc::strong_count(cell) == 2;
        if entries.get(tenant).is_some_and(|e| alone(e) && !e.object.initialized()) {
            entries.remove(tenant);
        }
    }

    /// Runs the destroy hook of an evicted entry's object in a task that shutdown waits for.
    fn destroy_later(&self, tenant: Tenant, entry: Entry<F::Object>) {
        let Some(object) = entry.object.get().cloned() else { return };
        let objects = Arc::clone(&self.objects);
        let hook = async move { destroy(&*objects, tenant, object).await };
        let mut evicting = self.evicting.lock().unwrap_or_else(PoisonError::into_inner);
        while evicting.try_join_next().is_some() {} // what has ended
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(evicting.spawn_on(hook, &runtime)),
            Err(_) => tracing::warn!(
                objects = std::any::type_name::<F>(),
                "a tenant's object was evicted outside a tokio runtime: its destroy hook did not run"
            ),
        }
    }

    /// Evicts what has not been read for `F::IDLE`.
    fn sweep(&self) {
        let idle = u64::try_from(F::IDLE.as_millis()).unwrap_or(u64::MAX);
        let now = self.now();
        let mut entries = self.lock();
        let stale: Vec<Tenant> = entries
            .iter()
            .filter(|(_, e)| e.object.initialized() || Arc::strong_count(&e.object) == 1)
            .filter(|(_, e)| now.saturating_sub(e.used.load(Ordering::Relaxed)) >= idle)
            .map(|(t, _)| t.clone())
            .collect();
        let evicted: Vec<(Tenant, Entry<F::Object>)> =
            stale.into_iter().filter_map(|t| entries.remove_entry(&t)).collect();
        drop(entries);
        for (tenant, entry) in evicted {
            self.destroy_later(tenant, entry);
        }
    }

    /// Shutdown: stops the sweep, waits for the evictions under way, then destroys every
    /// object still cached, one tenant after another.
    async fn close(&self) {
        self.stop.send_replace(true);
        let mut evicting = std::mem::take(&mut *self.evicting.lock().unwrap_or_else(PoisonError::into_inner));
        while evicting.join_next().await.is_some() {}
        let cached: Vec<(Tenant, Entry<F::Object>)> = self.lock().drain().collect();
        for (tenant, entry) in cached {
            if let Some(object) = entry.object.get().cloned() {
                destroy(&*self.objects, tenant, object).await;
            }
        }
    }
}

/// Runs `objects`' destroy hook on `tenant`'s object, logging an error or a panic.
async fn destroy<F: TenantObjects>(objects: &F, tenant: Tenant, object: Arc<F::Object>) {
    if let Err(e) = catch_future(objects.destroy(&tenant, object)).await {
        tracing::error!(tenant = %tenant, objects = std::any::type_name::<F>(), error = %e, "a tenant object's destroy hook failed");
    }
}

/// Evicts `cache`'s idle objects every quarter of `F::IDLE` (at least every 10 ms), until the
/// cache is gone or closed.
fn start_sweep<F: TenantObjects>(cache: &Arc<Cache<F>>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            objects = std::any::type_name::<F>(),
            "the App was built outside a tokio runtime: its idle tenant objects are not evicted"
        );
        return;
    };
    let every = (F::IDLE / 4).max(Duration::from_millis(10));
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
    pub fn tenants<F: TenantObjects>() -> ProtoDef {
        let name = format!("tenantRef<{}>", short_type_name(std::any::type_name::<F>()));
        ProtoDef::singleton::<TenantRef<F>>(|r| {
            let cache = Arc::new(Cache {
                objects: r.arc::<F>(0)?,
                entries: Mutex::new(HashMap::new()),
                epoch: Instant::now(),
                reads: AtomicU64::new(0),
                evicting: Mutex::new(tokio::task::JoinSet::new()),
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
    ProtoDef::context::<Tenant>(|_| Err(DiError::NoTenant { wanted: "Tenant" })).name("tenant")
}
