//! `ContextRef<T>`: a singleton's handle on the current request's `T`.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::erased::{AnyArc, downcast};
use crate::error::DiError;
use crate::scope::handle::{self, RefKey};

/// A proxy to the current context scope's object of context proto `T`.
///
/// Singletons hold `ContextRef<T>` where they would otherwise need a per-request `T`: the
/// reference itself is a few bytes, built once with the singleton; [`get`](Self::get) finds the
/// current scope through the task-local the scope's future sets and returns that scope's `T`, creating it on first
/// use. A warm `get` takes no lock and hashes nothing: it scans the calling task's small cache
/// of the scope's objects and clones an `Arc`.
///
/// The scope exists while the future passed to [`App::run_in_context`](crate::App::run_in_context)
/// (or a tegu-http request) is polled. `tokio::spawn` does not carry it; [`spawn`](crate::spawn) does.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
///
/// static NEXT: AtomicU64 = AtomicU64::new(1);
/// struct Tracer { request: u64 }
/// struct Greeter { tracer: ContextRef<Tracer> }
/// impl Greeter {
///     fn hello(&self) -> String { format!("hello from request {}", self.tracer.get().request) }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::context::<Tracer>(|_| Ok(Tracer { request: NEXT.fetch_add(1, Ordering::Relaxed) })))
///     .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { tracer: r.context_ref(0)? }))
///         .dep(Dependency::new::<Tracer>(InjectKind::ContextRef, None)))
///     .build()
///     .await?;
/// let greeter = app.get_object::<Greeter>()?;
/// assert_eq!(app.run_in_context(async { greeter.hello() }).await, "hello from request 1");
/// assert_eq!(app.run_in_context(async { greeter.hello() }).await, "hello from request 2");
/// assert!(greeter.tracer.try_get().is_err()); // no scope here
/// # Ok(()) }
/// ```
pub struct ContextRef<T: ?Sized> {
    /// The App, the context proto, and which of its casts yields `T` (0, its own type, unless
    /// `T` is a `dyn Trait` or the proto is a fake from `override_provider`).
    at: RefKey,
    _type: PhantomData<fn() -> Box<T>>,
}

/// What a [`ContextRef`] can name: the type of a context proto (every sized type is one), or a
/// `dyn Trait` declared with `impl tegu_core::scope::RefTarget for dyn Trait {}`, which the current
/// scope's object of whichever context proto `provides(dyn Trait)` is reached as.
///
/// The declaration is one line beside the trait; the methods are the container's and hidden.
/// A reference to a concrete type costs nothing more for it: its `get` is an inlined downcast;
/// one to a trait casts through the proto's `provides` entry (an indirect call, no allocation),
/// and its [`with`](ContextRef::with) goes through `get`.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::Arc;
/// use tegu_core::{context_proto, singleton_proto, App, ContextRef, scope::RefTarget};
///
/// pub trait Locale: Send + Sync {
///     fn greet(&self) -> &'static str;
/// }
/// impl RefTarget for dyn Locale {}
///
/// #[context_proto(provides(dyn Locale))]
/// #[derive(Default)]
/// pub struct French;
/// impl Locale for French {
///     fn greet(&self) -> &'static str { "bonjour" }
/// }
///
/// #[singleton_proto]
/// pub struct Greeter {
///     #[inject]
///     locale: ContextRef<dyn Locale>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let greeter = app.get_object::<Greeter>()?;
/// assert_eq!(app.run_in_context(async { greeter.locale.get().greet() }).await, "bonjour");
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "`ContextRef<{Self}>` names a trait the container was not told about",
    label = "add `impl tegu_core::scope::RefTarget for {Self} {{}}` beside the trait",
    note = "a `ContextRef` names a context proto's type, or a `dyn Trait` it `provides` once the trait is declared a `RefTarget`"
)]
pub trait RefTarget: Send + Sync + 'static {
    /// Whether `Self` can be a proto's own type, which [`__own`](Self::__own) and
    /// [`__borrow`](Self::__borrow) downcast to: true for every sized type.
    #[doc(hidden)]
    const __SIZED: bool = false;

    /// The scope's object, of type `Self`, as an `Arc<Self>`.
    #[doc(hidden)]
    fn __own(obj: AnyArc) -> Arc<Self> {
        let _ = obj;
        unreachable!("a `dyn` target is reached through its proto's cast")
    }

    /// The scope's object, of type `Self`, as a `&Self`.
    #[doc(hidden)]
    fn __borrow(obj: &(dyn Any + Send + Sync)) -> &Self {
        let _ = obj;
        unreachable!("a `dyn` target is reached through its proto's cast")
    }
}

impl<T: Send + Sync + 'static> RefTarget for T {
    const __SIZED: bool = true;

    #[inline]
    fn __own(obj: AnyArc) -> Arc<T> {
        downcast(obj)
    }

    #[inline]
    fn __borrow(obj: &(dyn Any + Send + Sync)) -> &T {
        match obj.downcast_ref::<T>() {
            Some(t) => t,
            None => wrong_type(core::any::type_name::<T>()),
        }
    }
}

// The handle stays two words whatever `T` is (docs/decisions.md: "Keys are dense proto indices").
const _: () = assert!(size_of::<ContextRef<u8>>() == 16 && size_of::<ContextRef<dyn Any + Send + Sync>>() == 16);

impl<T: ?Sized + RefTarget> ContextRef<T> {
    pub(crate) fn new(app_id: u64, key: u32, cast: u32) -> Self {
        ContextRef { at: RefKey { app_id, key, cast }, _type: PhantomData }
    }

    /// Whether the object is a `T` itself (cast 0 of a proto of type `T`): then the warm path is
    /// an inlined downcast. Otherwise (a `dyn Trait`, or a type the proto provides, as a fake
    /// from `override_provider` does) the object is cast through the proto's `provides` entry.
    #[inline]
    fn own_type(&self) -> bool {
        T::__SIZED && self.at.cast == 0
    }

    /// `get` of a reference whose object is not its own type: the normal path of a
    /// `ContextRef<dyn Trait>` (so not `#[cold]`), kept out of line so that the own-type `get`
    /// stays small where it is inlined.
    #[inline(never)]
    #[track_caller]
    fn get_cast(&self) -> Arc<T> {
        match handle::current_as::<T>(self.at, core::any::type_name::<T>()) {
            Ok(t) => t,
            Err(e) => fail(e),
        }
    }

    /// The current scope's `T`, created now if this is the scope's first use of it.
    ///
    /// # Panics
    ///
    /// When [`try_get`](Self::try_get) fails: outside any context scope (the message names `T`
    /// and says how to enter one), in a scope of another App, in a scope that has ended, or when
    /// `T` needs [`get_async`](Self::get_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct User { name: String }
    /// struct Greeter { user: ContextRef<User> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<User>(|_| Ok(User { name: "ada".into() })))
    ///     .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { user: r.context_ref(0)? }))
    ///         .dep(Dependency::new::<User>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let greeter = app.get_object::<Greeter>()?;
    /// let name = app.run_in_context(async { greeter.user.get().name.clone() }).await;
    /// assert_eq!(name, "ada");
    /// # Ok(()) }
    /// ```
    #[track_caller]
    #[inline]
    pub fn get(&self) -> Arc<T> {
        if !self.own_type() {
            return self.get_cast();
        }
        match handle::cached(self.at.app_id, self.at.key) {
            Some(obj) => T::__own(obj),
            None => T::__own(resolve_or_panic(self.at.app_id, self.at.key, core::any::type_name::<T>())),
        }
    }

    /// The current scope's `T`, or why there is none.
    ///
    /// # Errors
    ///
    /// [`DiError::NoScope`] outside any context scope, [`DiError::ForeignScope`] inside a scope of
    /// another App, [`DiError::ScopeClosed`] after the scope ended, [`DiError::AsyncInit`] when `T`
    /// has an async init hook, and any error of `T`'s construction.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct User { name: String }
    /// struct Greeter { user: ContextRef<User> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<User>(|_| Ok(User { name: "ada".into() })))
    ///     .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { user: r.context_ref(0)? }))
    ///         .dep(Dependency::new::<User>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let greeter = app.get_object::<Greeter>()?;
    /// // Outside a scope there is no request, so no user.
    /// assert!(matches!(greeter.user.try_get(), Err(tegu_core::DiError::NoScope { .. })));
    /// let inside = app.run_in_context(async { greeter.user.try_get().map(|u| u.name.clone()) }).await;
    /// assert_eq!(inside?, "ada");
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn try_get(&self) -> Result<Arc<T>, DiError> {
        if !self.own_type() {
            return handle::current_as::<T>(self.at, core::any::type_name::<T>());
        }
        handle::current(self.at.app_id, self.at.key, core::any::type_name::<T>()).map(T::__own)
    }

    /// The current scope's `T` if the scope has built it already (or was given it), without
    /// building it: `None` outside a scope, in a scope of another App, and before the scope's
    /// first use of `T`. For code that acts on a per-request object only where the request
    /// made one (a transaction, a buffer to flush), and must not make one just to look.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct Buffer;
    /// struct Writer { buffer: ContextRef<Buffer> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Buffer>(|_| Ok(Buffer)))
    ///     .register(ProtoDef::singleton::<Writer>(|r| Ok(Writer { buffer: r.context_ref(0)? }))
    ///         .dep(Dependency::new::<Buffer>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let writer = app.get_object::<Writer>()?;
    /// let (before, after) = app
    ///     .run_in_context(async {
    ///         let before = writer.buffer.built().is_some(); // nothing built yet
    ///         writer.buffer.get();
    ///         (before, writer.buffer.built().is_some())
    ///     })
    ///     .await;
    /// assert_eq!((before, after), (false, true));
    /// # Ok(()) }
    /// ```
    pub fn built(&self) -> Option<Arc<T>> {
        handle::built_as::<T>(self.at)
    }

    /// Like [`try_get`](Self::try_get), but also creates `T` when it (or a context object it
    /// takes by value) has an async init hook, awaiting the hooks on first use.
    ///
    /// # Errors
    ///
    /// As [`try_get`](Self::try_get), plus [`DiError::Hook`] when an init hook fails.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct User { name: String }
    /// struct Greeter { user: ContextRef<User> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<User>(|_| Ok(User { name: "ada".into() })))
    ///     .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { user: r.context_ref(0)? }))
    ///         .dep(Dependency::new::<User>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let greeter = app.get_object::<Greeter>()?;
    /// // Works for every context proto; needed for those built asynchronously.
    /// let name = app.run_in_context(async { greeter.user.get_async().await.map(|u| u.name.clone()) }).await?;
    /// assert_eq!(name, "ada");
    /// # Ok(()) }
    /// ```
    pub async fn get_async(&self) -> Result<Arc<T>, DiError> {
        handle::current_async::<T>(self.at, core::any::type_name::<T>()).await
    }

    /// Calls `f` with a borrow of the current scope's `T`, without touching its reference count:
    /// the cheapest access when the object is only read for a moment. (For a `dyn Trait`, it
    /// borrows what [`get`](Self::get) returns.)
    ///
    /// # Panics
    ///
    /// As [`get`](Self::get).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct User { name: String }
    /// struct Greeter { user: ContextRef<User> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<User>(|_| Ok(User { name: "ada".into() })))
    ///     .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { user: r.context_ref(0)? }))
    ///         .dep(Dependency::new::<User>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let greeter = app.get_object::<Greeter>()?;
    /// let len = app.run_in_context(async { greeter.user.with(|user| user.name.len()) }).await;
    /// assert_eq!(len, 3);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        if !self.own_type() {
            return f(&self.get());
        }
        let call = |obj: &(dyn Any + Send + Sync)| f(T::__borrow(obj));
        match handle::with_cached(self.at.app_id, self.at.key, call) {
            Ok(r) => r,
            Err(call) => call(&*resolve_or_panic(self.at.app_id, self.at.key, core::any::type_name::<T>())),
        }
    }

    /// Calls `f` with a borrow of the current scope's `T`, or says why there is none.
    ///
    /// # Errors
    ///
    /// As [`try_get`](Self::try_get).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct User { name: String }
    /// struct Greeter { user: ContextRef<User> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<User>(|_| Ok(User { name: "ada".into() })))
    ///     .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { user: r.context_ref(0)? }))
    ///         .dep(Dependency::new::<User>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let greeter = app.get_object::<Greeter>()?;
    /// assert!(greeter.user.try_with(|user| user.name.len()).is_err()); // no scope
    /// let len = app.run_in_context(async { greeter.user.try_with(|user| user.name.len()) }).await?;
    /// assert_eq!(len, 3);
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn try_with<R>(&self, f: impl FnOnce(&T) -> R) -> Result<R, DiError> {
        if !self.own_type() {
            return self.try_get().map(|t| f(&t));
        }
        let call = |obj: &(dyn Any + Send + Sync)| f(T::__borrow(obj));
        match handle::with_cached(self.at.app_id, self.at.key, call) {
            Ok(r) => Ok(r),
            Err(call) => Ok(call(&*handle::resolve(self.at.app_id, self.at.key, core::any::type_name::<T>())?)),
        }
    }
}

/// The slow path of `get` and `with`: creates the object or panics with the reason.
#[cold]
#[inline(never)]
#[track_caller]
fn resolve_or_panic(app_id: u64, key: u32, wanted: &'static str) -> AnyArc {
    match handle::resolve(app_id, key, wanted) {
        Ok(obj) => obj,
        Err(e) => fail(e),
    }
}

#[cold]
#[inline(never)]
fn wrong_type(wanted: &str) -> ! {
    unreachable!("the context proto at this ContextRef's index is not `{wanted}`")
}

#[cold]
#[inline(never)]
#[track_caller]
fn fail(e: DiError) -> ! {
    panic!("{e}")
}

impl<T: ?Sized> Clone for ContextRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for ContextRef<T> {}

impl<T: ?Sized> fmt::Debug for ContextRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContextRef<{}>", core::any::type_name::<T>())
    }
}

/// A proxy to the current context scope's object of a context proto that is built
/// asynchronously: one with an async constructor or init hook, or that takes such a context
/// proto by value. It has only [`get_async`](Self::get_async): the macros refuse a
/// `ContextRef<T>` of such a proto at compile time, and `build()` a `ContextRef<dyn Trait>`
/// whose implementation is such a proto ([`DiError::ContextRefToAsync`]), so that no `get()`
/// call site meets one in a request.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::Arc;
/// use tegu_core::{context_proto, singleton_proto, App, AsyncContextRef};
///
/// pub struct Session { user: String }
/// #[context_proto]
/// impl Session {
///     async fn new() -> Session {
///         Session { user: "ada".into() } // a real one would await a session store
///     }
/// }
///
/// #[singleton_proto]
/// pub struct Greeter {
///     #[inject]
///     session: AsyncContextRef<Session>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let greeter = app.get_object::<Greeter>()?;
/// let user = app.run_in_context(async { greeter.session.get_async().await.map(|s| s.user.clone()) }).await?;
/// assert_eq!(user, "ada");
/// # Ok(()) }
/// ```
pub struct AsyncContextRef<T: ?Sized> {
    inner: ContextRef<T>,
}

impl<T: ?Sized + RefTarget> AsyncContextRef<T> {
    /// The current scope's `T`, built now (awaiting its constructor and init hooks, and those
    /// of the context objects it takes by value) if this is the scope's first use of it.
    ///
    /// # Errors
    ///
    /// As [`ContextRef::get_async`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, AsyncContextRef, error::BoxError, registry::{Dependency, InjectKind, Lifetime}, ProtoDef};
    ///
    /// struct Token(String);
    /// struct Client { token: AsyncContextRef<Token> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::new_async::<Token, _, _>(Lifetime::Context, |_| {
    ///         Ok(async { Ok::<_, BoxError>(Token("t-1".into())) })
    ///     }))
    ///     .register(ProtoDef::singleton::<Client>(|r| Ok(Client { token: r.async_context_ref(0)? }))
    ///         .dep(Dependency::new::<Token>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let client = app.get_object::<Client>()?;
    /// let same = app.run_in_context(async {
    ///     let (a, b) = (client.token.get_async().await?, client.token.get_async().await?);
    ///     Ok::<_, tegu_core::DiError>(std::sync::Arc::ptr_eq(&a, &b) && a.0 == "t-1")
    /// }).await?;
    /// assert!(same); // built once per scope
    /// // Outside a scope there is no current token.
    /// assert!(client.token.get_async().await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn get_async(&self) -> Result<Arc<T>, DiError> {
        self.inner.get_async().await
    }
}

impl<T: ?Sized + RefTarget> From<ContextRef<T>> for AsyncContextRef<T> {
    fn from(inner: ContextRef<T>) -> Self {
        AsyncContextRef { inner }
    }
}

impl<T: ?Sized> Clone for AsyncContextRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for AsyncContextRef<T> {}

impl<T: ?Sized> fmt::Debug for AsyncContextRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AsyncContextRef<{}>", core::any::type_name::<T>())
    }
}
