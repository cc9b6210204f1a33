//! The composition root: the built container, [`App`] and [`AppHold`] (here), its builder and
//! its scope builder (each child's `//!` line says what it holds).

mod advices;
mod assemble;
mod builder;
mod construct;
mod defs;
mod emitters;
mod install;
mod left_out;
mod lifecycle;
mod operate;
mod prepare;
mod scope_builder;

pub use builder::AppBuilder;
pub use operate::{AppState, HealthReport, ServiceReport};
pub use scope_builder::{ContextSlot, ScopeBuilder};

use std::any::TypeId;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, Sources};
use crate::erased::{AnyArc, downcast};
use crate::error::DiError;
use crate::pending::PendingGuard;
use crate::runtime::AppInner;
use crate::runtime::phase::Phase;
use crate::scope::end::{ContextFuture, TryContextFuture};
use crate::scope::handle::Seeds;
use crate::scope::{self};
use lifecycle::destroy_singletons;

/// The built container: a validated object graph and its singletons.
///
/// Cheap to clone (one `Arc`), `Send + Sync`. Build it once at start-up with
/// [`App::builder`]; open a context scope per request with [`run_in_context`](Self::run_in_context)
/// (tegu-http does it for you); call [`shutdown`](Self::shutdown) on the way out.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, ProtoDef};
///
/// struct Clock;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    /// A lookup's `NotFound`, with the registered protos close to what was asked for: worked
    /// out here, for the caller, not where the container's own lookups (a crosscut looking for
    /// its advice on every call) take the error as an answer.
    #[cold]
    fn near(&self, error: DiError) -> DiError {
        match error {
            DiError::NotFound { wanted, name, near } if near.is_empty() => {
                let near = self.inner.graph.near(wanted, name.as_deref());
                DiError::NotFound { wanted, name, near }
            }
            other => other,
        }
    }

    /// A builder that starts from every proto registered through `inventory` (the attribute
    /// macros) in the program.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
            drain_scopes_timeout: Duration::from_secs(10),
            start_timeout: Duration::from_secs(30),
            stop_timeout: Duration::from_secs(15),
            slow_start: Duration::from_secs(1),
            health_cache: Duration::from_secs(1),
            hosted: true,
            #[cfg(feature = "schedule")]
            schedules: true,
            #[cfg(feature = "watch")]
            watch: None,
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
    /// use tegu_core::{App, DiError, ProtoDef};
    ///
    /// struct Clock { now: u64 }
    /// struct Missing;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock { now: 42 }))).build().await?;
    /// assert_eq!(app.get_object::<Clock>()?.now, 42);
    /// assert!(matches!(app.get_object::<Missing>(), Err(DiError::NotFound { .. })));
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn get_object<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, DiError> {
        match self.inner.singleton_of(TypeId::of::<T>()) {
            Some(obj) => Ok(downcast(obj)),
            None => self
                .inner
                .object(TypeId::of::<T>(), None, core::any::type_name::<T>())
                .map(downcast::<T>)
                .map_err(|e| self.near(e)),
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Pool { url: &'static str }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
        self.inner
            .object(TypeId::of::<T>(), Some(name), core::any::type_name::<T>())
            .map(downcast::<T>)
            .map_err(|e| self.near(e))
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// trait Mailer: Send + Sync { fn send(&self, to: &str) -> String; }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn send(&self, to: &str) -> String { format!("smtp to {to}") } }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Smtp>(|_| Ok(Smtp)).provides::<Smtp, dyn Mailer>(|s| s))
    ///     .build()
    ///     .await?;
    /// let mailer: Arc<dyn Mailer> = app.get_provider::<dyn Mailer>()?;
    /// assert_eq!(mailer.send("ada"), "smtp to ada");
    /// # Ok(()) }
    /// ```
    pub fn get_provider<U: ?Sized + 'static>(&self) -> Result<Arc<U>, DiError> {
        self.inner.provider(TypeId::of::<U>(), None, core::any::type_name::<U>()).map_err(|e| self.near(e))
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// trait Store: Send + Sync { fn kind(&self) -> &str; }
    /// struct Pg;
    /// impl Store for Pg { fn kind(&self) -> &str { "postgres" } }
    /// struct Mem;
    /// impl Store for Mem { fn kind(&self) -> &str { "memory" } }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
        self.inner.provider(TypeId::of::<U>(), Some(name), core::any::type_name::<U>()).map_err(|e| self.near(e))
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Session { user: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Session>(|_| Ok(Session { user: String::new() }))
    ///         .on_init(|s: Arc<Session>| async move { Ok(()) }))
    ///     .build()
    ///     .await?;
    /// app.run_in_context(async {
    ///     assert!(app.get_object::<Session>().is_err()); // needs async construction
    ///     let session = app.get_object_async::<Session>().await?;
    ///     assert!(session.user.is_empty());
    ///     Ok::<_, tegu_core::DiError>(())
    /// }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_object_async<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, DiError> {
        if let Some(obj) = self.inner.singleton_of(TypeId::of::<T>()) {
            return Ok(downcast(obj));
        }
        let wanted = core::any::type_name::<T>();
        let proto = self.inner.proto_of(TypeId::of::<T>(), None, wanted).map_err(|e| self.near(e))?;
        match self.inner.graph.protos[proto].scope {
            crate::proto::kinds::Lifetime::Singleton | crate::proto::kinds::Lifetime::Transient => {
                self.inner.instance(proto, wanted).map(downcast::<T>)
            }
            crate::proto::kinds::Lifetime::Context => {
                let at = scope::handle::RefKey { app_id: self.inner.id, key: proto as u32, cast: 0 };
                scope::handle::current_async::<T>(at, wanted).await
            }
        }
    }

    /// Runs `fut` in a new context scope, then ends the scope.
    ///
    /// Context objects are created on first use inside `fut` (and the tasks it starts with
    /// [`spawn`](crate::spawn)), once per scope. The end of a scope is one sequence, the same
    /// for tegu-http's requests:
    ///
    /// 1. `fut` produces its output (for HTTP: the response, whose status tegu-http records on
    ///    `RequestHead`).
    /// 2. **Completion hooks** (`#[context_proto(complete = method)]`,
    ///    [`ProtoDef::on_complete`](crate::ProtoDef::on_complete)) run inside the scope, newest object first, until one fails
    ///    or panics. This is where a unit of work commits. The failure is the scope's:
    ///    [`try_run_in_context`](Self::try_run_in_context) returns it, `run_in_context` logs it
    ///    (`tracing::error!`), tegu-http answers 500 instead and records that status.
    /// 3. The output leaves: awaiting this future returns it after step 5, or right here with
    ///    [`ContextFuture::end_in_background`] (tegu-http: the response is sent; nothing after this
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
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let answer = app.run_in_context(async { 6 * 7 }).await;
    /// assert_eq!(answer, 42);
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn run_in_context<F: Future>(&self, fut: F) -> ContextFuture<F> {
        scope::end::run(self.inner.clone(), Seeds::default(), fut)
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
    /// use tegu_core::{App, DiError, ProtoDef};
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
    /// use tegu_core::{App, DiError, ProtoDef};
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
            Some(&[key]) if graph.protos[key].scope == crate::proto::kinds::Lifetime::Context => {
                Ok(ContextSlot { app_id: self.inner.id, key: key as u32, _type: std::marker::PhantomData })
            }
            _ => Err(DiError::NotFound { wanted, name: None, near: graph.near(wanted, None) }),
        }
    }

    /// As [`run_in_context`](Self::run_in_context), with `value` as the scope's object of the
    /// context proto of `slot`: every `ContextRef`, every context proto injecting it and every
    /// task the scope spawns gets `value`, and its factory never runs. The scope does not
    /// destroy it (no destroy hook runs). This is how tegu-http gives each request its
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
    /// use tegu_core::{App, ProtoDef, DiError};
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
        scope::end::run(self.inner.clone(), Seeds::one(slot.key, value as AnyArc), fut)
    }

    /// A context scope to open with objects given beforehand: the current user, a tenant, a
    /// fake clock (tegg's `mockModuleContextScope`). Each [`ScopeBuilder::with`] object is the
    /// scope's object of its context proto: every `ContextRef`, `get_object` and context proto
    /// injecting it gets it, its factory never runs, and the scope runs no hook for it.
    ///
    /// Called inside a scope of this App (a request), the scope starts with that scope's lineage
    /// ([`Lineage::current`](crate::lineage::Lineage::current): its trace, its request id, its
    /// tenant), which what the builder sets replaces, value by value: a request opening
    /// `app.scope().tenant("globex")?` works as `globex` in the request's trace. Outside one,
    /// and with [`run_in_context`](Self::run_in_context), a scope starts with nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef, DiError};
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
        let builder = ScopeBuilder { app: self, seeds: Seeds::default() };
        // Empty, after a look at the task-local, outside a scope of this App.
        let enclosing = scope::lineage::of_app(&self.inner);
        if enclosing.is_empty() { builder } else { builder.lineage(&enclosing) }
    }

    /// The lineage that `headers` (a message's, an outgoing request's) carry, for this App's
    /// lineage types: what a transport seeds an event handler's scope with
    /// ([`EventBus::deliver_with`](crate::events::EventBus::deliver_with)). Header names are
    /// matched without case. A header of no lineage type of this App is left out; so is a value
    /// its type refuses (a forged tenant key, a malformed `traceparent`), logged with its
    /// header's name and never its value.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, lineage::{Tenant, TraceContext}};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().without_inventory().lineage::<Tenant>().lineage::<TraceContext>().build().await?;
    /// let lineage = app.lineage_from_headers([
    ///     ("Tegu-Tenant", "acme"),
    ///     ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ///     ("x-unknown", "ignored"),
    /// ]);
    /// assert_eq!(lineage.get::<Tenant>().map(Tenant::key), Some("acme"));
    /// assert_eq!(lineage.get::<TraceContext>().map(|t| t.trace_id_hex()).as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
    /// // A forged value is refused, not carried.
    /// assert!(app.lineage_from_headers([("tegu-tenant", "acme user=admin")]).is_empty());
    /// # Ok(()) }
    /// ```
    pub fn lineage_from_headers<'h>(
        &self,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
    ) -> crate::lineage::Lineage {
        crate::scope::lineage::from_headers(&self.inner, headers)
    }

    /// Shuts the App down, once (later calls do nothing): turns readiness false
    /// ([`begin_shutdown`](Self::begin_shutdown)), stops the `#[schedule]` timers, tells the
    /// [`HostedService`](crate::hosted::HostedService)s to stop and waits for them (newest first, within
    /// [`AppBuilder::stop_timeout`]), waits for the context scopes that are still ending (their
    /// background tasks and destroy hooks, cancelled requests' included), for running event
    /// handlers and jobs and for [`hold`](Self::hold)s, at most
    /// [`AppBuilder::drain_scopes_timeout`], then runs the singletons' destroy hooks in reverse
    /// dependency order (dependents first), all within [`AppBuilder::stop_timeout`]. Until then a
    /// lazy singleton is still built on first use (an event's handler may need it), and
    /// destroyed with the others; from then on it is refused ([`DiError::ShutDown`]). Scopes still running are not
    /// waited for: stop them first (tegu-http's [`Server`] drains its connections before
    /// calling this). The singletons themselves are dropped with the last `App` clone.
    ///
    /// [`Server`]: https://docs.rs/tegu-http/latest/tegu_http/struct.Server.html
    ///
    /// # Errors
    ///
    /// Every destroy hook runs even if some fail or panic; the failures come back as one
    /// [`DiError::Hook`] or a [`DiError::Multiple`] of them, with a [`DiError::StopTimeout`]
    /// naming the hosted services and destroy hooks cut at the stop deadline (and the destroy
    /// hooks not run after it). Scopes abandoned at the shutdown deadline are logged, not
    /// returned.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Pool;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
        self.shutdown_boxed().await
    }

    /// `shutdown()`'s work, boxed here so that tegu-core compiles its state machine once, not
    /// every crate that awaits it (as `AppBuilder::build`'s).
    fn shutdown_boxed(&self) -> Pin<Box<dyn Future<Output = Result<(), DiError>> + Send + '_>> {
        Box::pin(self.shut_down())
    }

    async fn shut_down(&self) -> Result<(), DiError> {
        self.begin_shutdown();
        if !self.inner.lifecycle.advance(Phase::ShuttingDown) {
            return Ok(());
        }
        #[cfg(feature = "schedule")]
        crate::schedule::stop(&self.inner);
        crate::reload::stop(&self.inner);
        let timeout = self.inner.stop_timeout;
        let mut cut = crate::hosted::stop(&self.inner, timeout).await;
        self.inner.lifecycle.advance(Phase::OutsideClosed);
        self.inner.wait_for_endings().await;
        self.inner.lifecycle.advance(Phase::Destroying);
        let order: Vec<usize> = self.inner.graph.levels.iter().flatten().copied().collect();
        let built: Vec<Option<AnyArc>> =
            (0..self.inner.singletons.len()).map(|p| self.inner.singleton_to_destroy(p)).collect();
        let (mut errors, destroy_cut) = destroy_singletons(&self.inner.graph, &built, &order, timeout).await;
        cut.extend(destroy_cut);
        if !cut.is_empty() {
            errors.push(DiError::StopTimeout { timeout, cut });
        }
        DiError::collect(errors)
    }

    /// How many context scopes are ending now (waiting for background tasks or running destroy
    /// hooks after their output left, tegu-http: after the response was sent, or cancelled and
    /// cleaning up; a scope held open by a streamed response), plus the event handlers and
    /// scheduled runs still going and the [`hold`](Self::hold)s: what
    /// [`shutdown`](Self::shutdown) waits for.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// let (finish, finished) = tokio::sync::oneshot::channel::<()>();
    /// app.run_in_context(async {
    ///     tegu_core::spawn(async { finished.await.ok(); }); // runs until `finish` is sent
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
    /// and must let finish: an upgraded connection (tegu-http's `ConnectionScope` takes one), a
    /// consumer loop.
    ///
    /// `None` once `shutdown` has stopped waiting (it is destroying the singletons, or has).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Pool { closed: AtomicBool }
    ///
    /// # #[tokio::main] async fn main() -> Result<(), tegu_core::DiError> {
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
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// assert!(tegu_core::App::current().is_none());
    /// let inside = app.run_in_context(async { tegu_core::App::current() }).await;
    /// assert_eq!(format!("{:?}", inside.unwrap()), format!("{app:?}"));
    /// # Ok(()) }
    /// ```
    pub fn current() -> Option<App> {
        scope::handle::current_app().map(|inner| App { inner })
    }

    /// The object graph in Graphviz DOT: singletons as boxes, context protos as ellipses,
    /// `ContextRef` edges dashed. Render with `dot -Tsvg`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().config_known("http").config_value("http.port", 8080).build().await?;
    /// assert_eq!(app.config().get::<u16>("http.port")?, 8080);
    /// # Ok(()) }
    /// ```
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Reads the configuration's sources again (files, environment, values) into its
    /// reloadable sections (`#[config_proto(.., reloadable)]`, [`ProtoDef::live_config`](crate::ProtoDef::live_config)):
    /// scopes that begin afterwards see the new version through their
    /// [`ConfigRef`](crate::config::ConfigRef)s, those already running keep the one they pinned. The
    /// sections that did not change keep their objects; the change hooks of those that did run
    /// ([`ConfigRef::on_change`](crate::config::ConfigRef::on_change)). Sections that are not reloadable,
    /// and [`config`](Self::config), stay as `build()` read them.
    ///
    /// Reads files: call it from a blocking context, or accept a short block. An App without
    /// reloadable sections reloads nothing (version 0).
    ///
    /// # Errors
    ///
    /// A source that does not parse ([`DiError::ConfigSource`]) or a section that no longer
    /// reads as its type ([`DiError::ConfigInvalid`], [`DiError::ConfigMissing`]): nothing
    /// changes, the error names the key and its source (never the value), it is logged, and
    /// [`health`](Self::health) reports it until a reload succeeds.
    /// [`DiError::ReloadAfterShutdown`] once [`shutdown`](Self::shutdown) has begun: the
    /// change hooks would run on singletons being destroyed.
    ///
    /// # Examples
    ///
    /// See [`ConfigRef`](crate::config::ConfigRef).
    pub fn reload_config(&self) -> Result<crate::reload::ConfigReload, DiError> {
        crate::reload::reload(&self.inner)
    }

    /// The App's event bus: what an `#[inject] events: Arc<EventBus>` holds.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// app.events().emit("no handler takes a &str: nothing happens");
    /// assert_eq!(app.events().handler_count::<&str>(), 0);
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> crate::events::EventBus {
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
    /// use tegu_core::{handlers, singleton_proto, App};
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
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().without_schedules().build().await?;
    /// app.run_schedule::<Purger>("purge").await?;
    /// assert_eq!(app.get_object::<Purger>()?.runs.load(Ordering::Relaxed), 1);
    /// assert!(app.run_schedule::<Purger>("vacuum").await.is_err());
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    pub async fn run_schedule<T: 'static>(&self, method: &str) -> Result<(), DiError> {
        crate::schedule::run_by_hand(&self.inner, TypeId::of::<T>(), core::any::type_name::<T>(), method).await
    }

    /// How many protos the App holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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

/// Work that [`App::shutdown`] waits for before destroying singletons, counted until dropped:
/// see [`App::hold`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = tegu_core::App::builder().build().await?;
/// let hold: tegu_core::scope::AppHold = app.hold().expect("not shut down");
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
