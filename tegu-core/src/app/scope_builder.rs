//! A context scope being prepared: [`ScopeBuilder`], and [`ContextSlot`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::App;
use crate::error::DiError;
use crate::scope::end::{ContextFuture, TryContextFuture};
use crate::scope::handle::Seeds;
use crate::scope::{self};

/// A context scope being prepared: the objects it starts with. From [`App::scope`].
///
/// # Examples
///
/// ```
/// use tegu_core::{App, ProtoDef};
///
/// struct User(&'static str);
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().register(ProtoDef::context::<User>(|_| Ok(User("anonymous")))).build().await?;
/// // Without seeds, the scope builds its own object; with one, it uses what it was given.
/// let built = app.run_in_context(async { app.get_object::<User>().map(|u| u.0) }).await?;
/// let given = app.scope().with(User("ada"))?.run(async { app.get_object::<User>().map(|u| u.0) }).await?;
/// assert_eq!((built, given), ("anonymous", "ada"));
/// # Ok(()) }
/// ```
#[must_use = "a ScopeBuilder opens no scope until `run`"]
pub struct ScopeBuilder<'a> {
    pub(super) app: &'a App,
    pub(super) seeds: Seeds,
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
    /// use tegu_core::{App, DiError, ProtoDef};
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

    /// Makes the scope serve tenant `key`: what its [`TenantRef`](crate::tenant::TenantRef)s read.
    ///
    /// # Errors
    ///
    /// [`DiError::TenantKey`] if `key` breaks the rules of a key ([`Tenant::new`]: it comes
    /// from a client), [`DiError::NotFound`] if the App has no tenant objects (no proto holds
    /// a `TenantRef`).
    ///
    /// See [`TenantRef`](crate::tenant::TenantRef) for an example.
    ///
    /// [`Tenant::new`]: crate::tenant::Tenant::new
    pub fn tenant(self, key: impl Into<Arc<str>>) -> Result<Self, DiError> {
        self.with(crate::tenant::Tenant::new(key)?)
    }

    /// Seeds the scope with `lineage`'s values of this App's lineage types (the others are left
    /// out): the values the scope's work carries, as if a request with them had caused it. What
    /// a transport does with the lineage it read from a message's headers.
    ///
    /// See [`Travels`](crate::lineage::Travels) for an example.
    pub fn lineage(mut self, lineage: &crate::lineage::Lineage) -> Self {
        for (key, value) in crate::scope::lineage::seeds(&self.app.inner, lineage).iter() {
            self.seeds.set(*key, value.clone(), false);
        }
        self
    }

    /// As [`with_arc`](Self::with_arc), through a slot looked up once ([`App::context_slot`]):
    /// no lookup by type. What tegu-http seeds a request's head with.
    ///
    /// # Panics
    ///
    /// If the slot is another App's, as [`App::run_in_context_with`] does.
    pub fn seed<T: Send + Sync + 'static>(mut self, slot: ContextSlot<T>, value: Arc<T>) -> Self {
        assert_eq!(slot.app_id, self.app.inner.id, "a ContextSlot of another App");
        self.seeds.set(slot.key, value, false);
        self
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Audit { lines: Mutex<Vec<String>> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct UnitOfWork { committed: AtomicBool }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Connection { closed: AtomicBool }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
        scope::end::run(self.app.inner.clone(), self.seeds, fut)
    }

    /// Runs `fut` in the scope, returning a failed completion, as
    /// [`App::try_run_in_context`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Tenant(&'static str);
    /// struct Batch;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
/// use tegu_core::{App, scope::ContextSlot, ProtoDef};
///
/// struct Tenant(&'static str);
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().register(ProtoDef::context::<Tenant>(|_| Ok(Tenant("none")))).build().await?;
/// let slot: ContextSlot<Tenant> = app.context_slot()?;
/// let (a, b) = (slot, slot);
/// let first = app.run_in_context_with(a, Arc::new(Tenant("acme")), async { app.get_object::<Tenant>().map(|t| t.0) });
/// let second = app.run_in_context_with(b, Arc::new(Tenant("initech")), async { app.get_object::<Tenant>().map(|t| t.0) });
/// assert_eq!((first.await?, second.await?), ("acme", "initech"));
/// # Ok(()) }
/// ```
pub struct ContextSlot<T> {
    pub(super) app_id: u64,
    pub(super) key: u32,

    pub(super) _type: std::marker::PhantomData<fn() -> T>,
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
