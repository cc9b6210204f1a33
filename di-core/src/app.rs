//! The built container: `App` and its builder.

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use crate::config::{Config, Sources};
use crate::error::{BoxError, DiError};
use crate::graph::{FastMap, Graph, Target};
use crate::pending::{Pending, PendingGuard};
use crate::proto::{
    AnyArc, BuildFuture, Factory, HookFuture, InjectKind, ProtoDef, ProtoDescriptor, Scope, SyncFactory, downcast,
};
use crate::provider::AppCell;
use crate::resolver::Resolver;
use crate::scope::{self, ContextFuture, ScopeShared, Seeds, TryContextFuture};

static NEXT_APP_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) struct AppInner {
    pub(crate) id: u64,
    pub(crate) graph: Graph,
    /// Indexed by proto; `None` for context protos.
    pub(crate) singletons: Vec<Option<AnyArc>>,
    pub(crate) background_timeout: Duration,
    pub(crate) config: Config,
    /// This App, weakly, for the `Provider`s its singletons hold.
    pub(crate) cell: AppCell,
    /// The lazy singletons `build()` left for their first use, by proto.
    lazy: FastMap<usize, LazySlot>,
    shutdown_timeout: Duration,
    shut_down: AtomicBool,
    /// `shutdown` destroys the singletons: a lazy one is no longer built (it would never be
    /// destroyed). Set once `shutdown` has stopped waiting for scopes, handlers and jobs, which
    /// may still build one (an event's handler, say).
    destroying: AtomicBool,
    /// Scopes whose end (background tasks, destroy hooks) is still running.
    ending: Pending,
    /// The `#[event_handler]`s of the singletons, by event type.
    pub(crate) handlers: crate::events::Handlers,
    /// The `#[schedule]` jobs of the singletons.
    pub(crate) jobs: Vec<crate::schedule::Job>,
    /// Stops the jobs' timers (`shutdown`); dropped with the App, which stops them too.
    stop_jobs: tokio::sync::watch::Sender<bool>,
    /// The most objects a scope of this App has created, once past the scope table's linear
    /// range: a table that grows past that range reserves this much at once (`ScopeShared`).
    pub(crate) large_scope: std::sync::atomic::AtomicUsize,
}

impl AsRef<Pending> for AppInner {
    fn as_ref(&self) -> &Pending {
        &self.ending
    }
}

impl Drop for AppInner {
    /// Drops the singletons one at a time, dependents first (the order of their destroy
    /// hooks), each `Drop` isolated: a panic in one is logged and the others are still dropped,
    /// where a second panic while the first unwinds would abort the process.
    fn drop(&mut self) {
        let mut singletons = std::mem::take(&mut self.singletons);
        let mut lazy = std::mem::take(&mut self.lazy);
        for &p in self.graph.levels.iter().flatten().rev() {
            if let Some(obj) = singletons.get_mut(p).and_then(Option::take) {
                crate::scope::drop_isolated(obj);
            }
            if let Some(slot) = lazy.remove(&p) {
                crate::scope::drop_isolated(slot);
            }
        }
        // Whatever no level lists (none, as built): dropped the same way.
        singletons.into_iter().flatten().for_each(crate::scope::drop_isolated);
        lazy.into_values().for_each(crate::scope::drop_isolated);
    }
}

/// The built container: a validated object graph and its singletons.
///
/// Cheap to clone (one `Arc`), `Send + Sync`. Build it once at start-up with
/// [`App::builder`]; open a context scope per request with [`run_in_context`](Self::run_in_context)
/// (di-http does it for you); call [`shutdown`](Self::shutdown) on the way out.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::{App, ProtoDef};
///
/// struct Clock;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = App::builder().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
/// let a = app.get_object::<Clock>()?;
/// let b = app.clone().get_object::<Clock>()?;
/// assert!(Arc::ptr_eq(&a, &b)); // built once
/// app.shutdown().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct App {
    pub(crate) inner: Arc<AppInner>,
}

impl App {
    /// A builder that starts from every proto registered through `inventory` (the attribute
    /// macros) in the program.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn builder() -> AppBuilder {
        AppBuilder {
            defs: Vec::new(),
            linked: Vec::new(),
            inventory: true,
            overrides: Vec::new(),
            provider_overrides: Vec::new(),
            expected: Vec::new(),
            roots: Vec::new(),
            excluded: Vec::new(),
            config: Sources::default(),
            background_timeout: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(10),
            schedules: true,
        }
    }

    /// The object of type `T`: a singleton anywhere, a context object only inside a scope (the
    /// current scope's, created on first use). Several instances of `T` need
    /// [`get_object_named`](Self::get_object_named).
    ///
    /// # Errors
    ///
    /// [`DiError::NotFound`] if no proto has type `T`, [`DiError::Ambiguous`] if several do,
    /// [`DiError::NoScope`] for a context proto outside a scope, and the errors of
    /// [`ContextRef::try_get`](crate::ContextRef::try_get).
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, DiError, ProtoDef};
    ///
    /// struct Clock { now: u64 }
    /// struct Missing;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock { now: 42 }))).build().await?;
    /// assert_eq!(app.get_object::<Clock>()?.now, 42);
    /// assert!(matches!(app.get_object::<Missing>(), Err(DiError::NotFound { .. })));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn get_object<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, DiError> {
        match self.inner.singleton_of(TypeId::of::<T>()) {
            Some(obj) => Ok(downcast(obj)),
            None => self.inner.object(TypeId::of::<T>(), None, core::any::type_name::<T>()).map(downcast::<T>),
        }
    }

    /// The instance of `T` named `name`.
    ///
    /// # Errors
    ///
    /// As [`get_object`](Self::get_object); [`DiError::NotFound`] names the missing name.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Pool { url: &'static str }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool { url: "db://primary" })).name("primary"))
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool { url: "db://replica" })).name("replica"))
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Pool>("replica")?.url, "db://replica");
    /// assert!(app.get_object::<Pool>().is_err()); // two of them: name one
    /// # Ok(()) }
    /// ```
    pub fn get_object_named<T: Send + Sync + 'static>(&self, name: &str) -> Result<Arc<T>, DiError> {
        self.inner.object(TypeId::of::<T>(), Some(name), core::any::type_name::<T>()).map(downcast::<T>)
    }

    /// The proto that provides `U`, usually a `dyn Trait` (`provides(dyn Mailer)`): what an
    /// `#[inject] x: Arc<dyn Mailer>` gets. A singleton anywhere, a context object inside a
    /// scope. For a proto's own type, [`get_object`](Self::get_object) is the faster way.
    ///
    /// # Errors
    ///
    /// [`DiError::NotFound`] if no proto provides `U`, [`DiError::Ambiguous`] if several do
    /// (pick one with [`get_provider_named`](Self::get_provider_named)), and for a context
    /// proto the errors of [`ContextRef::try_get`](crate::ContextRef::try_get).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, ProtoDef};
    ///
    /// trait Mailer: Send + Sync { fn send(&self, to: &str) -> String; }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn send(&self, to: &str) -> String { format!("smtp to {to}") } }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Smtp>(|_| Ok(Smtp)).provides::<Smtp, dyn Mailer>(|s| s))
    ///     .build()
    ///     .await?;
    /// let mailer: Arc<dyn Mailer> = app.get_provider::<dyn Mailer>()?;
    /// assert_eq!(mailer.send("ada"), "smtp to ada");
    /// # Ok(()) }
    /// ```
    pub fn get_provider<U: ?Sized + 'static>(&self) -> Result<Arc<U>, DiError> {
        self.inner.provider(TypeId::of::<U>(), None, core::any::type_name::<U>())
    }

    /// The provider of `U` named `name`.
    ///
    /// # Errors
    ///
    /// As [`get_provider`](Self::get_provider); [`DiError::NotFound`] names the name.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// trait Store: Send + Sync { fn kind(&self) -> &str; }
    /// struct Pg;
    /// impl Store for Pg { fn kind(&self) -> &str { "postgres" } }
    /// struct Mem;
    /// impl Store for Mem { fn kind(&self) -> &str { "memory" } }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pg>(|_| Ok(Pg)).name("primary").provides::<Pg, dyn Store>(|s| s))
    ///     .register(ProtoDef::singleton::<Mem>(|_| Ok(Mem)).name("cache").provides::<Mem, dyn Store>(|s| s))
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_provider_named::<dyn Store>("cache")?.kind(), "memory");
    /// assert!(app.get_provider::<dyn Store>().is_err()); // two providers: say which
    /// assert!(app.get_provider_named::<dyn Store>("replica").is_err());
    /// # Ok(()) }
    /// ```
    pub fn get_provider_named<U: ?Sized + 'static>(&self, name: &str) -> Result<Arc<U>, DiError> {
        self.inner.provider(TypeId::of::<U>(), Some(name), core::any::type_name::<U>())
    }

    /// As [`get_object`](Self::get_object), and for a context proto built asynchronously (an
    /// async constructor or init hook) inside a scope: builds it as
    /// [`ContextRef::get_async`](crate::ContextRef::get_async) would.
    ///
    /// # Errors
    ///
    /// As [`get_object`](Self::get_object), and a failed construction.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Session { user: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Session>(|_| Ok(Session { user: String::new() }))
    ///         .on_init(|s: Arc<Session>| async move { Ok(()) }))
    ///     .build()
    ///     .await?;
    /// app.run_in_context(async {
    ///     assert!(app.get_object::<Session>().is_err()); // needs async construction
    ///     let session = app.get_object_async::<Session>().await?;
    ///     assert!(session.user.is_empty());
    ///     Ok::<_, di_core::DiError>(())
    /// }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_object_async<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, DiError> {
        if let Some(obj) = self.inner.singleton_of(TypeId::of::<T>()) {
            return Ok(downcast(obj));
        }
        let wanted = core::any::type_name::<T>();
        let proto = self.inner.proto_of(TypeId::of::<T>(), None, wanted)?;
        match self.inner.graph.protos[proto].scope {
            crate::Scope::Singleton | crate::Scope::Transient => self.inner.instance(proto, wanted).map(downcast::<T>),
            crate::Scope::Context => {
                let at = scope::RefKey { app_id: self.inner.id, key: proto as u32, cast: 0 };
                scope::current_async::<T>(at, wanted).await
            }
        }
    }

    /// Runs `fut` in a new context scope, then ends the scope.
    ///
    /// Context objects are created on first use inside `fut` (and the tasks it starts with
    /// [`spawn`](crate::spawn)), once per scope. The end of a scope is one sequence, the same
    /// for di-http's requests:
    ///
    /// 1. `fut` produces its output (for HTTP: the response, whose status di-http records on
    ///    `RequestHead`).
    /// 2. **Completion hooks** (`#[context_proto(complete = method)]`,
    ///    [`ProtoDef::on_complete`]) run inside the scope, newest object first, until one fails
    ///    or panics. This is where a unit of work commits. The failure is the scope's:
    ///    [`try_run_in_context`](Self::try_run_in_context) returns it, `run_in_context` logs it
    ///    (`tracing::error!`), di-http answers 500 instead and records that status.
    /// 3. The output leaves: awaiting this future returns it after step 5, or right here with
    ///    [`ContextFuture::end_in_background`] (di-http: the response is sent; nothing after this
    ///    point delays it).
    /// 4. The scope waits for its [`spawn`](crate::spawn)ed tasks, at most
    ///    [`background_task_timeout`](AppBuilder::background_task_timeout).
    /// 5. **Destroy hooks** run inside the scope (a `ContextRef` in them resolves this scope's
    ///    objects), newest object first, each isolated: an error or a panic is logged naming the
    ///    object and the others still run; it never changes the output. Then the objects are
    ///    dropped.
    /// 6. Until then the App counts the scope as ending: [`shutdown`](Self::shutdown) waits for
    ///    it before destroying singletons.
    ///
    /// If `fut` panics or this future is dropped early (a cancelled request), steps 1 to 3 are
    /// skipped and 4 and 5 run on a spawned task, exactly once, tracked as in step 6.
    ///
    /// An empty scope allocates nothing; its shared part is created on the first context object
    /// or background task, and a scope with no hook and no task ends synchronously. Waiting for
    /// background tasks needs tokio's time driver (`enable_time`, on in `#[tokio::main]`).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = di_core::App::builder().build().await?;
    /// let answer = app.run_in_context(async { 6 * 7 }).await;
    /// assert_eq!(answer, 42);
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn run_in_context<F: Future>(&self, fut: F) -> ContextFuture<F> {
        scope::run(self.inner.clone(), Seeds::default(), fut)
    }

    /// As [`run_in_context`](Self::run_in_context), returning the completion phase's failure
    /// instead of the output: for jobs and tests that must know whether their work was
    /// committed.
    ///
    /// # Errors
    ///
    /// [`DiError::Hook`] (stage `"complete"`) for the first completion hook that failed or
    /// panicked, naming its object. The scope's objects are destroyed either way.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, DiError, ProtoDef};
    ///
    /// struct Batch;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Batch>(|_| Ok(Batch))
    ///         .on_complete(|_: Arc<Batch>| async { Err("disk full".into()) }))
    ///     .build()
    ///     .await?;
    /// let result = app.try_run_in_context(async { app.get_object::<Batch>().map(|_| "written") }).await;
    /// let error = result.unwrap_err();
    /// assert!(error.to_string().ends_with("failed: disk full"), "{error}");
    /// # Ok(()) }
    /// ```
    pub fn try_run_in_context<F: Future>(&self, fut: F) -> TryContextFuture<F> {
        self.run_in_context(fut).try_complete()
    }

    /// The place of context proto `T` in this App's scopes, to hand scopes an object of it made
    /// outside the container ([`run_in_context_with`](Self::run_in_context_with)). Look it up
    /// once; it is valid for this App.
    ///
    /// # Errors
    ///
    /// [`DiError::NotFound`] unless exactly one context proto of type `T` is registered.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, DiError, ProtoDef};
    ///
    /// struct Session(u32);
    /// struct Unregistered;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().register(ProtoDef::context::<Session>(|_| Ok(Session(0)))).build().await?;
    /// let slot = app.context_slot::<Session>()?; // once, at start-up
    /// for id in 1..=3 {
    ///     let seen = app.run_in_context_with(slot, Arc::new(Session(id)), async { app.get_object::<Session>().map(|s| s.0) });
    ///     assert_eq!(seen.await?, id);
    /// }
    /// assert!(matches!(app.context_slot::<Unregistered>(), Err(DiError::NotFound { .. })));
    /// # Ok(()) }
    /// ```
    pub fn context_slot<T: Send + Sync + 'static>(&self) -> Result<ContextSlot<T>, DiError> {
        let graph = &self.inner.graph;
        let wanted = core::any::type_name::<T>();
        match graph.by_type.get(&TypeId::of::<T>()).map(Vec::as_slice) {
            Some(&[key]) if graph.protos[key].scope == crate::Scope::Context => {
                Ok(ContextSlot { app_id: self.inner.id, key: key as u32, _type: std::marker::PhantomData })
            }
            _ => Err(DiError::NotFound { wanted, name: None }),
        }
    }

    /// As [`run_in_context`](Self::run_in_context), with `value` as the scope's object of the
    /// context proto of `slot`: every `ContextRef`, every context proto injecting it and every
    /// task the scope spawns gets `value`, and its factory never runs. The scope does not
    /// destroy it (no destroy hook runs). This is how di-http gives each request its
    /// `RequestHead`. No allocation beyond `run_in_context`'s.
    ///
    /// # Panics
    ///
    /// If `slot` comes from another App.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, ProtoDef, DiError};
    ///
    /// struct RequestUser(String);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<RequestUser>(|_| Err(DiError::construction::<RequestUser>("requestUser", "given by the caller"))))
    ///     .build()
    ///     .await?;
    /// let slot = app.context_slot::<RequestUser>()?;
    /// let user = Arc::new(RequestUser("ada".into()));
    /// let name = app.run_in_context_with(slot, user, async { app.get_object::<RequestUser>().map(|u| u.0.clone()) }).await?;
    /// assert_eq!(name, "ada");
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn run_in_context_with<T: Send + Sync + 'static, F: Future>(
        &self,
        slot: ContextSlot<T>,
        value: Arc<T>,
        fut: F,
    ) -> ContextFuture<F> {
        assert_eq!(slot.app_id, self.inner.id, "a ContextSlot of another App");
        scope::run(self.inner.clone(), Seeds::one(slot.key, value as AnyArc), fut)
    }

    /// A context scope to open with objects given beforehand: the current user, a tenant, a
    /// fake clock (tegg's `mockModuleContextScope`). Each [`ScopeBuilder::with`] object is the
    /// scope's object of its context proto: every `ContextRef`, `get_object` and context proto
    /// injecting it gets it, its factory never runs, and the scope runs no hook for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef, DiError};
    ///
    /// struct User(&'static str);
    /// struct Tenant(&'static str);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<User>(|_| Ok(User("anonymous"))))
    ///     .register(ProtoDef::context::<Tenant>(|_| Ok(Tenant("default"))))
    ///     .build()
    ///     .await?;
    /// let seen = app.scope().with(User("ada"))?.with(Tenant("acme"))?.run(async {
    ///     (app.get_object::<User>().unwrap().0, app.get_object::<Tenant>().unwrap().0)
    /// }).await;
    /// assert_eq!(seen, ("ada", "acme"));
    /// # Ok(()) }
    /// ```
    pub fn scope(&self) -> ScopeBuilder<'_> {
        ScopeBuilder { app: self, seeds: Seeds::default() }
    }

    /// Shuts the App down, once (later calls do nothing): stops the `#[schedule]` timers, waits
    /// for the context scopes that are still ending (their background tasks and destroy hooks,
    /// cancelled requests' included), for running event handlers and jobs and for
    /// [`hold`](Self::hold)s, at most [`AppBuilder::shutdown_timeout`], then runs the
    /// singletons' destroy hooks in reverse dependency order (dependents first). Until then a
    /// lazy singleton is still built on first use (an event's handler may need it), and
    /// destroyed with the others; from then on it is refused ([`DiError::ShutDown`]). Scopes still running are not
    /// waited for: stop them first (di-http's [`Server`] drains its connections before
    /// calling this). The singletons themselves are dropped with the last `App` clone.
    ///
    /// [`Server`]: https://docs.rs/di-http/latest/di_http/struct.Server.html
    ///
    /// # Errors
    ///
    /// Every destroy hook runs even if some fail or panic; the failures come back as one
    /// [`DiError::Hook`] or a [`DiError::Multiple`] of them. Scopes abandoned at the deadline
    /// are logged, not returned.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Pool;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool))
    ///         .on_destroy(|_: Arc<Pool>| async { println!("pool closed"); Ok(()) }))
    ///     .build()
    ///     .await?;
    /// app.shutdown().await?; // prints "pool closed"
    /// app.shutdown().await?; // does nothing
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self) -> Result<(), DiError> {
        if self.inner.shut_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.stop_jobs.send_replace(true);
        self.inner.wait_for_endings().await;
        self.inner.destroying.store(true, Ordering::Release);
        let order: Vec<usize> = self.inner.graph.levels.iter().flatten().copied().collect();
        let built: Vec<Option<AnyArc>> =
            (0..self.inner.singletons.len()).map(|p| self.inner.singleton_to_destroy(p)).collect();
        destroy_singletons(&self.inner.graph, &built, &order).await
    }

    /// How many context scopes are ending now (waiting for background tasks or running destroy
    /// hooks after their output left, di-http: after the response was sent, or cancelled and
    /// cleaning up; a scope held open by a streamed response), plus the event handlers and
    /// scheduled runs still going and the [`hold`](Self::hold)s: what
    /// [`shutdown`](Self::shutdown) waits for.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> Result<(), di_core::DiError> {
    /// let app = di_core::App::builder().build().await?;
    /// let (finish, finished) = tokio::sync::oneshot::channel::<()>();
    /// app.run_in_context(async {
    ///     di_core::spawn(async { finished.await.ok(); }); // runs until `finish` is sent
    /// })
    /// .end_in_background()
    /// .await;
    /// assert_eq!(app.scopes_ending(), 1); // waiting for its task, on any runtime
    /// finish.send(()).unwrap();
    /// app.shutdown().await?; // waits for it
    /// assert_eq!(app.scopes_ending(), 0);
    /// # Ok(()) }
    /// ```
    pub fn scopes_ending(&self) -> usize {
        self.inner.ending.count()
    }

    /// Counts work that uses this App's singletons outside a request until the returned
    /// [`AppHold`] is dropped: [`shutdown`](Self::shutdown) waits for it (with scopes still
    /// ending, handlers and jobs, within its deadline) before it destroys any singleton, and
    /// [`scopes_ending`](Self::scopes_ending) counts it. For long-lived work a server started
    /// and must let finish: an upgraded connection (di-http's `ConnectionScope` takes one), a
    /// consumer loop.
    ///
    /// `None` once `shutdown` has stopped waiting (it is destroying the singletons, or has).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Pool { closed: AtomicBool }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool::default()))
    ///         .on_destroy(|pool: Arc<Pool>| async move { pool.closed.store(true, Ordering::SeqCst); Ok(()) }))
    ///     .build()
    ///     .await?;
    /// let hold = app.hold().expect("not shut down");
    /// let pool = app.get_object::<Pool>()?;
    /// let worker = tokio::spawn(async move {
    ///     tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    ///     let open = !pool.closed.load(Ordering::SeqCst); // still open: shutdown waits
    ///     drop(hold);
    ///     open
    /// });
    /// app.shutdown().await?;
    /// assert!(worker.await.unwrap());
    /// assert!(app.hold().is_none()); // shut down
    /// # Ok(()) }
    /// ```
    pub fn hold(&self) -> Option<AppHold> {
        self.inner.try_pending().map(|guard| AppHold { _guard: guard })
    }

    /// The App of the current context scope: what code inside a request reaches its App
    /// with, to open scopes of its own later (an upgraded connection's). `None` outside a
    /// scope.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = di_core::App::builder().build().await?;
    /// assert!(di_core::App::current().is_none());
    /// let inside = app.run_in_context(async { di_core::App::current() }).await;
    /// assert_eq!(format!("{:?}", inside.unwrap()), format!("{app:?}"));
    /// # Ok(()) }
    /// ```
    pub fn current() -> Option<App> {
        scope::current_app().map(|inner| App { inner })
    }

    /// The object graph in Graphviz DOT: singletons as boxes, context protos as ellipses,
    /// `ContextRef` edges dashed. Render with `dot -Tsvg`.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().without_inventory().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
    /// let dot = app.to_dot();
    /// assert!(dot.starts_with("digraph") && dot.contains("clock"), "{dot}");
    /// # Ok(()) }
    /// ```
    pub fn to_dot(&self) -> String {
        crate::export::dot(&self.inner.graph)
    }

    /// The object graph as a Mermaid flowchart, for Markdown that renders Mermaid.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().without_inventory().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
    /// let chart = app.to_mermaid();
    /// assert!(chart.starts_with("flowchart") && chart.contains("clock"), "{chart}");
    /// # Ok(()) }
    /// ```
    pub fn to_mermaid(&self) -> String {
        crate::export::mermaid(&self.inner.graph)
    }

    /// The merged configuration: what `#[config_proto]` sections were read from, for code
    /// that needs a key at run time. Empty when the builder was given no source.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = di_core::App::builder().config_value("http.port", 8080).build().await?;
    /// assert_eq!(app.config().get::<u16>("http.port")?, 8080);
    /// # Ok(()) }
    /// ```
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The App's event bus: what an `#[inject] events: Arc<EventBus>` holds.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = di_core::App::builder().build().await?;
    /// app.events().emit("no handler takes a &str: nothing happens");
    /// assert_eq!(app.events().handler_count::<&str>(), 0);
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> crate::EventBus {
        crate::events::EventBus::new(self.inner.cell.clone())
    }

    /// Runs the `#[schedule]` job `method` of singleton `T` now, in a scope of its own, and
    /// returns its result: for tests, and for an App built
    /// [`without_schedules`](AppBuilder::without_schedules).
    ///
    /// # Errors
    ///
    /// [`DiError::Schedule`] if `T` has no such job in this App or it is running already;
    /// [`DiError::JobFailed`] if the job returned an error or panicked.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use di_core::{handlers, singleton_proto, App};
    ///
    /// #[singleton_proto]
    /// #[derive(Default)]
    /// pub struct Purger { runs: AtomicUsize }
    ///
    /// #[handlers]
    /// impl Purger {
    ///     #[schedule(every = "1h")]
    ///     async fn purge(&self) -> Result<(), std::io::Error> {
    ///         self.runs.fetch_add(1, Ordering::Relaxed);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().without_schedules().build().await?;
    /// app.run_schedule::<Purger>("purge").await?;
    /// assert_eq!(app.get_object::<Purger>()?.runs.load(Ordering::Relaxed), 1);
    /// assert!(app.run_schedule::<Purger>("vacuum").await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn run_schedule<T: 'static>(&self, method: &str) -> Result<(), DiError> {
        crate::schedule::run_by_hand(&self.inner, TypeId::of::<T>(), core::any::type_name::<T>(), method).await
    }

    /// How many protos the App holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().without_inventory().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
    /// assert_eq!(app.proto_count(), 1);
    /// # Ok(()) }
    /// ```
    pub fn proto_count(&self) -> usize {
        self.inner.graph.protos.len()
    }
}

impl fmt::Debug for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("App").field("id", &self.inner.id).field("protos", &self.inner.graph.protos.len()).finish()
    }
}

impl AppInner {
    /// Waits until no scope is ending and no event handler or scheduled run is going, at most
    /// the shutdown timeout, then closes the count: no handler or run starts after it.
    async fn wait_for_endings(&self) {
        let deadline = std::time::Instant::now() + self.shutdown_timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if !self.ending.wait(left).await {
                tracing::error!(
                    pending = self.ending.count(),
                    timeout = ?self.shutdown_timeout,
                    "context scopes, event handlers or scheduled jobs were still running at the shutdown deadline; destroying singletons without them"
                );
                self.ending.close();
                return;
            }
            // A handler may have started between the wait and now: wait for it too.
            if self.ending.close_when_idle() {
                return;
            }
        }
    }

    /// The one singleton of type `ty`, if that is what it is: `get_object`'s fast path, small
    /// enough to return in registers.
    fn singleton_of(&self, ty: TypeId) -> Option<AnyArc> {
        match self.graph.by_type.get(&ty)?.as_slice() {
            [one] => self.singletons[*one].clone(),
            _ => None,
        }
    }

    /// The object of own type `ty`: a singleton, or the current scope's object of a context
    /// proto. What an advice is.
    #[inline]
    pub(crate) fn object_of(&self, ty: TypeId, wanted: &'static str) -> Result<AnyArc, DiError> {
        match self.singleton_of(ty) {
            Some(obj) => Ok(obj),
            None => self.object(ty, None, wanted),
        }
    }

    #[cold]
    fn object(&self, ty: TypeId, name: Option<&str>, wanted: &'static str) -> Result<AnyArc, DiError> {
        let proto = self.proto_of(ty, name, wanted)?;
        self.instance(proto, wanted)
    }

    /// The proto of own type `ty` (named `name`), or why there is not one.
    fn proto_of(&self, ty: TypeId, name: Option<&str>, wanted: &'static str) -> Result<usize, DiError> {
        let not_found = || DiError::NotFound { wanted, name: name.map(str::to_owned) };
        let list = self.graph.by_type.get(&ty).ok_or_else(not_found)?;
        match (name, list.as_slice()) {
            (None, [one]) => Ok(*one),
            (None, many) => Err(DiError::Ambiguous {
                wanted,
                by: "App::get_object".to_owned(),
                candidates: many.iter().map(|&p| self.graph.protos[p].label()).collect(),
            }),
            (Some(name), list) => {
                list.iter().copied().find(|&p| self.graph.protos[p].name == name).ok_or_else(not_found)
            }
        }
    }

    /// What the factory of `proto` sees, in `scope` (or none).
    pub(crate) fn resolver<'a>(&'a self, proto: usize, scope: Option<&'a ScopeShared>) -> Resolver<'a> {
        Resolver {
            graph: &self.graph,
            singletons: &self.singletons,
            app_id: self.id,
            proto,
            scope,
            config: &self.config,
            cell: &self.cell,
            fresh: crate::resolver::Fresh::default(),
        }
    }

    /// A new object of transient proto `key`, its context dependencies from the current scope
    /// if there is one of this App.
    pub(crate) fn build_transient(&self, key: u32) -> Result<AnyArc, DiError> {
        let scope = scope::current_shared(self.id);
        self.resolver(key as usize, scope.as_deref()).transient(key as usize)
    }

    /// Singleton `proto`, built now if it is lazy and this is its first use.
    pub(crate) fn lazy_singleton(&self, proto: usize, wanted: &'static str) -> Result<AnyArc, DiError> {
        let slot = self.lazy.get(&proto).ok_or(DiError::NotBuilt { wanted })?;
        if let Some(obj) = slot.value.get() {
            return Ok(obj.clone());
        }
        // Its construction asking for itself (through a provider or a context object) would
        // wait on its own lock forever: say so instead.
        let me = (self.id, proto);
        if LAZY_BUILDING.with(|b| b.borrow().contains(&me)) {
            let label = self.graph.protos[proto].label();
            return Err(DiError::EagerCycle { chain: vec![label.clone(), label] });
        }
        struct Building((u64, usize));
        impl Drop for Building {
            fn drop(&mut self) {
                LAZY_BUILDING.with(|b| b.borrow_mut().retain(|x| *x != self.0));
            }
        }
        LAZY_BUILDING.with(|b| b.borrow_mut().push(me));
        let _building_mark = Building(me);
        // Factories run with no lock of ours but this one; dependencies are acyclic, so a lazy
        // singleton never waits for itself.
        let _building = slot.building.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(obj) = slot.value.get() {
            return Ok(obj.clone());
        }
        // Built once `shutdown` destroys the singletons, it would never be destroyed; until then
        // (while it waits for scopes, handlers and jobs) it is built as usual, and destroyed.
        // Checked under the lock, which `shutdown` takes to see what it must destroy.
        if self.destroying.load(Ordering::Acquire) {
            return Err(DiError::ShutDown { wanted });
        }
        let obj = match &self.graph.protos[proto].factory {
            Factory::Sync(factory) => factory.call(&self.resolver(proto, None))?,
            _ => unreachable!("a lazy singleton has a sync factory (checked by the graph)"),
        };
        Ok(slot.value.get_or_init(|| obj).clone())
    }

    /// Singleton `proto` for `shutdown` to destroy, once `destroying` is set: a lazy one being
    /// built now is waited for (its construction holds the slot's lock), and none starts after.
    fn singleton_to_destroy(&self, proto: usize) -> Option<AnyArc> {
        if let Some(obj) = &self.singletons[proto] {
            return Some(obj.clone());
        }
        let slot = self.lazy.get(&proto)?;
        let _built = slot.building.lock().unwrap_or_else(|e| e.into_inner());
        slot.value.get().cloned()
    }

    /// The object of `proto`: a singleton (built now if lazy), a new transient, or the current
    /// scope's context object.
    pub(crate) fn instance_of(&self, proto: usize) -> Result<AnyArc, DiError> {
        self.instance(proto, self.graph.protos[proto].type_name)
    }

    /// Whether `shutdown` has started.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    /// Counts an event handler or a scheduled run, unless `shutdown` has stopped waiting for
    /// them (it is destroying the singletons, or has).
    pub(crate) fn try_pending(self: &Arc<Self>) -> Option<PendingGuard<AppInner>> {
        PendingGuard::try_new(self.clone())
    }

    /// Proto `proto`'s object: the singleton, or the current scope's.
    fn instance(&self, proto: usize, wanted: &'static str) -> Result<AnyArc, DiError> {
        match &self.singletons[proto] {
            Some(obj) => Ok(obj.clone()),
            None if self.graph.protos[proto].scope == crate::Scope::Singleton => self.lazy_singleton(proto, wanted),
            None if self.graph.protos[proto].scope == crate::Scope::Transient => self.build_transient(proto as u32),
            None => scope::current(self.id, proto as u32, wanted),
        }
    }

    /// The provider of `ty` (named `name`) as `Arc<U>`, `U` being `ty`.
    fn provider<U: ?Sized + 'static>(
        &self,
        ty: TypeId,
        name: Option<&str>,
        wanted: &'static str,
    ) -> Result<Arc<U>, DiError> {
        let not_found = || DiError::NotFound { wanted, name: name.map(str::to_owned) };
        let all = self.graph.provided.get(&ty).map_or(&[][..], Vec::as_slice);
        let chosen: Vec<Target> =
            all.iter().copied().filter(|t| name.is_none_or(|n| self.graph.protos[t.proto].name == n)).collect();
        let target = match chosen.as_slice() {
            [] => return Err(not_found()),
            [one] => *one,
            _ => {
                return Err(DiError::Ambiguous {
                    wanted,
                    by: "App::get_provider".to_owned(),
                    candidates: crate::graph::sorted(&self.graph.protos, chosen)
                        .iter()
                        .map(|t| self.graph.protos[t.proto].label())
                        .collect(),
                });
            }
        };
        let obj = self.instance(target.proto, wanted)?;
        Ok(crate::resolver::provided_as::<U>(&self.graph, target, obj))
    }
}

/// A fake for whichever proto provides a type: how to make its def under a given name.
struct ProviderOverride {
    type_id: TypeId,
    type_name: &'static str,
    name: Option<String>,
    fake: Box<dyn Fn(Cow<'static, str>, Scope) -> ProtoDef + Send + Sync>,
}

/// A proto holding `value`, providing `U`, named `name`: a context proto where it replaces one
/// (so that `ContextRef<U>` still finds it; every scope gets the same `value`), else a
/// singleton.
fn fake_def<U: ?Sized + Send + Sync + 'static>(value: Arc<U>, name: Cow<'static, str>, scope: Scope) -> ProtoDef {
    let factory = move |_: &Resolver<'_>| Ok(value.clone());
    let def = match scope {
        Scope::Context => ProtoDef::context::<Arc<U>>(factory),
        Scope::Singleton | Scope::Transient => ProtoDef::singleton::<Arc<U>>(factory),
    };
    let mut def = def.name(name);
    def.provides.push(crate::proto::ProvideDef {
        type_id: TypeId::of::<U>(),
        type_name: core::any::type_name::<U>(),
        cast: crate::proto::ProvideCast::Closure(Arc::new(|obj: AnyArc, out: &mut dyn std::any::Any| {
            crate::proto::put(out, (*downcast::<Arc<U>>(obj)).clone());
        })),
    });
    def
}

std::thread_local! {
    /// The lazy singletons this thread is building: `(app, proto)`.
    static LAZY_BUILDING: std::cell::RefCell<Vec<(u64, usize)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Work that [`App::shutdown`] waits for before destroying singletons, counted until dropped:
/// see [`App::hold`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = di_core::App::builder().build().await?;
/// let hold: di_core::AppHold = app.hold().expect("not shut down");
/// assert_eq!(app.scopes_ending(), 1); // counted with what shutdown waits for
/// drop(hold);
/// assert_eq!(app.scopes_ending(), 0);
/// # Ok(()) }
/// ```
#[must_use = "the App stops waiting for the work when its hold is dropped"]
pub struct AppHold {
    _guard: PendingGuard<AppInner>,
}

impl fmt::Debug for AppHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppHold").finish_non_exhaustive()
    }
}

/// A lazy singleton: built once, by the first that asks (the others wait on the lock).
#[derive(Default)]
struct LazySlot {
    value: std::sync::OnceLock<AnyArc>,
    building: std::sync::Mutex<()>,
}

struct Override {
    type_id: TypeId,
    type_name: &'static str,
    name: Option<String>,
    value: AnyArc,
}

/// A context scope being prepared: the objects it starts with. From [`App::scope`].
///
/// # Examples
///
/// ```
/// use di_core::{App, ProtoDef};
///
/// struct User(&'static str);
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = App::builder().register(ProtoDef::context::<User>(|_| Ok(User("anonymous")))).build().await?;
/// // Without seeds, the scope builds its own object; with one, it uses what it was given.
/// let built = app.run_in_context(async { app.get_object::<User>().map(|u| u.0) }).await?;
/// let given = app.scope().with(User("ada"))?.run(async { app.get_object::<User>().map(|u| u.0) }).await?;
/// assert_eq!((built, given), ("anonymous", "ada"));
/// # Ok(()) }
/// ```
#[must_use = "a ScopeBuilder opens no scope until `run`"]
pub struct ScopeBuilder<'a> {
    app: &'a App,
    seeds: Seeds,
}

impl ScopeBuilder<'_> {
    /// Gives the scope `value` as its object of context proto `T` (replacing an earlier one).
    ///
    /// # Errors
    ///
    /// [`DiError::NotFound`] unless exactly one context proto of type `T` is registered.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, DiError, ProtoDef};
    ///
    /// struct User(&'static str);
    /// struct Locale(&'static str);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<User>(|_| Ok(User("anonymous"))))
    ///     .register(ProtoDef::context::<Locale>(|_| Ok(Locale("en"))))
    ///     .build()
    ///     .await?;
    /// let seen = app
    ///     .scope()
    ///     .with(User("ada"))?
    ///     .with(Locale("fr"))?
    ///     .with(Locale("de"))? // replaces "fr"
    ///     .run(async { (app.get_object::<User>().unwrap().0, app.get_object::<Locale>().unwrap().0) })
    ///     .await;
    /// assert_eq!(seen, ("ada", "de"));
    /// // A type that is no context proto of this App is refused, naming it.
    /// assert!(matches!(app.scope().with(42_u8), Err(DiError::NotFound { .. })));
    /// # Ok(()) }
    /// ```
    pub fn with<T: Send + Sync + 'static>(self, value: T) -> Result<Self, DiError> {
        self.with_arc(Arc::new(value))
    }

    /// As [`with`](Self::with), for an object the test keeps a handle on.
    ///
    /// # Errors
    ///
    /// As [`with`](Self::with).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use di_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Audit { lines: Mutex<Vec<String>> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().register(ProtoDef::context::<Audit>(|_| Ok(Audit::default()))).build().await?;
    /// let audit = Arc::new(Audit::default());
    /// app.scope()
    ///     .with_arc(audit.clone())?
    ///     .run(async { app.get_object::<Audit>().unwrap().lines.lock().unwrap().push("seen".into()) })
    ///     .await;
    /// assert_eq!(*audit.lines.lock().unwrap(), ["seen"]); // the test kept its handle
    /// # Ok(()) }
    /// ```
    pub fn with_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Result<Self, DiError> {
        let slot = self.app.context_slot::<T>()?;
        self.seeds.set(slot.key, value, false);
        Ok(self)
    }

    /// As [`with_arc`](Self::with_arc), and the scope runs `value`'s complete and destroy hooks
    /// when it ends, as for an object it built (its init hook does not run: the caller built
    /// it). For a test that seeds a unit of work and checks that the scope commits it.
    ///
    /// # Errors
    ///
    /// As [`with`](Self::with).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct UnitOfWork { committed: AtomicBool }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<UnitOfWork>(|_| Ok(UnitOfWork::default()))
    ///         .on_complete(|uow: Arc<UnitOfWork>| async move {
    ///             uow.committed.store(true, Ordering::SeqCst);
    ///             Ok(())
    ///         }))
    ///     .build()
    ///     .await?;
    /// let (plain, hooked) = (Arc::new(UnitOfWork::default()), Arc::new(UnitOfWork::default()));
    /// app.scope().with_arc(plain.clone())?.run(async {}).await;
    /// app.scope().with_hooks(hooked.clone())?.run(async {}).await;
    /// assert!(!plain.committed.load(Ordering::SeqCst)); // counted as built: no hooks
    /// assert!(hooked.committed.load(Ordering::SeqCst)); // asked for its hooks
    /// # Ok(()) }
    /// ```
    pub fn with_hooks<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Result<Self, DiError> {
        let slot = self.app.context_slot::<T>()?;
        self.seeds.set(slot.key, value, true);
        Ok(self)
    }

    /// Runs `fut` in the scope, as [`App::run_in_context`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Connection { closed: AtomicBool }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Connection>(|_| Ok(Connection::default()))
    ///         .on_destroy(|c: Arc<Connection>| async move { c.closed.store(true, Ordering::SeqCst); Ok(()) }))
    ///     .build()
    ///     .await?;
    /// let given = Arc::new(Connection::default());
    /// // `run` returns the future's output once the scope has ended.
    /// let answer = app.scope().with_hooks(given.clone())?.run(async { 42 }).await;
    /// assert_eq!(answer, 42);
    /// assert!(given.closed.load(Ordering::SeqCst)); // its destroy hook ran as the scope ended
    /// # Ok(()) }
    /// ```
    pub fn run<F: Future>(self, fut: F) -> ContextFuture<F> {
        scope::run(self.app.inner.clone(), self.seeds, fut)
    }

    /// Runs `fut` in the scope, returning a failed completion, as
    /// [`App::try_run_in_context`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Tenant(&'static str);
    /// struct Batch;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Tenant>(|_| Ok(Tenant("default"))))
    ///     .register(ProtoDef::context::<Batch>(|_| Ok(Batch))
    ///         .on_complete(|_: Arc<Batch>| async { Err("disk full".into()) }))
    ///     .build()
    ///     .await?;
    /// let result = app
    ///     .scope()
    ///     .with(Tenant("acme"))?
    ///     .try_run(async { app.get_object::<Batch>().map(|_| app.get_object::<Tenant>().unwrap().0) })
    ///     .await;
    /// assert!(result.unwrap_err().to_string().ends_with("failed: disk full"));
    /// # Ok(()) }
    /// ```
    pub fn try_run<F: Future>(self, fut: F) -> TryContextFuture<F> {
        self.run(fut).try_complete()
    }
}

impl fmt::Debug for ScopeBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeBuilder").field("seeds", &self.seeds.iter().count()).finish()
    }
}

/// Where a context proto's object lives in an App's scopes: from [`App::context_slot`], for
/// [`App::run_in_context_with`].
///
/// # Examples
///
/// A slot is `Copy`: look it up once and hand it to every scope.
///
/// ```
/// use std::sync::Arc;
/// use di_core::{App, ContextSlot, ProtoDef};
///
/// struct Tenant(&'static str);
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = App::builder().register(ProtoDef::context::<Tenant>(|_| Ok(Tenant("none")))).build().await?;
/// let slot: ContextSlot<Tenant> = app.context_slot()?;
/// let (a, b) = (slot, slot);
/// let first = app.run_in_context_with(a, Arc::new(Tenant("acme")), async { app.get_object::<Tenant>().map(|t| t.0) });
/// let second = app.run_in_context_with(b, Arc::new(Tenant("initech")), async { app.get_object::<Tenant>().map(|t| t.0) });
/// assert_eq!((first.await?, second.await?), ("acme", "initech"));
/// # Ok(()) }
/// ```
pub struct ContextSlot<T> {
    app_id: u64,
    key: u32,
    _type: std::marker::PhantomData<fn() -> T>,
}

impl<T> Clone for ContextSlot<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ContextSlot<T> {}

impl<T> fmt::Debug for ContextSlot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextSlot").field("type", &core::any::type_name::<T>()).field("key", &self.key).finish()
    }
}

/// Collects protos and options, then validates the graph and builds the singletons.
///
/// # Examples
///
/// Replace a proto with a fake in a test:
///
/// ```
/// use di_core::{App, ProtoDef};
///
/// struct Mailer { real: bool }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::singleton::<Mailer>(|_| Ok(Mailer { real: true })))
///     .override_with(Mailer { real: false })
///     .build()
///     .await?;
/// assert!(!app.get_object::<Mailer>()?.real);
/// # Ok(()) }
/// ```
#[must_use = "an AppBuilder does nothing until `build().await`"]
pub struct AppBuilder {
    defs: Vec<ProtoDef>,
    linked: Vec<&'static ProtoDescriptor>,
    inventory: bool,
    overrides: Vec<Override>,
    provider_overrides: Vec<ProviderOverride>,
    expected: Vec<(TypeId, &'static str, usize)>,
    roots: Vec<(TypeId, &'static str)>,
    excluded: Vec<(TypeId, &'static str)>,
    config: Sources,
    background_timeout: Duration,
    shutdown_timeout: Duration,
    schedules: bool,
}

impl AppBuilder {
    /// Adds a TOML configuration file. A missing file is skipped (for optional layers such as
    /// `app.local.toml`; see [`config_file_required`](Self::config_file_required)); a malformed
    /// one fails [`build`](Self::build). With a [`profile`](Self::profile), the file's profile
    /// variant is read right after it, if it exists: `config/app.prod.toml` for
    /// `config/app.toml` and profile `prod`.
    ///
    /// Precedence, lowest first: files (in the order added), then
    /// [`config_env`](Self::config_env), then [`config_value`](Self::config_value), whatever
    /// the order of the calls. A relative path is relative to the working directory.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::App;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = std::env::temp_dir().join(format!("di-config-file-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("app.toml"), "[http]\nport = 8080\nhost = \"0.0.0.0\"\n")?;
    /// std::fs::write(dir.join("app.prod.toml"), "[http]\nport = 80\n")?;
    ///
    /// let app = App::builder()
    ///     .config_file(dir.join("app.toml"))
    ///     .config_file(dir.join("app.local.toml")) // missing: skipped
    ///     .profile("prod")
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.config().get::<u16>("http.port")?, 80); // app.prod.toml, read after app.toml
    /// assert_eq!(app.config().get::<String>("http.host")?, "0.0.0.0");
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(()) }
    /// ```
    pub fn config_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.config.file(path.into(), false);
        self
    }

    /// As [`config_file`](Self::config_file), but a missing file fails [`build`](Self::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::App;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let missing = std::env::temp_dir().join("di-no-such-dir/app.toml");
    /// let error = App::builder().config_file_required(&missing).build().await.unwrap_err();
    /// assert!(error.to_string().contains("app.toml"), "{error}"); // the error names the file
    /// # }
    /// ```
    pub fn config_file_required(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.config.file(path.into(), true);
        self
    }

    /// Adds the environment variables starting with `prefix` as configuration: `__` separates
    /// the levels of a key, and names are lowercased, so with `config_env("APP_")`,
    /// `APP_DB__URL` sets `db.url`. Values are strings, read as the field's type asks:
    /// `APP_DB__POOL=4` fills a `u32`, `APP_DB__PASSWORD=1234` a `String`, `true` / `yes` / `1`
    /// a `bool`. Overrides files; overridden by values.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use di_core::App;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// // SAFETY: this program's only thread; usually the variables come from the shell.
    /// unsafe {
    ///     std::env::set_var("SHOP_DB__POOL", "8");
    ///     std::env::set_var("SHOP_DB__URL", "postgres://db/shop");
    /// }
    /// let app = App::builder()
    ///     .config_value("db.url", "sqlite::memory:") // values win over the environment
    ///     .config_env("SHOP_")
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.config().get::<u32>("db.pool")?, 8); // a string read as a u32
    /// assert_eq!(app.config().get::<String>("db.url")?, "sqlite::memory:");
    /// # Ok(()) }
    /// ```
    pub fn config_env(mut self, prefix: impl Into<String>) -> Self {
        self.config.env(prefix.into());
        self
    }

    /// Sets configuration key `key` (a dotted path: `db.pool`) to `value`, any serializable
    /// value: the highest precedence, for tests and for values computed at start-up.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use di_core::{App, config_proto};
    ///
    /// #[config_proto(prefix = "db")]
    /// #[derive(serde::Deserialize)]
    /// pub struct DbConfig {
    ///     url: String,
    ///     #[serde(default = "four")]
    ///     pool: u32,
    /// }
    /// fn four() -> u32 { 4 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().config_value("db.url", "sqlite::memory:").build().await?;
    /// let db = app.get_object::<DbConfig>()?;
    /// assert_eq!((db.url.as_str(), db.pool), ("sqlite::memory:", 4));
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn config_value(mut self, key: impl Into<String>, value: impl serde::Serialize) -> Self {
        let value = figment::value::Value::serialize(value).map_err(|e| e.kind.to_string());
        self.config.value(key.into(), value, std::panic::Location::caller());
        self
    }

    /// Sets the active profile: protos declared with `profile = "..."` (or
    /// [`ProtoDef::profile`]) register only under their profile, and each configuration file
    /// is followed by its profile variant (`app.prod.toml`). No profile by default.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, ProtoDef};
    ///
    /// trait Mailer: Send + Sync { fn kind(&self) -> &'static str; }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn kind(&self) -> &'static str { "smtp" } }
    /// struct Printer;
    /// impl Mailer for Printer { fn kind(&self) -> &'static str { "printer" } }
    ///
    /// fn builder() -> di_core::AppBuilder {
    ///     App::builder()
    ///         .register(ProtoDef::singleton::<Smtp>(|_| Ok(Smtp)).provides::<Smtp, dyn Mailer>(|s| s as Arc<dyn Mailer>).profile("prod"))
    ///         .register(ProtoDef::singleton::<Printer>(|_| Ok(Printer)).provides::<Printer, dyn Mailer>(|p| p as Arc<dyn Mailer>).profile("dev"))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let prod = builder().profile("prod").build().await?;
    /// let dev = builder().profile("dev").build().await?;
    /// assert_eq!(prod.get_provider::<dyn Mailer>()?.kind(), "smtp");
    /// assert_eq!(dev.get_provider::<dyn Mailer>()?.kind(), "printer");
    /// # Ok(()) }
    /// ```
    pub fn profile(mut self, profile: impl Into<String>) -> Self {
        self.config.profile = Some(profile.into());
        self
    }

    /// Starts no timer for the `#[schedule]` jobs: tests run them by hand with
    /// [`App::run_schedule`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// // Tests run jobs by hand (`App::run_schedule`), never on their timers.
    /// let app = di_core::App::builder().without_schedules().build().await?;
    /// # let _ = app;
    /// # Ok(()) }
    /// ```
    pub fn without_schedules(mut self) -> Self {
        self.schedules = false;
        self
    }

    /// Builds only the singletons that `T` reaches (and those of the other roots): the whole
    /// graph is still validated, but a test that touches a handful of services does not build
    /// the thousands of others, nor run their init hooks and their I/O. Reached means: taken by
    /// value, or by a context proto that a root reaches through a `ContextRef`. `T` is a proto's
    /// own type or a type one provides (a `dyn Trait`). Asking for a singleton that was not
    /// built fails with [`DiError::NotBuilt`].
    ///
    /// What it saves is the construction and the init hooks of the rest: their I/O and side
    /// effects. In time, little when those are cheap: with 10,000 singletons that each sum a
    /// small vector and yield once in an init hook, 4.3 ms against 4.0 ms from a root reaching
    /// none of them (validating the graph is most of `build()`; `benches/RESULTS.md`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, DiError, Dependency, InjectKind, ProtoDef};
    ///
    /// struct Clock;
    /// struct Signup { _clock: Arc<Clock> }
    /// struct Billing; // slow to build, not needed by this test
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Clock>(|_| Ok(Clock)))
    ///     .register(ProtoDef::singleton::<Signup>(|r| Ok(Signup { _clock: r.arc(0)? }))
    ///         .dep(Dependency::new::<Clock>(InjectKind::Arc, None)))
    ///     .register(ProtoDef::singleton::<Billing>(|_| unreachable!("not built")))
    ///     .root::<Signup>()
    ///     .build()
    ///     .await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// assert!(matches!(app.get_object::<Billing>(), Err(DiError::NotBuilt { .. })));
    /// # Ok(()) }
    /// ```
    pub fn root<T: ?Sized + 'static>(mut self) -> Self {
        self.roots.push((TypeId::of::<T>(), core::any::type_name::<T>()));
        self
    }

    /// Requires at least `n` providers of `U` (usually a `dyn Trait` that plugins provide):
    /// `build()` fails naming the ones found, instead of a `Vec<Arc<U>>` coming back short
    /// because the linker dropped a plugin crate the program never names.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, DiError};
    ///
    /// trait Plugin: Send + Sync {}
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let e = App::builder().without_inventory().expect_providers::<dyn Plugin>(1).build().await.unwrap_err();
    /// assert!(matches!(e, DiError::ExpectedProviders { expected: 1, .. }), "{e}");
    /// # }
    /// ```
    pub fn expect_providers<U: ?Sized + 'static>(mut self, n: usize) -> Self {
        self.expected.push((TypeId::of::<U>(), core::any::type_name::<U>(), n));
        self
    }

    /// Leaves out every proto of type `T`, annotated or registered by hand. A dependency that
    /// only `T` provided is then a build error naming it.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, DiError, ProtoDef};
    ///
    /// struct Metrics;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::singleton::<Metrics>(|_| Ok(Metrics)))
    ///     .exclude::<Metrics>()
    ///     .build()
    ///     .await?;
    /// assert!(matches!(app.get_object::<Metrics>(), Err(DiError::NotFound { .. })));
    /// # Ok(()) }
    /// ```
    pub fn exclude<T: ?Sized + 'static>(mut self) -> Self {
        self.excluded.push((TypeId::of::<T>(), core::any::type_name::<T>()));
        self
    }

    /// Registers a proto by hand.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn register(mut self, def: ProtoDef) -> Self {
        self.defs.push(def);
        self
    }

    /// Registers many protos by hand.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Shard(usize);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let shards = (0..4).map(|i| ProtoDef::singleton::<Shard>(move |_| Ok(Shard(i))).name(format!("shard{i}")));
    /// let app = App::builder().without_inventory().register_all(shards).build().await?;
    /// assert_eq!(app.get_object_named::<Shard>("shard3")?.0, 3);
    /// # Ok(()) }
    /// ```
    pub fn register_all(mut self, defs: impl IntoIterator<Item = ProtoDef>) -> Self {
        self.defs.extend(defs);
        self
    }

    /// Registers the annotated proto `T` even if the linker dropped its `inventory` entry.
    ///
    /// `inventory` registers protos from static constructors. A linker may leave out an object
    /// file that nothing references, and with it the registrations of a crate the program links
    /// but never names, typically a plugin that only provides a `dyn Trait` implementation
    /// (inventory issue 7, rust-lang/rust#133491). Naming one of its protos here references it:
    /// `T` is registered for sure, and so, in practice, are the other protos of its module.
    /// Registering a proto both ways is harmless; the duplicate is dropped.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use di_core::{singleton_proto, App};
    ///
    /// #[singleton_proto]
    /// pub struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// // Named here, `Clock` is registered even in an App that ignores inventory.
    /// let app = App::builder().without_inventory().link::<Clock>().build().await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn link<T: crate::Proto>(mut self) -> Self {
        self.linked.push(T::descriptor());
        self
    }

    /// Ignores the protos registered through `inventory`: the App holds only what was added by
    /// hand. For tests and generated graphs.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// // Only what is registered here: an isolated App for a test.
    /// let app = App::builder().without_inventory().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
    /// assert_eq!(app.proto_count(), 1);
    /// # Ok(()) }
    /// ```
    pub fn without_inventory(mut self) -> Self {
        self.inventory = false;
        self
    }

    /// Replaces every proto of type `T` with `value`, shared by all who inject it (in every
    /// scope, for a context proto). The fake keeps the proto's name and what it provides, and
    /// drops its dependencies and hooks.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Clock { now: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Clock>(|_| Ok(Clock { now: 1 })))
    ///     .override_with(Clock { now: 42 }) // a fixed clock for the test
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object::<Clock>()?.now, 42);
    /// # Ok(()) }
    /// ```
    pub fn override_with<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.overrides.push(Override {
            type_id: TypeId::of::<T>(),
            type_name: core::any::type_name::<T>(),
            name: None,
            value: Arc::new(value),
        });
        self
    }

    /// Replaces whichever proto provides `U` (usually a `dyn Trait`) with `value`: every
    /// consumer of `Arc<U>`, `Option<Arc<U>>`, `Vec<Arc<U>>` or `Keyed<U>` gets the fake. The
    /// replaced proto is gone (it is not built, and injecting its own type fails `build()`),
    /// unless it provides other traits too: then it stays for those. The fake takes its name,
    /// so qualifiers still find it, and its scope when it was a context proto, so that a
    /// `ContextRef<dyn U>` still reaches it (the same `value` in every scope). With several
    /// providers, each is replaced by the same fake;
    /// [`override_provider_named`](Self::override_provider_named) picks one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use di_core::{App, Dependency, InjectKind, ProtoDef};
    ///
    /// trait Mailer: Send + Sync { fn send(&self, to: &str); }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn send(&self, _: &str) { unreachable!("no mail from tests") } }
    /// #[derive(Default)]
    /// struct FakeMailer { sent: Mutex<Vec<String>> }
    /// impl Mailer for FakeMailer { fn send(&self, to: &str) { self.sent.lock().unwrap().push(to.into()) } }
    /// struct Signup { mailer: Arc<dyn Mailer> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let fake = Arc::new(FakeMailer::default());
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Smtp>(|_| Ok(Smtp)).provides::<Smtp, dyn Mailer>(|s| s))
    ///     .register(ProtoDef::singleton::<Signup>(|r| Ok(Signup { mailer: r.arc(0)? }))
    ///         .dep(Dependency::new::<dyn Mailer>(InjectKind::Arc, None)))
    ///     .override_provider::<dyn Mailer>(fake.clone())
    ///     .build()
    ///     .await?;
    /// app.get_object::<Signup>()?.mailer.send("ada");
    /// assert_eq!(*fake.sent.lock().unwrap(), ["ada"]);
    /// # Ok(()) }
    /// ```
    pub fn override_provider<U: ?Sized + Send + Sync + 'static>(mut self, value: Arc<U>) -> Self {
        self.provider_overrides.push(ProviderOverride {
            type_id: TypeId::of::<U>(),
            type_name: core::any::type_name::<U>(),
            name: None,
            fake: Box::new(move |name, scope| fake_def(value.clone(), name, scope)),
        });
        self
    }

    /// Replaces the provider of `U` named `name` with `value`; the others stay.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, Keyed, ProtoDef, Dependency, InjectKind};
    ///
    /// trait Store: Send + Sync { fn kind(&self) -> &str; }
    /// struct Pg;
    /// impl Store for Pg { fn kind(&self) -> &str { "postgres" } }
    /// struct Redis;
    /// impl Store for Redis { fn kind(&self) -> &str { "redis" } }
    /// struct Fake;
    /// impl Store for Fake { fn kind(&self) -> &str { "fake" } }
    /// struct Report { stores: Keyed<dyn Store> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pg>(|_| Ok(Pg)).name("primary").provides::<Pg, dyn Store>(|s| s))
    ///     .register(ProtoDef::singleton::<Redis>(|_| Ok(Redis)).name("cache").provides::<Redis, dyn Store>(|s| s))
    ///     .register(ProtoDef::singleton::<Report>(|r| Ok(Report { stores: r.keyed(0)? }))
    ///         .dep(Dependency::new::<dyn Store>(InjectKind::Keyed, None)))
    ///     .override_provider_named::<dyn Store>("cache", Arc::new(Fake))
    ///     .build()
    ///     .await?;
    /// let report = app.get_object::<Report>()?;
    /// assert_eq!(report.stores.get("cache")?.kind(), "fake");
    /// assert_eq!(report.stores.get("primary")?.kind(), "postgres");
    /// # Ok(()) }
    /// ```
    pub fn override_provider_named<U: ?Sized + Send + Sync + 'static>(
        mut self,
        name: impl Into<String>,
        value: Arc<U>,
    ) -> Self {
        self.provider_overrides.push(ProviderOverride {
            type_id: TypeId::of::<U>(),
            type_name: core::any::type_name::<U>(),
            name: Some(name.into()),
            fake: Box::new(move |name, scope| fake_def(value.clone(), name, scope)),
        });
        self
    }

    /// Replaces the instance of `T` named `name` with `value`.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Pool { url: &'static str }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool { url: "db://primary" })).name("primary"))
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool { url: "db://replica" })).name("replica"))
    ///     .override_named("replica", Pool { url: "memory://" })
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Pool>("replica")?.url, "memory://");
    /// assert_eq!(app.get_object_named::<Pool>("primary")?.url, "db://primary");
    /// # Ok(()) }
    /// ```
    pub fn override_named<T: Send + Sync + 'static>(mut self, name: impl Into<String>, value: T) -> Self {
        self.overrides.push(Override {
            type_id: TypeId::of::<T>(),
            type_name: core::any::type_name::<T>(),
            name: Some(name.into()),
            value: Arc::new(value),
        });
        self
    }

    /// How long a context scope waits for the tasks it [`spawn`](crate::spawn)ed before
    /// destroying its objects anyway. Default: 5 seconds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = di_core::App::builder().background_task_timeout(Duration::from_secs(1)).build().await?;
    /// # let _ = app;
    /// # Ok(()) }
    /// ```
    pub fn background_task_timeout(mut self, timeout: Duration) -> Self {
        self.background_timeout = timeout;
        self
    }

    /// How long [`App::shutdown`] waits for context scopes that are still ending before it
    /// destroys the singletons anyway. Default: 10 seconds (twice the background-task timeout,
    /// so that a scope waiting for its tasks still has time for its destroy hooks).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = di_core::App::builder().shutdown_timeout(Duration::from_secs(20)).build().await?;
    /// app.shutdown().await?; // waits at most 20 s for scopes still ending
    /// # Ok(()) }
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Validates the graph and builds the singletons in dependency order, running their async
    /// init hooks (those of independent singletons concurrently).
    ///
    /// # Errors
    ///
    /// Every graph error ([`DiError::Missing`], [`DiError::Cycle`], [`DiError::Ambiguous`],
    /// [`DiError::UnknownQualifier`], [`DiError::Duplicate`], [`DiError::ContextByValue`], ...),
    /// several at once as [`DiError::Multiple`]; [`DiError::OverrideUnknown`]; and a failing
    /// factory ([`DiError::Construction`]) or init hook ([`DiError::Hook`]), after destroying the singletons already built.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, Dependency, DiError, InjectKind, ProtoDef};
    ///
    /// struct Db;
    /// struct Repo;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// // `Repo` needs a `Db` that nobody registered: `build()` says so before any request.
    /// let error = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::singleton::<Repo>(|r| { r.arc::<Db>(0)?; Ok(Repo) }).dep(Dependency::new::<Db>(InjectKind::Arc, None)))
    ///     .build()
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(error, DiError::Missing { .. }), "{error}");
    /// # Ok(()) }
    /// ```
    pub async fn build(self) -> Result<App, DiError> {
        let mut defs: Vec<ProtoDef> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let registered = self.inventory.then(|| inventory::iter::<ProtoDescriptor>.into_iter()).into_iter().flatten();
        for descriptor in self.linked.into_iter().chain(registered) {
            if seen.insert(((descriptor.type_id)(), descriptor.name)) {
                defs.push(descriptor.to_def());
            }
        }
        defs.extend(self.defs);

        let mut errors = Vec::new();
        let profile = self.config.profile.clone();
        let mut inactive = select_active(&mut defs, profile.as_deref(), &self.excluded, &mut errors);
        let overridden = |ty: TypeId, name: &str| {
            self.overrides.iter().any(|o| o.type_id == ty && o.name.as_deref().is_none_or(|n| n == name))
        };
        let config = match self.config.load() {
            Ok(config) => {
                load_config(&mut defs, &config, overridden, &mut errors);
                config
            }
            // Sections are not read from a broken source: each would only repeat its error.
            Err(e) => {
                errors.extend(e);
                Config::default()
            }
        };
        defs = expand_instances(defs, &mut inactive);
        for o in self.overrides {
            let mut hit = false;
            for def in
                defs.iter_mut().filter(|d| d.type_id == o.type_id && o.name.as_deref().is_none_or(|n| d.name == n))
            {
                let value = o.value.clone();
                def.factory = Factory::Sync(SyncFactory::Closure(Arc::new(move |_: &Resolver<'_>| Ok(value.clone()))));
                def.deps = Cow::Borrowed(&[]);
                def.init = None;
                def.complete = None;
                def.destroy = None;
                hit = true;
            }
            if !hit {
                errors.push(DiError::OverrideUnknown { type_name: o.type_name });
            }
        }
        for o in self.provider_overrides {
            let provides = |d: &ProtoDef| d.provides.iter().any(|p| p.type_id == o.type_id);
            let hit = |d: &ProtoDef| provides(d) && o.name.as_deref().is_none_or(|n| d.name == n);
            let mut names: Vec<(Cow<'static, str>, Scope)> =
                defs.iter().filter(|d| hit(d)).map(|d| (d.name.clone(), d.scope)).collect();
            names.sort_by(|a, b| a.0.cmp(&b.0));
            names.dedup_by(|a, b| a.0 == b.0);
            if names.is_empty() {
                let mut providers: Vec<String> = defs.iter().filter(|d| provides(d)).map(ProtoDef::label).collect();
                providers.sort();
                errors.push(DiError::OverrideNoProvider { wanted: o.type_name, name: o.name, providers });
                continue;
            }
            // A replaced proto that provides other traits too stays, for those: only its
            // `U` goes to the fake. One that provides nothing else is gone, and so is one whose
            // own type is `U` (its own type stays its first entry, which lookups by type use).
            defs.retain_mut(|d| {
                if !hit(d) {
                    return true;
                }
                let (own, faked) = (d.type_id, o.type_id);
                let keeps_others = own != faked && d.provides.iter().any(|p| p.type_id != own && p.type_id != faked);
                d.provides.retain(|p| p.type_id != faked);
                keeps_others
            });
            defs.extend(names.into_iter().map(|(name, scope)| (o.fake)(name, scope)));
        }

        for &(ty, wanted, expected) in &self.expected {
            let found: Vec<String> =
                defs.iter().filter(|d| d.provides.iter().any(|p| p.type_id == ty)).map(ProtoDef::label).collect();
            if found.len() < expected {
                errors.push(DiError::ExpectedProviders { wanted, expected, found });
            }
        }
        let graph = Graph::new(defs, &inactive);
        DiError::collect(errors.into_iter().chain(graph.as_ref().err().cloned()).collect())?;
        let graph = graph?;
        let id = NEXT_APP_ID.fetch_add(1, Ordering::Relaxed);
        let mut roots = self.roots;
        if self.inventory {
            check_advices(&graph, &inactive, &mut roots)?;
        }
        let reached = reached_from(&graph, &roots)?;
        let cell = AppCell::default();
        let mut singletons: Vec<Option<AnyArc>> = vec![None; graph.protos.len()];
        let mut ready: Vec<usize> = Vec::new();
        for level in &graph.levels {
            let mut constructions: Vec<(usize, BuildFuture)> = Vec::new();
            for &p in level.iter().filter(|&&p| reached.as_ref().is_none_or(|r| r[p])) {
                let resolver = Resolver {
                    graph: &graph,
                    singletons: &singletons,
                    app_id: id,
                    proto: p,
                    scope: None,
                    config: &config,
                    cell: &cell,
                    fresh: crate::resolver::Fresh::default(),
                };
                let built = match &graph.protos[p].factory {
                    Factory::Sync(factory) => factory.call(&resolver).map(|obj| singletons[p] = Some(obj)),
                    Factory::Async(factory) => factory(&resolver).map(|fut| constructions.push((p, fut))),
                    Factory::Config(_) => unreachable!("config sections are read before the graph is built"),
                };
                if let Err(e) = built {
                    return Err(abort(&graph, &singletons, &ready, e).await);
                }
            }
            // The async constructors of one level run concurrently, like their init hooks.
            let (built, failed) = join_all(constructions).await;
            for (p, obj) in built {
                singletons[p] = Some(obj);
            }
            if let Some((p, e)) = failed.into_iter().next() {
                let e = DiError::construction_of(&graph.protos[p], e);
                return Err(abort(&graph, &singletons, &ready, e).await);
            }
            let hooks: Vec<(usize, HookFuture)> = level
                .iter()
                .filter_map(|&p| Some((p, graph.protos[p].init.as_ref()?(singletons[p].clone()?))))
                .collect();
            let (_, failed) = join_all(hooks).await;
            ready.extend(level.iter().filter(|p| !failed.iter().any(|(f, _)| f == *p)));
            if let Some((p, e)) = failed.into_iter().next() {
                let e = DiError::hook("init", &graph.protos[p], e);
                return Err(abort(&graph, &singletons, &ready, e).await);
            }
        }
        let lazy = (0..graph.protos.len())
            .filter(|&p| graph.protos[p].lazy && singletons[p].is_none())
            .map(|p| (p, LazySlot::default()))
            .collect();
        // Handlers and jobs of the singletons built, and of the lazy ones this App may build
        // (with roots, those the roots reach).
        let available = |p: usize| {
            singletons[p].is_some()
                || (graph.protos[p].lazy
                    && graph.protos[p].scope == Scope::Singleton
                    && (roots.is_empty() || reached.as_ref().is_none_or(|r| r[p])))
        };
        let handlers = crate::events::handlers(&graph, available);
        let jobs = match crate::schedule::jobs(&graph, available) {
            Ok(jobs) => jobs,
            Err(e) => return Err(abort(&graph, &singletons, &ready, e).await),
        };
        let inner = Arc::new(AppInner {
            id,
            handlers,
            jobs,
            stop_jobs: tokio::sync::watch::Sender::new(false),
            lazy,
            graph,
            singletons,
            background_timeout: self.background_timeout,
            config,
            cell: cell.clone(),
            shutdown_timeout: self.shutdown_timeout,
            shut_down: AtomicBool::new(false),
            destroying: AtomicBool::new(false),
            ending: Pending::default(),
            large_scope: std::sync::atomic::AtomicUsize::new(0),
        });
        let _ = cell.set(Arc::downgrade(&inner));
        if self.schedules {
            crate::schedule::start(&inner, &inner.stop_jobs);
        }
        Ok(App { inner })
    }
}

impl fmt::Debug for AppBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppBuilder")
            .field("added", &self.defs.len())
            .field("inventory", &self.inventory)
            .field("overrides", &(self.overrides.len() + self.provider_overrides.len()))
            .field("excluded", &self.excluded.len())
            .field("roots", &self.roots.len())
            .field("profile", &self.config.profile)
            .field("background_timeout", &self.background_timeout)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish()
    }
}

/// Every advice that an `#[intercept]` in the program names must be registered: a method
/// would otherwise panic on its first call. An App built from roots builds them too.
fn check_advices(
    graph: &Graph,
    inactive: &[(ProtoDef, String)],
    roots: &mut Vec<(TypeId, &'static str)>,
) -> Result<(), DiError> {
    let mut errors = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for site in crate::advice::sites() {
        let ty = (site.advice)();
        if !graph.of_type(ty).is_empty() {
            if !roots.is_empty() && seen.insert(ty) {
                roots.push((ty, site.advice_name));
            }
            continue;
        }
        let why =
            inactive.iter().find(|(d, _)| d.type_id == ty).map_or("it is not registered", |(_, why)| why.as_str());
        errors.push(DiError::AdviceMissing {
            advice: site.advice_name,
            module: site.module,
            method: site.method,
            at: format!("{}:{}", site.file, site.line),
            why: why.to_owned(),
        });
    }
    DiError::collect(errors)
}

/// Which singletons `build()` constructs: with roots, those the roots reach (by value, and
/// through the context and transient protos they reach by reference); else every singleton
/// but the lazy ones no eager proto reaches. `None`: all of them.
fn reached_from(graph: &Graph, roots: &[(TypeId, &'static str)]) -> Result<Option<Vec<bool>>, DiError> {
    let lazy = graph.protos.iter().any(|p| p.lazy);
    if roots.is_empty() && !lazy {
        return Ok(None);
    }
    let mut reached = vec![false; graph.protos.len()];
    let mut stack = Vec::new();
    for &(ty, wanted) in roots {
        let targets =
            graph.provided.get(&ty).filter(|t| !t.is_empty()).ok_or(DiError::NotFound { wanted, name: None })?;
        stack.extend(targets.iter().map(|t| t.proto));
    }
    if roots.is_empty() {
        stack.extend(
            (0..graph.protos.len())
                .filter(|&p| graph.protos[p].scope == crate::Scope::Singleton && !graph.protos[p].lazy),
        );
    }
    while let Some(p) = stack.pop() {
        if std::mem::replace(&mut reached[p], true) {
            continue;
        }
        for dep in &graph.resolved[p] {
            match dep {
                // Roots reach what they hold references to; without roots, what builds at start
                // is what eager singletons take by value (a lazy one a context proto takes is
                // built when a scope builds that).
                crate::graph::Resolved::Context(crate::graph::Target { proto: c, .. })
                | crate::graph::Resolved::Provider(c)
                    if !roots.is_empty() =>
                {
                    stack.push(*c)
                }
                other => stack.extend(other.construction_targets()),
            }
        }
    }
    Ok(Some(reached))
}

/// Destroys the singletons that finished init (in reverse), then returns the build error.
async fn abort(graph: &Graph, singletons: &[Option<AnyArc>], ready: &[usize], error: DiError) -> DiError {
    if let Err(e) = destroy_singletons(graph, singletons, ready).await {
        tracing::warn!(error = %e, "destroying singletons after a failed build");
    }
    error
}

async fn destroy_singletons(graph: &Graph, singletons: &[Option<AnyArc>], order: &[usize]) -> Result<(), DiError> {
    let mut errors = Vec::new();
    for &p in order.iter().rev() {
        let def = &graph.protos[p];
        if let (Some(destroy), Some(obj)) = (&def.destroy, &singletons[p]) {
            if let Err(e) = crate::scope::run_hook(def, "destroy", || destroy(obj.clone())).await {
                errors.push(e);
            }
        }
    }
    DiError::collect(errors)
}

/// A hook's or an async constructor's future.
type Fallible<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// Polls every future to completion; returns the outputs and the failures, each in
/// registration order.
async fn join_all<T>(mut futures: Vec<(usize, Fallible<T>)>) -> (Vec<(usize, T)>, Vec<(usize, BoxError)>) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    std::future::poll_fn(|cx| {
        futures.retain_mut(|(p, fut)| match fut.as_mut().poll(cx) {
            Poll::Ready(Ok(t)) => {
                done.push((*p, t));
                false
            }
            Poll::Ready(Err(e)) => {
                failed.push((*p, e));
                false
            }
            Poll::Pending => true,
        });
        if futures.is_empty() { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    done.sort_by_key(|(p, _)| *p);
    failed.sort_by_key(|(p, _)| *p);
    (done, failed)
}

/// Moves the protos of another profile, and the excluded ones, out of `defs`: returned with
/// why, for the errors of the dependencies that only they would provide.
fn select_active(
    defs: &mut Vec<ProtoDef>,
    profile: Option<&str>,
    excluded: &[(TypeId, &'static str)],
    errors: &mut Vec<DiError>,
) -> Vec<(ProtoDef, String)> {
    for &(ty, type_name) in excluded {
        if !defs.iter().any(|d| d.type_id == ty) {
            errors.push(DiError::ExcludeUnknown { type_name });
        }
    }
    let mut inactive = Vec::new();
    defs.retain(|def| {
        let why = if excluded.iter().any(|&(ty, _)| ty == def.type_id) {
            "excluded by `AppBuilder::exclude`".to_owned()
        } else {
            match def.profile.as_deref() {
                Some(p) if Some(p) != profile => {
                    format!("registered for profile \"{p}\" only: activate it with `AppBuilder::profile(\"{p}\")`")
                }
                _ => return true,
            }
        };
        inactive.push((def.clone(), why));
        false
    });
    inactive
}

/// Reads every config section (but those overridden): a section becomes a proto holding its
/// value; a multi-instance one, one proto per table under its prefix (appended; an overridden
/// instance is left for its override). Works in place: a def is a few hundred bytes, and an
/// App may have tens of thousands.
fn load_config(
    defs: &mut Vec<ProtoDef>,
    config: &Config,
    overridden: impl Fn(TypeId, &str) -> bool,
    errors: &mut Vec<DiError>,
) {
    let value_factory =
        |value: AnyArc| Factory::Sync(SyncFactory::Closure(Arc::new(move |_: &Resolver<'_>| Ok(value.clone()))));
    let mut instances = Vec::new();
    let mut templates = false;
    for def in defs.iter_mut() {
        let Factory::Config(section) = &def.factory else { continue };
        if !section.instances {
            if !overridden(def.type_id, &def.name) {
                match (section.load)(config, &section.prefix, def.type_name) {
                    Ok(value) => def.factory = value_factory(value),
                    Err(e) => errors.push(e),
                }
            }
            continue;
        }
        templates = true;
        let names = match config.instance_names(&section.prefix, def.type_name) {
            Ok(names) => names,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for name in names {
            let mut instance = def.clone();
            if !overridden(def.type_id, &name) {
                match (section.load)(config, &format!("{}.{name}", section.prefix), def.type_name) {
                    Ok(value) => instance.factory = value_factory(value),
                    Err(e) => errors.push(e),
                }
            }
            instance.name = Cow::Owned(name);
            instances.push(instance);
        }
    }
    if templates {
        defs.retain(|d| !matches!(&d.factory, Factory::Config(c) if c.instances));
    }
    defs.extend(instances);
}

/// Replaces each `instances_of` template with one proto per proto of the type it follows,
/// named like it, whose unqualified dependencies on that type name it. A template may follow
/// another template's type: those are expanded first (a cycle of templates expands to nothing).
fn expand_instances(defs: Vec<ProtoDef>, inactive: &mut Vec<(ProtoDef, String)>) -> Vec<ProtoDef> {
    if defs.iter().all(|d| d.instances_of.is_none()) {
        return defs;
    }
    let (mut templates, mut out): (Vec<ProtoDef>, Vec<ProtoDef>) =
        defs.into_iter().partition(|d| d.instances_of.is_some());
    loop {
        // The templates whose followed type no other pending template produces.
        let ready: Vec<ProtoDef>;
        (ready, templates) = {
            let pending: Vec<TypeId> = templates.iter().map(|t| t.type_id).collect();
            templates.into_iter().partition(|t| t.instances_of.is_some_and(|(of, _)| !pending.contains(&of)))
        };
        if ready.is_empty() {
            for template in templates {
                let why = "its `instances_of` chain comes back to its own type".to_owned();
                inactive.push((template, why));
            }
            break;
        }
        for template in ready {
            let Some((of, of_name)) = template.instances_of else { continue };
            let mut names: Vec<String> = out.iter().filter(|d| d.type_id == of).map(|d| d.name.to_string()).collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                let why = format!(
                    "one instance per `{of_name}`, and there is none (for a config section: no table under its prefix)"
                );
                inactive.push((template.clone(), why));
            }
            for name in names {
                let mut instance = template.clone();
                instance.instances_of = None;
                for dep in instance.deps.to_mut().iter_mut() {
                    let follows = matches!(dep.kind, InjectKind::Arc | InjectKind::Optional);
                    if follows && (dep.type_id)() == of && dep.qualifier.is_none() {
                        dep.qualifier = Some(Cow::Owned(name.clone()));
                    }
                }
                instance.name = Cow::Owned(name);
                out.push(instance);
            }
        }
    }
    out
}
