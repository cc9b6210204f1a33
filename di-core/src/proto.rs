//! Static descriptions of protos: what a type is, what it needs, how it is built.

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::config::LoadFn;
use crate::error::{BoxError, DiError};
use crate::resolver::Resolver;

/// A type-erased, shareable object as the container stores it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::AnyArc;
///
/// struct Clock { now: u64 }
///
/// // What a factory returns: the object, its type erased.
/// let obj: AnyArc = Arc::new(Clock { now: 42 });
/// assert!(obj.is::<Clock>());
/// let clock: Arc<Clock> = obj.downcast::<Clock>().expect("stored as a Clock");
/// assert_eq!(clock.now, 42);
/// ```
pub type AnyArc = Arc<dyn Any + Send + Sync>;

/// The future returned by lifecycle hooks.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use di_core::registry::{AnyArc, HookFuture};
///
/// #[derive(Default)]
/// struct Pool { open: AtomicBool }
///
/// /// An init hook as the macros write it: the erased object in, a boxed future out.
/// fn open(obj: AnyArc) -> HookFuture {
///     let pool = obj.downcast::<Pool>().expect("registered as a Pool");
///     Box::pin(async move {
///         pool.open.store(true, Ordering::SeqCst);
///         Ok(())
///     })
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::BoxError> {
/// let pool = Arc::new(Pool::default());
/// let hook: HookFuture = open(pool.clone());
/// assert!(!pool.open.load(Ordering::SeqCst)); // nothing runs until it is polled
/// tokio::spawn(hook).await??; // `Send + 'static`: it may run on a task of its own
/// assert!(pool.open.load(Ordering::SeqCst));
/// # Ok(()) }
/// ```
pub type HookFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send + 'static>>;

/// A type-erased factory in a static descriptor.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, FactoryFn, ProtoDescriptor, cast_to};
/// use di_core::{App, DiError, Proto, Resolver, Scope};
///
/// struct Clock { started: u64 }
///
/// /// What `#[singleton_proto]` generates for `Clock`: its dependencies (none) from the
/// /// resolver, then the object, erased.
/// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Clock { started: 42 }))
/// }
/// const FACTORY: FactoryFn = clock;
///
/// impl Proto for Clock {
///     const DESCRIPTOR: ProtoDescriptor =
///         ProtoDescriptor::new::<Clock>("clock", Scope::Singleton, FACTORY, cast_to::<Clock>);
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Clock>().build().await?;
/// assert_eq!(app.get_object::<Clock>()?.started, 42);
/// # Ok(()) }
/// ```
pub type FactoryFn = fn(&Resolver<'_>) -> Result<AnyArc, DiError>;

/// What an async constructor returns, erased: the object, or the constructor's error.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, BuildFuture};
///
/// struct Pool { size: usize }
///
/// /// An async construction, erased as the container awaits it.
/// fn connect(size: usize) -> BuildFuture {
///     Box::pin(async move {
///         tokio::task::yield_now().await; // the I/O of a real constructor
///         Ok(Arc::new(Pool { size }) as AnyArc)
///     })
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::BoxError> {
/// let obj: AnyArc = connect(4).await?;
/// assert_eq!(obj.downcast::<Pool>().expect("a Pool").size, 4);
/// # Ok(()) }
/// ```
pub type BuildFuture = Pin<Box<dyn Future<Output = Result<AnyArc, BoxError>> + Send + 'static>>;

/// A type-erased async factory in a static descriptor: it takes its dependencies from the
/// [`Resolver`] at once and returns the construction to await.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, AsyncFactoryFn, BuildFuture, ProtoDescriptor, cast_to};
/// use di_core::{App, Dependency, DiError, InjectKind, Proto, Resolver, Scope};
///
/// struct Url(&'static str);
/// struct Client { url: &'static str }
///
/// fn url(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Url("http://db")))
/// }
/// /// The dependencies now, from the resolver; the construction later, awaited by `build()`.
/// fn client(r: &Resolver<'_>) -> Result<BuildFuture, DiError> {
///     let url: Arc<Url> = r.arc(0)?;
///     let build: BuildFuture = Box::pin(async move { Ok(Arc::new(Client { url: url.0 }) as AnyArc) });
///     Ok(build)
/// }
/// const CLIENT: AsyncFactoryFn = client;
/// const CLIENT_DEPS: &[Dependency] = &[Dependency::new::<Url>(InjectKind::Arc, None)];
///
/// impl Proto for Url {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Url>("url", Scope::Singleton, url, cast_to::<Url>);
/// }
/// impl Proto for Client {
///     const DESCRIPTOR: ProtoDescriptor =
///         ProtoDescriptor::new_async::<Client>("client", Scope::Singleton, CLIENT, cast_to::<Client>).deps(CLIENT_DEPS);
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Url>().link::<Client>().build().await?;
/// assert_eq!(app.get_object::<Client>()?.url, "http://db");
/// # Ok(()) }
/// ```
pub type AsyncFactoryFn = fn(&Resolver<'_>) -> Result<BuildFuture, DiError>;

/// A type-erased lifecycle hook in a static descriptor.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use di_core::registry::{AnyArc, HookFn, HookFuture};
///
/// #[derive(Default)]
/// struct Conn { log: Mutex<Vec<&'static str>> }
///
/// fn open(obj: AnyArc) -> HookFuture {
///     let conn = obj.downcast::<Conn>().expect("a Conn");
///     Box::pin(async move { conn.log.lock().unwrap().push("open"); Ok(()) })
/// }
/// fn close(obj: AnyArc) -> HookFuture {
///     let conn = obj.downcast::<Conn>().expect("a Conn");
///     Box::pin(async move { conn.log.lock().unwrap().push("close"); Ok(()) })
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::BoxError> {
/// // What `ProtoDescriptor::init` and `destroy` hold, and the container calls.
/// let hooks: [HookFn; 2] = [open, close];
/// let conn = Arc::new(Conn::default());
/// for hook in hooks {
///     hook(conn.clone()).await?;
/// }
/// assert_eq!(*conn.log.lock().unwrap(), ["open", "close"]);
/// # Ok(()) }
/// ```
pub type HookFn = fn(AnyArc) -> HookFuture;

/// Turns an object into an `Arc<U>` (its own type or a `dyn Trait` it provides), written into
/// `out`, an `&mut Option<Arc<U>>` on the caller's stack: a cast allocates nothing. See
/// [`cast_to`] and [`put`].
///
/// # Examples
///
/// ```
/// use std::any::Any;
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, CastFn, cast_to, put};
///
/// trait Tick: Send + Sync { fn now(&self) -> u64; }
/// struct Clock;
/// impl Tick for Clock { fn now(&self) -> u64 { 42 } }
///
/// /// The cast `#[singleton_proto(provides(dyn Tick))]` generates.
/// fn clock_as_tick(obj: AnyArc, out: &mut dyn Any) {
///     let clock: Arc<dyn Tick> = obj.downcast::<Clock>().expect("registered as a Clock");
///     put(out, clock);
/// }
///
/// // A descriptor holds two kinds: to its own type, and to each type it provides.
/// let casts: [CastFn; 2] = [cast_to::<Clock>, clock_as_tick];
/// let obj: AnyArc = Arc::new(Clock);
/// let mut own: Option<Arc<Clock>> = None;
/// casts[0](obj.clone(), &mut own);
/// let mut tick: Option<Arc<dyn Tick>> = None;
/// casts[1](obj, &mut tick);
/// assert!(own.is_some());
/// assert_eq!(tick.expect("written by the cast").now(), 42);
/// ```
pub type CastFn = fn(AnyArc, &mut dyn Any);

pub(crate) type DynFactory = dyn Fn(&Resolver<'_>) -> Result<AnyArc, DiError> + Send + Sync;
pub(crate) type DynAsyncFactory = dyn Fn(&Resolver<'_>) -> Result<BuildFuture, DiError> + Send + Sync;
pub(crate) type DynHook = dyn Fn(AnyArc) -> HookFuture + Send + Sync;
pub(crate) type DynCast = dyn Fn(AnyArc, &mut dyn Any) + Send + Sync;

/// How long an object lives.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::{App, DiError, ProtoDef, Scope};
///
/// struct Settings(u8);
/// struct Request(u8);
/// struct Buffer(u8);
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder()
///     .register(ProtoDef::new::<Settings>(Scope::Singleton, |_| Ok(Settings(0))))
///     .register(ProtoDef::new::<Request>(Scope::Context, |_| Ok(Request(0))))
///     .register(ProtoDef::new::<Buffer>(Scope::Transient, |_| Ok(Buffer(0))))
///     .build()
///     .await?;
/// // Singleton: one per App.
/// assert!(Arc::ptr_eq(&app.get_object::<Settings>()?, &app.get_object::<Settings>()?));
/// // Context: one per scope, and none outside a scope.
/// let same = app
///     .run_in_context(async { Ok::<_, DiError>(Arc::ptr_eq(&app.get_object::<Request>()?, &app.get_object::<Request>()?)) })
///     .await?;
/// assert!(same);
/// assert!(app.get_object::<Request>().is_err());
/// // Transient: a new one every time.
/// let (a, b) = (app.get_object::<Buffer>()?, app.get_object::<Buffer>()?);
/// assert!(!Arc::ptr_eq(&a, &b));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Built once, when the [`App`](crate::App) is built, and shared by everything.
    Singleton,
    /// Built at most once per context scope (one request), on first use, and destroyed when the
    /// scope ends.
    Context,
    /// Built anew for every injection (and every [`Provider::get`](crate::Provider::get)), and
    /// not kept: the container runs no hook for it (it has no init, complete or destroy hook,
    /// and no async constructor). A singleton reaches one only through `Provider<T>`.
    Transient,
}

/// Who may inject a proto (tegg's `AccessLevel`).
///
/// # Examples
///
/// ```
/// use di_core::{Access, App, AppBuilder, Dependency, DiError, InjectKind, ProtoDef};
///
/// struct Ledger;
/// struct Report;
///
/// /// `Ledger` is private to crate `billing` (`#[singleton_proto(access = private)]` there);
/// /// `Report`, in crate `report_crate`, injects it.
/// fn app(report_crate: &'static str) -> AppBuilder {
///     App::builder()
///         .register(ProtoDef::singleton::<Ledger>(|_| Ok(Ledger)).private_to("billing"))
///         .register(ProtoDef::singleton::<Report>(|r| r.arc::<Ledger>(0).map(|_| Report))
///             .in_crate(report_crate)
///             .dep(Dependency::new::<Ledger>(InjectKind::Arc, None)))
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// assert_eq!(Access::default(), Access::Public); // unless a proto says otherwise
/// assert!(app("billing").build().await.is_ok());
/// let refused = app("web").build().await.unwrap_err();
/// assert!(matches!(refused, DiError::Private { .. }), "{refused}");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Access {
    /// Any crate may inject it.
    #[default]
    Public,
    /// Only protos of the same crate may inject it.
    Private,
}

/// How a dependency is injected.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::{App, Dependency, InjectKind, ProtoDef};
///
/// trait Plugin: Send + Sync {}
/// struct Gzip;
/// impl Plugin for Gzip {}
/// struct Cache;
/// struct Server { plugins: Vec<Arc<dyn Plugin>>, cache: Option<Arc<Cache>> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = App::builder()
///     .without_inventory()
///     .register(ProtoDef::singleton::<Gzip>(|_| Ok(Gzip)).provides::<Gzip, dyn Plugin>(|g| g))
///     .register(
///         ProtoDef::singleton::<Server>(|r| Ok(Server { plugins: r.all(0)?, cache: r.optional(1)? }))
///             .dep(Dependency::new::<dyn Plugin>(InjectKind::All, None)) // `Vec<Arc<dyn Plugin>>`
///             .dep(Dependency::new::<Cache>(InjectKind::Optional, None)), // `Option<Arc<Cache>>`
///     )
///     .build()
///     .await?;
/// let server = app.get_object::<Server>()?;
/// assert_eq!(server.plugins.len(), 1);
/// assert!(server.cache.is_none()); // nobody registered a `Cache`
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InjectKind {
    /// `Arc<T>`: exactly one provider, built before the dependent.
    Arc,
    /// `ContextRef<T>`: a context proto, resolved lazily in the current scope.
    ContextRef,
    /// `Option<Arc<T>>`: zero or one provider.
    Optional,
    /// `Vec<Arc<T>>`: every provider, ordered by object name then type name.
    All,
    /// `Keyed<T>`: every provider, by object name.
    Keyed,
    /// `Provider<T>`: a handle that builds a new transient `T` per call.
    Provider,
}

impl InjectKind {
    fn wrap(self, ty: &str) -> String {
        match self {
            InjectKind::Arc => format!("Arc<{ty}>"),
            InjectKind::ContextRef => format!("ContextRef<{ty}>"),
            InjectKind::Optional => format!("Option<Arc<{ty}>>"),
            InjectKind::All => format!("Vec<Arc<{ty}>>"),
            InjectKind::Keyed => format!("Keyed<{ty}>"),
            InjectKind::Provider => format!("Provider<{ty}>"),
        }
    }
}

/// One declared dependency of a proto: a type, how it is injected, and an optional qualifier.
///
/// Dependencies are positional: the factory asks the [`Resolver`] for dependency `i` with the
/// same type and kind.
///
/// # Examples
///
/// ```
/// use di_core::{Dependency, InjectKind};
/// trait Store: Send + Sync {}
/// struct Tracer;
/// let deps = [
///     Dependency::new::<dyn Store>(InjectKind::Arc, Some("primary")).field("store"),
///     Dependency::new::<Tracer>(InjectKind::ContextRef, None).field("tracer"),
/// ];
/// assert_eq!(deps[0].kind(), InjectKind::Arc);
/// assert_eq!(deps[0].qualifier(), Some("primary"));
/// ```
#[derive(Clone)]
pub struct Dependency {
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) type_name: fn() -> &'static str,
    pub(crate) kind: InjectKind,
    pub(crate) qualifier: Option<Cow<'static, str>>,
    pub(crate) field: Option<&'static str>,
    pub(crate) sync_only: bool,
}

impl Dependency {
    /// A dependency on `T` (a proto type or a `dyn Trait`), injected as `kind`, optionally
    /// qualified by an object name. Usable in `const` and `static` items.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{Dependency, InjectKind};
    ///
    /// struct Db;
    /// // What `#[inject(name = "primary")] db: Arc<Db>` declares.
    /// const DEP: Dependency = Dependency::new::<Db>(InjectKind::Arc, Some("primary"));
    /// assert_eq!((DEP.kind(), DEP.qualifier()), (InjectKind::Arc, Some("primary")));
    /// ```
    pub const fn new<T: ?Sized + 'static>(kind: InjectKind, qualifier: Option<&'static str>) -> Self {
        Dependency {
            type_id: TypeId::of::<T>,
            type_name: core::any::type_name::<T>,
            kind,
            qualifier: match qualifier {
                Some(q) => Some(Cow::Borrowed(q)),
                None => None,
            },
            field: None,
            sync_only: false,
        }
    }

    /// Like [`Dependency::new`], with a qualifier computed at run time (for generated graphs).
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{Dependency, InjectKind};
    ///
    /// struct Db;
    /// // A qualifier chosen at run time (`#[inject(name = "...")]` with a literal uses `new`).
    /// let name = format!("shard{}", 3);
    /// let dep = Dependency::named::<Db>(InjectKind::Arc, name);
    /// assert_eq!(dep.qualifier(), Some("shard3"));
    /// ```
    pub fn named<T: ?Sized + 'static>(kind: InjectKind, qualifier: impl Into<String>) -> Self {
        Dependency { qualifier: Some(Cow::Owned(qualifier.into())), ..Dependency::new::<T>(kind, None) }
    }

    /// Records the field this dependency fills, for error messages and graph export.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, Dependency, InjectKind, ProtoDef};
    ///
    /// struct Db;
    /// struct Repo { db: Arc<Db> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::singleton::<Db>(|_| Ok(Db)))
    ///     .register(ProtoDef::singleton::<Repo>(|r| Ok(Repo { db: r.arc(0)? }))
    ///         // What `#[inject] db: Arc<Db>` declares.
    ///         .dep(Dependency::new::<Db>(InjectKind::Arc, None).field("db")))
    ///     .build()
    ///     .await?;
    /// let dot = app.to_dot();
    /// assert!(dot.contains("[label=\"db\"]"), "{dot}"); // the edge is labelled with the field
    /// # Ok(()) }
    /// ```
    pub const fn field(mut self, field: &'static str) -> Self {
        self.field = Some(field);
        self
    }

    /// Says that the holder of this [`InjectKind::ContextRef`] calls `get()`, not only
    /// `get_async()`: `build()` then refuses a target built asynchronously
    /// ([`DiError::ContextRefToAsync`]) instead of `get()` failing in a request. The macros set
    /// it on every `ContextRef<T>` field (not on `AsyncContextRef<T>`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, Dependency, DiError, InjectKind, ProtoDef};
    ///
    /// struct Session;
    /// struct Handler;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let err = App::builder()
    ///     .register(ProtoDef::context::<Session>(|_| Ok(Session)).on_init(|_: Arc<Session>| async { Ok(()) }))
    ///     .register(
    ///         ProtoDef::singleton::<Handler>(|_| Ok(Handler))
    ///             .dep(Dependency::new::<Session>(InjectKind::ContextRef, None).sync_only()),
    ///     )
    ///     .build()
    ///     .await
    ///     .err()
    ///     .unwrap();
    /// assert!(matches!(err, DiError::ContextRefToAsync { .. }), "{err}");
    /// # }
    /// ```
    pub const fn sync_only(mut self) -> Self {
        self.sync_only = true;
        self
    }

    /// How the dependency is injected.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{Dependency, InjectKind};
    ///
    /// struct Db;
    /// let dep = Dependency::new::<Db>(InjectKind::ContextRef, None);
    /// assert_eq!(dep.kind(), InjectKind::ContextRef);
    /// ```
    pub fn kind(&self) -> InjectKind {
        self.kind
    }

    /// The requested object name, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{Dependency, InjectKind};
    ///
    /// struct Db;
    /// let dep = Dependency::named::<Db>(InjectKind::Arc, "primary");
    /// assert_eq!(dep.qualifier(), Some("primary"));
    /// ```
    pub fn qualifier(&self) -> Option<&str> {
        self.qualifier.as_deref()
    }

    /// The requested type's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{Dependency, InjectKind};
    ///
    /// struct Db;
    /// let dep = Dependency::new::<Db>(InjectKind::Arc, None);
    /// assert!(dep.type_name().ends_with("Db"));
    /// ```
    pub fn type_name(&self) -> &'static str {
        (self.type_name)()
    }

    pub(crate) fn describe(&self) -> String {
        let mut s = self.kind.wrap(self.type_name());
        if let Some(q) = &self.qualifier {
            s.push_str(&format!(" named \"{q}\""));
        }
        s
    }
}

impl fmt::Debug for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dependency")
            .field("type", &self.type_name())
            .field("kind", &self.kind)
            .field("qualifier", &self.qualifier)
            .field("field", &self.field)
            .finish()
    }
}

/// A type a proto can be injected as, besides its own: usually a `dyn Trait`.
///
/// # Examples
///
/// ```
/// use std::any::Any;
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, Provide, put};
///
/// trait Greet: Send + Sync { fn hi(&self) -> &str; }
/// struct English;
/// impl Greet for English { fn hi(&self) -> &str { "hello" } }
///
/// fn english_as_greet(obj: AnyArc, out: &mut dyn Any) {
///     let english: Arc<dyn Greet> = obj.downcast::<English>().expect("registered as English");
///     put(out, english);
/// }
///
/// // The list `#[singleton_proto(provides(dyn Greet))]` on `English` declares.
/// const PROVIDES: &[Provide] = &[Provide::new::<dyn Greet>(english_as_greet)];
/// assert!(format!("{:?}", PROVIDES[0]).contains("Greet"), "{:?}", PROVIDES[0]);
/// // The container calls the cast with the built object and a slot of the provided type.
/// let mut slot: Option<Arc<dyn Greet>> = None;
/// english_as_greet(Arc::new(English), &mut slot);
/// assert_eq!(slot.expect("filled by the cast").hi(), "hello");
/// ```
#[derive(Clone, Copy)]
pub struct Provide {
    type_id: fn() -> TypeId,
    type_name: fn() -> &'static str,
    cast: CastFn,
}

impl Provide {
    /// Declares that the proto can be injected as `U`. `cast` receives the object (its concrete
    /// type erased) and [`put`]s it, as an `Arc<U>`, into its second argument; the macros
    /// generate it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::any::Any;
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, Provide, cast_to, put};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// trait Greet: Send + Sync { fn hi(&self) -> &str; }
    /// struct English;
    /// impl Greet for English { fn hi(&self) -> &str { "hello" } }
    ///
    /// fn english(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(English))
    /// }
    /// fn english_as_greet(obj: AnyArc, out: &mut dyn Any) {
    ///     let english: Arc<dyn Greet> = obj.downcast::<English>().expect("registered as English");
    ///     put(out, english);
    /// }
    ///
    /// impl Proto for English {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<English>("english", Scope::Singleton, english, cast_to::<English>)
    ///             .provides(const { &[Provide::new::<dyn Greet>(english_as_greet)] });
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<English>().build().await?;
    /// assert_eq!(app.get_provider::<dyn Greet>()?.hi(), "hello");
    /// # Ok(()) }
    /// ```
    pub const fn new<U: ?Sized + 'static>(cast: CastFn) -> Self {
        Provide { type_id: TypeId::of::<U>, type_name: core::any::type_name::<U>, cast }
    }
}

impl fmt::Debug for Provide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Provide").field(&(self.type_name)()).finish()
    }
}

/// The static description of a proto, as `#[singleton_proto]` and `#[context_proto]` submit it
/// to [`inventory`]. Built in `const` context; every callback is a plain `fn` pointer.
///
/// Hand-written registration usually goes through [`ProtoDef`] on the builder instead.
///
/// # Examples
///
/// What `#[context_proto]` on `Tracer` generates, linked into an App:
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
/// use di_core::{Access, App, ContextProto, DiError, Proto, Resolver, Scope};
///
/// struct Tracer { id: u32 }
///
/// fn tracer(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Tracer { id: 7 }))
/// }
///
/// impl Proto for Tracer {
///     const DESCRIPTOR: ProtoDescriptor =
///         ProtoDescriptor::new::<Tracer>("tracer", Scope::Context, tracer, cast_to::<Tracer>)
///             .deps(&[])
///             .provides(&[])
///             .access(Access::Public, module_path!());
/// }
/// impl ContextProto for Tracer {}
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Tracer>().build().await?;
/// let id = app.run_in_context(async { app.get_object::<Tracer>().map(|t| t.id) }).await?;
/// assert_eq!(id, 7);
/// assert!(format!("{:?}", Tracer::descriptor()).contains("name: \"tracer\""));
/// # Ok(()) }
/// ```
pub struct ProtoDescriptor {
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) type_name: fn() -> &'static str,
    pub(crate) name: &'static str,
    pub(crate) scope: Scope,
    pub(crate) access: Access,
    pub(crate) krate: &'static str,
    pub(crate) deps: &'static [Dependency],
    pub(crate) provides: &'static [Provide],
    pub(crate) construct: Construct,
    pub(crate) cast_self: CastFn,
    pub(crate) instances_of: Option<TypeRef>,
    pub(crate) profile: Option<&'static str>,
    pub(crate) lazy: bool,
    pub(crate) init: Option<HookFn>,
    pub(crate) complete: Option<HookFn>,
    pub(crate) destroy: Option<HookFn>,
}

impl ProtoDescriptor {
    /// A proto of type `T` named `name` in `scope`, built by `factory`. `cast_self` turns the
    /// erased object back into an `Arc<T>` (see [`cast_to`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// struct Clock { started: u64 }
    ///
    /// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Clock { started: 42 }))
    /// }
    ///
    /// impl Proto for Clock {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Clock>("systemClock", Scope::Singleton, clock, cast_to::<Clock>);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Clock>().build().await?;
    /// assert_eq!(app.get_object_named::<Clock>("systemClock")?.started, 42);
    /// # Ok(()) }
    /// ```
    pub const fn new<T: Send + Sync + 'static>(
        name: &'static str,
        scope: Scope,
        factory: FactoryFn,
        cast_self: CastFn,
    ) -> Self {
        Self::with::<T>(name, scope, Construct::Sync(factory), cast_self)
    }

    /// A proto of type `T` built by an async constructor: `factory` takes the dependencies from
    /// the resolver and returns the construction, which [`build`](crate::AppBuilder::build)
    /// awaits for a singleton, and [`get_async`](crate::ContextRef::get_async) for a context
    /// proto.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, BuildFuture, ProtoDescriptor, cast_to};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// struct Pool { size: usize }
    ///
    /// /// What the macros generate for an async constructor: no dependency to take here, and
    /// /// the construction, which `build()` awaits.
    /// fn connect(_: &Resolver<'_>) -> Result<BuildFuture, DiError> {
    ///     let build: BuildFuture = Box::pin(async {
    ///         tokio::task::yield_now().await;
    ///         Ok(Arc::new(Pool { size: 4 }) as AnyArc)
    ///     });
    ///     Ok(build)
    /// }
    ///
    /// impl Proto for Pool {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new_async::<Pool>("pool", Scope::Singleton, connect, cast_to::<Pool>);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Pool>().build().await?;
    /// assert_eq!(app.get_object::<Pool>()?.size, 4);
    /// # Ok(()) }
    /// ```
    pub const fn new_async<T: Send + Sync + 'static>(
        name: &'static str,
        scope: Scope,
        factory: AsyncFactoryFn,
        cast_self: CastFn,
    ) -> Self {
        Self::with::<T>(name, scope, Construct::Async(factory), cast_self)
    }

    /// A singleton whose value is the configuration section at `prefix`, deserialized by `load`
    /// ([`load_section::<T>`](crate::registry::load_section)) when the App is built. With `instances`,
    /// each table under `prefix` is an instance, named by its key.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::registry::{ProtoDescriptor, cast_to, load_section};
    /// use di_core::{App, DiError, Proto};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct DbConfig { url: String }
    ///
    /// // What `#[config_proto(prefix = "db")]` generates.
    /// impl Proto for DbConfig {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::config::<DbConfig>("dbConfig", "db", false, load_section::<DbConfig>, cast_to::<DbConfig>);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .link::<DbConfig>()
    ///     .config_value("db.url", "sqlite::memory:")
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object::<DbConfig>()?.url, "sqlite::memory:");
    /// # Ok(()) }
    /// ```
    pub const fn config<T: Send + Sync + 'static>(
        name: &'static str,
        prefix: &'static str,
        instances: bool,
        load: LoadFn,
        cast_self: CastFn,
    ) -> Self {
        Self::with::<T>(name, Scope::Singleton, Construct::Config { prefix, instances, load }, cast_self)
    }

    const fn with<T: Send + Sync + 'static>(
        name: &'static str,
        scope: Scope,
        construct: Construct,
        cast_self: CastFn,
    ) -> Self {
        ProtoDescriptor {
            type_id: TypeId::of::<T>,
            type_name: core::any::type_name::<T>,
            name,
            scope,
            access: Access::Public,
            krate: "",
            deps: &[],
            provides: &[],
            construct,
            cast_self,
            instances_of: None,
            profile: None,
            lazy: false,
            init: None,
            complete: None,
            destroy: None,
        }
    }

    /// Makes a singleton lazy: validated with the graph, built on first use (unless an eagerly
    /// built proto takes it by value).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// static BUILT: AtomicBool = AtomicBool::new(false);
    /// struct Geo;
    ///
    /// fn geo(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     BUILT.store(true, Ordering::SeqCst);
    ///     Ok(Arc::new(Geo))
    /// }
    ///
    /// // `#[singleton_proto(lazy)]`
    /// impl Proto for Geo {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Geo>("geo", Scope::Singleton, geo, cast_to::<Geo>).lazy();
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Geo>().build().await?;
    /// assert!(!BUILT.load(Ordering::SeqCst)); // not by `build()`
    /// app.get_object::<Geo>()?;
    /// assert!(BUILT.load(Ordering::SeqCst)); // on first use
    /// # Ok(()) }
    /// ```
    pub const fn lazy(mut self) -> Self {
        self.lazy = true;
        self
    }

    /// Makes this proto a template with one instance per instance of `C` (usually a
    /// multi-instance config section), named like it; in each, a dependency on `Arc<C>` (or
    /// `Option<Arc<C>>`) with no qualifier gets that instance.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to, load_section};
    /// use di_core::{App, Dependency, DiError, InjectKind, Proto, Resolver, Scope};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct RedisConfig { url: String }
    /// struct Redis { url: String }
    ///
    /// fn redis(r: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     let config: Arc<RedisConfig> = r.arc(0)?; // this instance's own section
    ///     Ok(Arc::new(Redis { url: config.url.clone() }))
    /// }
    /// const REDIS_DEPS: &[Dependency] = &[Dependency::new::<RedisConfig>(InjectKind::Arc, None)];
    ///
    /// // `#[config_proto(prefix = "redis", instances)]`: one section per table under `redis`.
    /// impl Proto for RedisConfig {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::config::<RedisConfig>(
    ///         "redisConfig", "redis", true, load_section::<RedisConfig>, cast_to::<RedisConfig>,
    ///     );
    /// }
    /// // `#[singleton_proto(instances_of = RedisConfig)]`: one client per section.
    /// impl Proto for Redis {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Redis>("redis", Scope::Singleton, redis, cast_to::<Redis>)
    ///         .deps(REDIS_DEPS)
    ///         .instances_of::<RedisConfig>();
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .link::<RedisConfig>()
    ///     .link::<Redis>()
    ///     .config_value("redis.cache.url", "redis://cache")
    ///     .config_value("redis.queue.url", "redis://queue")
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Redis>("cache")?.url, "redis://cache");
    /// assert_eq!(app.get_object_named::<Redis>("queue")?.url, "redis://queue");
    /// # Ok(()) }
    /// ```
    pub const fn instances_of<C: ?Sized + 'static>(mut self) -> Self {
        self.instances_of = Some(TypeRef { type_id: TypeId::of::<C>, type_name: core::any::type_name::<C> });
        self
    }

    /// Registers this proto only when `profile` is the App's active profile
    /// ([`AppBuilder::profile`](crate::AppBuilder::profile)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// struct FakeMailer;
    ///
    /// fn fake_mailer(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(FakeMailer))
    /// }
    ///
    /// // `#[singleton_proto(profile = "test")]`
    /// impl Proto for FakeMailer {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<FakeMailer>("fakeMailer", Scope::Singleton, fake_mailer, cast_to::<FakeMailer>)
    ///             .profile("test");
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let test = App::builder().without_inventory().link::<FakeMailer>().profile("test").build().await?;
    /// assert!(test.get_object::<FakeMailer>().is_ok());
    /// let prod = App::builder().without_inventory().link::<FakeMailer>().profile("prod").build().await?;
    /// assert!(prod.get_object::<FakeMailer>().is_err()); // not registered under "prod"
    /// # Ok(()) }
    /// ```
    pub const fn profile(mut self, profile: &'static str) -> Self {
        self.profile = Some(profile);
        self
    }

    /// Sets the declared dependencies, in the order the factory asks for them.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
    /// use di_core::{App, Dependency, DiError, InjectKind, Proto, Resolver, Scope};
    ///
    /// struct Db;
    /// struct Repo { db: Arc<Db> }
    ///
    /// fn db(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Db))
    /// }
    /// fn repo(r: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Repo { db: r.arc(0)? })) // dependency #0
    /// }
    ///
    /// impl Proto for Db {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Db>("db", Scope::Singleton, db, cast_to::<Db>);
    /// }
    /// impl Proto for Repo {
    ///     // `#[inject] db: Arc<Db>`
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Repo>("repo", Scope::Singleton, repo, cast_to::<Repo>)
    ///         .deps(const { &[Dependency::new::<Db>(InjectKind::Arc, None).field("db")] });
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Db>().link::<Repo>().build().await?;
    /// assert!(Arc::ptr_eq(&app.get_object::<Repo>()?.db, &app.get_object::<Db>()?));
    /// # Ok(()) }
    /// ```
    pub const fn deps(mut self, deps: &'static [Dependency]) -> Self {
        self.deps = deps;
        self
    }

    /// Sets the extra types (usually `dyn Trait`) this proto can be injected as.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::any::Any;
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, Provide, cast_to, put};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// trait Mailer: Send + Sync { fn send(&self) -> &'static str; }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn send(&self) -> &'static str { "smtp" } }
    ///
    /// fn smtp(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Smtp))
    /// }
    /// fn smtp_as_mailer(obj: AnyArc, out: &mut dyn Any) {
    ///     let smtp: Arc<dyn Mailer> = obj.downcast::<Smtp>().expect("registered as Smtp");
    ///     put(out, smtp);
    /// }
    ///
    /// // `#[singleton_proto(provides(dyn Mailer))]`
    /// impl Proto for Smtp {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Smtp>("smtp", Scope::Singleton, smtp, cast_to::<Smtp>)
    ///         .provides(const { &[Provide::new::<dyn Mailer>(smtp_as_mailer)] });
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Smtp>().build().await?;
    /// assert_eq!(app.get_provider::<dyn Mailer>()?.send(), "smtp");
    /// assert!(app.get_object::<Smtp>().is_ok()); // and as its own type
    /// # Ok(()) }
    /// ```
    pub const fn provides(mut self, provides: &'static [Provide]) -> Self {
        self.provides = provides;
        self
    }

    /// Sets the access level and the crate it is checked against (`module_path!()` works).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
    /// use di_core::{Access, App, Dependency, DiError, InjectKind, Proto, Resolver, Scope};
    ///
    /// struct Ledger;
    /// struct Report;
    ///
    /// fn ledger(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Ledger))
    /// }
    /// fn report(r: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     r.arc::<Ledger>(0)?;
    ///     Ok(Arc::new(Report))
    /// }
    ///
    /// // Private to crate `billing` (only the first segment of the path counts) ...
    /// impl Proto for Ledger {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Ledger>("ledger", Scope::Singleton, ledger, cast_to::<Ledger>)
    ///         .access(Access::Private, "billing::ledger");
    /// }
    /// // ... and injected by a proto of crate `web`.
    /// impl Proto for Report {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Report>("report", Scope::Singleton, report, cast_to::<Report>)
    ///         .deps(const { &[Dependency::new::<Ledger>(InjectKind::Arc, None)] })
    ///         .access(Access::Public, "web::reports");
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let err = App::builder().without_inventory().link::<Ledger>().link::<Report>().build().await.unwrap_err();
    /// assert!(matches!(err, DiError::Private { .. }), "{err}");
    /// # }
    /// ```
    pub const fn access(mut self, access: Access, krate: &'static str) -> Self {
        self.access = access;
        self.krate = krate;
        self
    }

    /// Sets the async init hook, run once after construction.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::registry::{AnyArc, HookFuture, ProtoDescriptor, cast_to};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// #[derive(Default)]
    /// struct Pool { warm: AtomicBool }
    ///
    /// fn pool(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Pool::default()))
    /// }
    /// fn warm_up(obj: AnyArc) -> HookFuture {
    ///     let pool = obj.downcast::<Pool>().expect("registered as a Pool");
    ///     Box::pin(async move {
    ///         pool.warm.store(true, Ordering::SeqCst);
    ///         Ok(())
    ///     })
    /// }
    ///
    /// // `#[singleton_proto(init = warm_up)]`
    /// impl Proto for Pool {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Pool>("pool", Scope::Singleton, pool, cast_to::<Pool>).init(warm_up);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Pool>().build().await?;
    /// assert!(app.get_object::<Pool>()?.warm.load(Ordering::SeqCst)); // run by `build()`
    /// # Ok(()) }
    /// ```
    pub const fn init(mut self, hook: HookFn) -> Self {
        self.init = Some(hook);
        self
    }

    /// Sets the async completion hook of a context proto, run when its scope's work is done
    /// and before its output leaves (see [`App::run_in_context`](crate::App::run_in_context)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::registry::{AnyArc, HookFuture, ProtoDescriptor, cast_to};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// #[derive(Default)]
    /// struct UnitOfWork { committed: AtomicBool }
    ///
    /// fn unit_of_work(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(UnitOfWork::default()))
    /// }
    /// fn commit(obj: AnyArc) -> HookFuture {
    ///     let uow = obj.downcast::<UnitOfWork>().expect("registered as a UnitOfWork");
    ///     Box::pin(async move {
    ///         uow.committed.store(true, Ordering::SeqCst);
    ///         Ok(())
    ///     })
    /// }
    ///
    /// // `#[context_proto(complete = commit)]`
    /// impl Proto for UnitOfWork {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<UnitOfWork>("unitOfWork", Scope::Context, unit_of_work, cast_to::<UnitOfWork>)
    ///             .complete(commit);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<UnitOfWork>().build().await?;
    /// let uow = app.try_run_in_context(async { app.get_object::<UnitOfWork>() }).await??;
    /// assert!(uow.committed.load(Ordering::SeqCst)); // when the scope's work was done
    /// # Ok(()) }
    /// ```
    pub const fn complete(mut self, hook: HookFn) -> Self {
        self.complete = Some(hook);
        self
    }

    /// Sets the async destroy hook, run once before the object is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::registry::{AnyArc, HookFuture, ProtoDescriptor, cast_to};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// static CLOSED: AtomicBool = AtomicBool::new(false);
    /// struct Pool;
    ///
    /// fn pool(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Pool))
    /// }
    /// fn close(_: AnyArc) -> HookFuture {
    ///     Box::pin(async {
    ///         CLOSED.store(true, Ordering::SeqCst);
    ///         Ok(())
    ///     })
    /// }
    ///
    /// // `#[singleton_proto(destroy = close)]`
    /// impl Proto for Pool {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Pool>("pool", Scope::Singleton, pool, cast_to::<Pool>).destroy(close);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Pool>().build().await?;
    /// assert!(!CLOSED.load(Ordering::SeqCst));
    /// app.shutdown().await?; // a singleton's destroy hook runs at shutdown
    /// assert!(CLOSED.load(Ordering::SeqCst));
    /// # Ok(()) }
    /// ```
    pub const fn destroy(mut self, hook: HookFn) -> Self {
        self.destroy = Some(hook);
        self
    }

    pub(crate) fn to_def(&'static self) -> ProtoDef {
        let hook = |h: Option<HookFn>| h.map(|h| Arc::new(h) as Arc<DynHook>);
        let mut provides = Vec::with_capacity(1 + self.provides.len());
        provides.push(ProvideDef {
            type_id: (self.type_id)(),
            type_name: (self.type_name)(),
            cast: ProvideCast::Fn(self.cast_self),
        });
        provides.extend(self.provides.iter().map(|p| ProvideDef {
            type_id: (p.type_id)(),
            type_name: (p.type_name)(),
            cast: ProvideCast::Fn(p.cast),
        }));
        ProtoDef {
            type_id: (self.type_id)(),
            type_name: (self.type_name)(),
            name: Cow::Borrowed(self.name),
            scope: self.scope,
            access: self.access,
            krate: Cow::Borrowed(crate_of(self.krate)),
            deps: Cow::Borrowed(self.deps),
            provides,
            factory: match self.construct {
                Construct::Sync(f) => Factory::Sync(SyncFactory::Fn(f)),
                Construct::Async(f) => Factory::Async(Arc::new(f)),
                Construct::Config { prefix, instances, load } => {
                    Factory::Config(ConfigDef { prefix: Cow::Borrowed(prefix), instances, load })
                }
            },
            instances_of: self.instances_of.map(|c| ((c.type_id)(), (c.type_name)())),
            profile: self.profile.map(Cow::Borrowed),
            lazy: self.lazy,
            init: hook(self.init),
            complete: hook(self.complete),
            destroy: hook(self.destroy),
        }
    }
}

impl fmt::Debug for ProtoDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtoDescriptor")
            .field("type", &(self.type_name)())
            .field("name", &self.name)
            .field("scope", &self.scope)
            .field("deps", &self.deps)
            .finish_non_exhaustive()
    }
}

inventory::collect!(ProtoDescriptor);

/// How a descriptor's object is made.
#[derive(Clone, Copy)]
pub(crate) enum Construct {
    Sync(FactoryFn),
    Async(AsyncFactoryFn),
    Config { prefix: &'static str, instances: bool, load: LoadFn },
}

/// A type named in a `const` descriptor.
#[derive(Clone, Copy)]
pub(crate) struct TypeRef {
    type_id: fn() -> TypeId,
    type_name: fn() -> &'static str,
}

/// How a def's object is made.
#[derive(Clone)]
pub(crate) enum Factory {
    /// By a function, now.
    Sync(SyncFactory),
    /// By an async constructor, awaited.
    Async(Arc<DynAsyncFactory>),
    /// From the configuration, read when the App is built (and then replaced by `Sync`).
    Config(ConfigDef),
}

/// A sync factory: a descriptor's `fn` (called directly: a context object in a large graph is
/// built once per request, from cold code, so each indirection shows) or a closure (from
/// [`ProtoDef`]'s constructors).
#[derive(Clone)]
pub(crate) enum SyncFactory {
    Fn(FactoryFn),
    Closure(Arc<DynFactory>),
}

impl SyncFactory {
    #[inline]
    pub(crate) fn call(&self, r: &Resolver<'_>) -> Result<AnyArc, DiError> {
        match self {
            SyncFactory::Fn(f) => f(r),
            SyncFactory::Closure(f) => f(r),
        }
    }
}

/// A config section: where it is and how to read it.
#[derive(Clone)]
pub(crate) struct ConfigDef {
    pub(crate) prefix: Cow<'static, str>,
    pub(crate) instances: bool,
    pub(crate) load: LoadFn,
}

/// The standard [`CastFn`] for a proto's own type: `Arc<dyn Any>` back to `Arc<T>`.
///
/// Compiled once per proto type, so written with no generic helper of its own: a large
/// project's build time goes to code instantiated per type (issue 13).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, cast_to};
///
/// struct Clock(u64);
///
/// let obj: AnyArc = Arc::new(Clock(42));
/// let mut out: Option<Arc<Clock>> = None; // on the caller's stack
/// cast_to::<Clock>(obj.clone(), &mut out);
/// let clock = out.expect("written by the cast");
/// assert_eq!(clock.0, 42);
/// assert_eq!(Arc::strong_count(&clock), 2); // the same object as `obj`, not a copy
/// ```
pub fn cast_to<T: Send + Sync + 'static>(obj: AnyArc, out: &mut dyn Any) {
    let Some(slot) = out.downcast_mut::<Option<Arc<T>>>() else { cast_to_another_type(core::any::type_name::<T>()) };
    match obj.downcast::<T>() {
        Ok(t) => *slot = Some(t),
        Err(_) => stored_as_another_type(),
    }
}

/// Writes `value` into a cast's `out`, the caller's `Option<Arc<U>>`: the last step of every
/// [`CastFn`].
///
/// # Panics
///
/// When `out` is not an `Option<Arc<U>>`: the cast was registered for another type than the
/// one it yields, a programming error in hand-written registration.
///
/// # Examples
///
/// ```
/// use std::any::Any;
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, Provide, put};
///
/// trait Greet: Send + Sync { fn hi(&self) -> &str; }
/// struct English;
/// impl Greet for English { fn hi(&self) -> &str { "hello" } }
///
/// fn english_as_greet(obj: AnyArc, out: &mut dyn Any) {
///     let english: Arc<dyn Greet> = obj.downcast::<English>().expect("registered as English");
///     put(out, english);
/// }
/// const PROVIDES: &[Provide] = &[Provide::new::<dyn Greet>(english_as_greet)];
///
/// let mut out: Option<Arc<dyn Greet>> = None;
/// english_as_greet(Arc::new(English), &mut out);
/// assert_eq!(out.unwrap().hi(), "hello");
/// ```
pub fn put<U: ?Sized + 'static>(out: &mut dyn Any, value: Arc<U>) {
    match out.downcast_mut::<Option<Arc<U>>>() {
        Some(slot) => *slot = Some(value),
        None => cast_to_another_type(core::any::type_name::<U>()),
    }
}

#[cold]
#[inline(never)]
fn cast_to_another_type(yields: &str) -> ! {
    panic!("a cast yields `Arc<{yields}>`, but was registered for another type")
}

/// Runs `cast` on `obj` and returns the `Arc<U>` it yields. The dispatch is not generic: per
/// type, only the output slot and its check are compiled (issue 13: generic code per proto is
/// what a large project's build spends its time on).
#[inline]
pub(crate) fn cast_with<U: ?Sized + 'static>(cast: &ProvideCast, obj: AnyArc) -> Arc<U> {
    let mut out: Option<Arc<U>> = None;
    run_cast(cast, obj, &mut out);
    match out {
        Some(value) => value,
        None => cast_to_another_type(core::any::type_name::<U>()),
    }
}

pub(crate) fn run_cast(cast: &ProvideCast, obj: AnyArc, out: &mut dyn Any) {
    match cast {
        ProvideCast::Fn(f) => f(obj, out),
        ProvideCast::Closure(f) => f(obj, out),
    }
}

/// The panic of the casts, out of line so that each monomorphized cast stays small.
#[cold]
#[inline(never)]
pub(crate) fn stored_as_another_type() -> ! {
    unreachable!("the container stores each proto as its own type")
}

fn crate_of(module_path: &str) -> &str {
    module_path.split("::").next().unwrap_or(module_path)
}

#[derive(Clone)]
pub(crate) struct ProvideDef {
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
    pub(crate) cast: ProvideCast,
}

/// A provide entry's cast: a static `fn` (from a descriptor, no allocation) or a closure (from
/// [`ProtoDef::provides`]).
#[derive(Clone)]
pub(crate) enum ProvideCast {
    Fn(CastFn),
    Closure(Arc<DynCast>),
}

/// A proto registered by hand on the [`AppBuilder`](crate::AppBuilder): the same information as
/// a [`ProtoDescriptor`], with closures and names computed at run time, so a program can register
/// thousands of generated protos, or many named instances of one type.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::{App, Dependency, InjectKind, ProtoDef};
///
/// struct Db { url: String }
/// struct Repo { db: Arc<Db> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::singleton::<Db>(|_| Ok(Db { url: "sqlite::memory:".into() })))
///     .register(
///         ProtoDef::singleton::<Repo>(|r| Ok(Repo { db: r.arc(0)? }))
///             .dep(Dependency::new::<Db>(InjectKind::Arc, None)),
///     )
///     .build()
///     .await?;
/// assert_eq!(app.get_object::<Repo>()?.db.url, "sqlite::memory:");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ProtoDef {
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
    pub(crate) name: Cow<'static, str>,
    pub(crate) scope: Scope,
    pub(crate) access: Access,
    pub(crate) krate: Cow<'static, str>,
    pub(crate) deps: Cow<'static, [Dependency]>,
    pub(crate) provides: Vec<ProvideDef>,
    pub(crate) factory: Factory,
    /// A template: one instance per proto of this type (usually a multi-instance config).
    pub(crate) instances_of: Option<(TypeId, &'static str)>,
    /// Registered only under this profile.
    pub(crate) profile: Option<Cow<'static, str>>,
    /// A singleton built on first use.
    pub(crate) lazy: bool,
    pub(crate) init: Option<Arc<DynHook>>,
    pub(crate) complete: Option<Arc<DynHook>>,
    pub(crate) destroy: Option<Arc<DynHook>>,
}

impl ProtoDef {
    /// A singleton of type `T`, built once by `factory` when the App is built.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Clock { started: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock { started: 42 }))).build().await?;
    /// assert_eq!(app.get_object::<Clock>()?.started, 42);
    /// # Ok(()) }
    /// ```
    pub fn singleton<T: Send + Sync + 'static>(
        factory: impl Fn(&Resolver<'_>) -> Result<T, DiError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(Scope::Singleton, factory)
    }

    /// A transient proto of type `T`: `factory` builds a new one for every injection and every
    /// [`Provider::get`](crate::Provider::get).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use di_core::{App, Dependency, InjectKind, ProtoDef, Provider};
    ///
    /// static NEXT: AtomicU64 = AtomicU64::new(1);
    /// struct Ticket(u64);
    /// struct Desk { tickets: Provider<Ticket> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::transient::<Ticket>(|_| Ok(Ticket(NEXT.fetch_add(1, Ordering::Relaxed)))))
    ///     .register(ProtoDef::singleton::<Desk>(|r| Ok(Desk { tickets: r.provider(0)? }))
    ///         .dep(Dependency::new::<Ticket>(InjectKind::Provider, None)))
    ///     .build()
    ///     .await?;
    /// let desk = app.get_object::<Desk>()?;
    /// assert_eq!((desk.tickets.get()?.0, desk.tickets.get()?.0), (1, 2));
    /// # Ok(()) }
    /// ```
    pub fn transient<T: Send + Sync + 'static>(
        factory: impl Fn(&Resolver<'_>) -> Result<T, DiError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(Scope::Transient, factory)
    }

    /// A context proto of type `T`, built by `factory` on first use in each scope.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Tracer { id: u32 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().register(ProtoDef::context::<Tracer>(|_| Ok(Tracer { id: 7 }))).build().await?;
    /// let id = app.run_in_context(async { app.get_object::<Tracer>().map(|t| t.id) }).await?;
    /// assert_eq!(id, 7);
    /// assert!(app.get_object::<Tracer>().is_err()); // no scope, no tracer
    /// # Ok(()) }
    /// ```
    pub fn context<T: Send + Sync + 'static>(
        factory: impl Fn(&Resolver<'_>) -> Result<T, DiError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(Scope::Context, factory)
    }

    /// A proto of type `T` in `scope`.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef, Scope};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let scope = if cfg!(test) { Scope::Context } else { Scope::Singleton };
    /// let app = App::builder().register(ProtoDef::new::<Clock>(scope, |_| Ok(Clock))).build().await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn new<T: Send + Sync + 'static>(
        scope: Scope,
        factory: impl Fn(&Resolver<'_>) -> Result<T, DiError> + Send + Sync + 'static,
    ) -> Self {
        Self::with::<T>(
            scope,
            Factory::Sync(SyncFactory::Closure(Arc::new(move |r: &Resolver<'_>| {
                factory(r).map(|t| Arc::new(t) as AnyArc)
            }))),
        )
    }

    /// A proto of type `T` in `scope` built by an async constructor: `factory` takes the
    /// dependencies from the resolver and returns the future that builds the object. A
    /// singleton's is awaited by [`build`](crate::AppBuilder::build), in dependency order; a
    /// context proto's by [`ContextRef::get_async`](crate::ContextRef::get_async) (its `get`
    /// fails with [`DiError::AsyncInit`]). An error of the future fails the construction.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, BoxError, Dependency, InjectKind, ProtoDef, Scope};
    ///
    /// struct Url(String);
    /// struct Pool { url: String }
    /// impl Pool {
    ///     async fn connect(url: Arc<Url>) -> Result<Pool, BoxError> { Ok(Pool { url: url.0.clone() }) }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Url>(|_| Ok(Url("sqlite::memory:".into()))))
    ///     .register(
    ///         ProtoDef::new_async::<Pool, _, _>(Scope::Singleton, |r| Ok(Pool::connect(r.arc(0)?)))
    ///             .dep(Dependency::new::<Url>(InjectKind::Arc, None)),
    ///     )
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object::<Pool>()?.url, "sqlite::memory:");
    /// # Ok(()) }
    /// ```
    pub fn new_async<T, F, Fut>(scope: Scope, factory: F) -> Self
    where
        T: Send + Sync + 'static,
        F: Fn(&Resolver<'_>) -> Result<Fut, DiError> + Send + Sync + 'static,
        Fut: Future<Output = Result<T, BoxError>> + Send + 'static,
    {
        Self::with::<T>(
            scope,
            Factory::Async(Arc::new(move |r: &Resolver<'_>| {
                let fut = factory(r)?;
                Ok(Box::pin(async move { fut.await.map(|t| Arc::new(t) as AnyArc) }) as BuildFuture)
            })),
        )
    }

    /// A singleton whose value is the configuration section at `prefix` (a dotted path),
    /// deserialized when the App is built: what `#[config_proto(prefix = "...")]` registers,
    /// for a type that cannot carry the attribute (generic, or from another crate).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use di_core::{App, ProtoDef};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::config::<BTreeMap<String, u32>>("limits"))
    ///     .config_value("limits.upload", 10)
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object::<BTreeMap<String, u32>>()?["upload"], 10);
    /// # Ok(()) }
    /// ```
    pub fn config<T: serde::de::DeserializeOwned + Send + Sync + 'static>(
        prefix: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self::with::<T>(
            Scope::Singleton,
            Factory::Config(ConfigDef {
                prefix: prefix.into(),
                instances: false,
                load: crate::config::load_section::<T>,
            }),
        )
    }

    /// Makes a config section multi-instance: each table under its prefix is an instance of
    /// the section, named by its key (`[redis.cache]` is the instance `"cache"`).
    ///
    /// # Panics
    ///
    /// If this def is not a config section ([`ProtoDef::config`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Redis { url: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::config::<Redis>("redis").instances())
    ///     .config_value("redis.cache.url", "redis://cache")
    ///     .config_value("redis.queue.url", "redis://queue")
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Redis>("cache")?.url, "redis://cache");
    /// assert_eq!(app.get_object_named::<Redis>("queue")?.url, "redis://queue");
    /// assert!(app.get_object::<Redis>().is_err()); // two instances: name one
    /// # Ok(()) }
    /// ```
    pub fn instances(mut self) -> Self {
        match &mut self.factory {
            Factory::Config(config) => config.instances = true,
            _ => panic!("`instances()` on `{}`, which is not a config section (ProtoDef::config)", self.type_name),
        }
        self
    }

    /// Makes this def a template with one instance per proto of type `C` (usually the instances
    /// of a multi-instance config section), each named like its `C`; a dependency on `Arc<C>`
    /// or `Option<Arc<C>>` with no qualifier gets the instance's own `C`.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, Dependency, InjectKind, ProtoDef};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct RedisConfig { url: String }
    /// struct Redis { url: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::config::<RedisConfig>("redis").instances())
    ///     // One client per section, each given its own section as dependency #0.
    ///     .register(
    ///         ProtoDef::singleton::<Redis>(|r| Ok(Redis { url: r.arc::<RedisConfig>(0)?.url.clone() }))
    ///             .dep(Dependency::new::<RedisConfig>(InjectKind::Arc, None))
    ///             .instances_of::<RedisConfig>(),
    ///     )
    ///     .config_value("redis.cache.url", "redis://cache")
    ///     .config_value("redis.queue.url", "redis://queue")
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Redis>("cache")?.url, "redis://cache");
    /// assert_eq!(app.get_object_named::<Redis>("queue")?.url, "redis://queue");
    /// # Ok(()) }
    /// ```
    pub fn instances_of<C: ?Sized + 'static>(mut self) -> Self {
        self.instances_of = Some((TypeId::of::<C>(), core::any::type_name::<C>()));
        self
    }

    /// Makes a singleton lazy: validated with the graph at [`build`](crate::AppBuilder::build),
    /// built on first use (a `get_object`, or a proto built later that takes it by value).
    /// An eagerly built proto that takes it by value builds it at `build()` anyway. A lazy
    /// singleton is built synchronously: it has no init hook and no async constructor.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::{App, ProtoDef};
    ///
    /// static BUILT: AtomicBool = AtomicBool::new(false);
    /// struct Geo;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Geo>(|_| { BUILT.store(true, Ordering::SeqCst); Ok(Geo) }).lazy())
    ///     .build()
    ///     .await?;
    /// assert!(!BUILT.load(Ordering::SeqCst));
    /// let a = app.get_object::<Geo>()?;
    /// assert!(BUILT.load(Ordering::SeqCst));
    /// assert!(std::sync::Arc::ptr_eq(&a, &app.get_object::<Geo>()?)); // once
    /// # Ok(()) }
    /// ```
    pub fn lazy(mut self) -> Self {
        self.lazy = true;
        self
    }

    /// Registers this proto only when `profile` is the App's active profile
    /// ([`AppBuilder::profile`](crate::AppBuilder::profile)).
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Mailer { fake: bool }
    ///
    /// fn mailers() -> [ProtoDef; 2] {
    ///     [
    ///         ProtoDef::singleton::<Mailer>(|_| Ok(Mailer { fake: false })).profile("prod"),
    ///         ProtoDef::singleton::<Mailer>(|_| Ok(Mailer { fake: true })).profile("test"),
    ///     ]
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder().without_inventory().register_all(mailers()).profile("test").build().await?;
    /// assert!(app.get_object::<Mailer>()?.fake);
    /// let app = App::builder().without_inventory().register_all(mailers()).build().await?;
    /// assert!(app.get_object::<Mailer>().is_err()); // no profile: neither
    /// # Ok(()) }
    /// ```
    pub fn profile(mut self, profile: impl Into<Cow<'static, str>>) -> Self {
        self.profile = Some(profile.into());
        self
    }

    fn with<T: Send + Sync + 'static>(scope: Scope, factory: Factory) -> Self {
        ProtoDef {
            type_id: TypeId::of::<T>(),
            type_name: core::any::type_name::<T>(),
            name: Cow::Owned(default_name(core::any::type_name::<T>())),
            scope,
            access: Access::Public,
            krate: Cow::Borrowed(""),
            deps: Cow::Owned(Vec::new()),
            provides: vec![ProvideDef {
                type_id: TypeId::of::<T>(),
                type_name: core::any::type_name::<T>(),
                cast: ProvideCast::Fn(cast_to::<T>),
            }],
            factory,
            instances_of: None,
            profile: None,
            lazy: false,
            init: None,
            complete: None,
            destroy: None,
        }
    }

    /// Sets the object name (default: the type name in lowerCamelCase, as tegg does).
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, ProtoDef};
    ///
    /// struct Pool(&'static str);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool("primary"))).name("primary"))
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool("replica"))).name("replica"))
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Pool>("replica")?.0, "replica");
    /// # Ok(()) }
    /// ```
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = name.into();
        self
    }

    /// Appends a dependency; the factory asks for it by its position.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, Dependency, InjectKind, ProtoDef};
    ///
    /// struct Db;
    /// struct Repo { db: Arc<Db> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Db>(|_| Ok(Db)))
    ///     // Dependency #0, which the factory asks for by index.
    ///     .register(ProtoDef::singleton::<Repo>(|r| Ok(Repo { db: r.arc(0)? })).dep(Dependency::new::<Db>(InjectKind::Arc, None)))
    ///     .build()
    ///     .await?;
    /// assert!(Arc::ptr_eq(&app.get_object::<Repo>()?.db, &app.get_object::<Db>()?));
    /// # Ok(()) }
    /// ```
    pub fn dep(mut self, dep: Dependency) -> Self {
        self.deps.to_mut().push(dep);
        self
    }

    /// Declares that the proto can be injected as `U` (usually `dyn Trait`); `cast` is the
    /// unsizing coercion, typically `|t| t`.
    ///
    /// # Panics
    ///
    /// The stored cast panics if the def's type is not `T`; `ProtoDef::singleton::<T>` and
    /// `provides::<T, _>` are written together, so this is a programming error.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, ProtoDef};
    ///
    /// trait Mailer: Send + Sync { fn send(&self) -> &'static str; }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn send(&self) -> &'static str { "smtp" } }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Smtp>(|_| Ok(Smtp)).provides::<Smtp, dyn Mailer>(|s| s as Arc<dyn Mailer>))
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_provider::<dyn Mailer>()?.send(), "smtp");
    /// # Ok(()) }
    /// ```
    pub fn provides<T: Send + Sync + 'static, U: ?Sized + Send + Sync + 'static>(
        mut self,
        cast: impl Fn(Arc<T>) -> Arc<U> + Send + Sync + 'static,
    ) -> Self {
        assert_eq!(
            self.type_id,
            TypeId::of::<T>(),
            "provides::<{}, _> on a proto of type `{}`",
            core::any::type_name::<T>(),
            self.type_name
        );
        self.provides.push(ProvideDef {
            type_id: TypeId::of::<U>(),
            type_name: core::any::type_name::<U>(),
            cast: ProvideCast::Closure(Arc::new(move |obj: AnyArc, out: &mut dyn Any| {
                put(out, cast(downcast::<T>(obj)))
            })),
        });
        self
    }

    /// Restricts injection to protos of crate `krate` (tegg's private access level).
    ///
    /// # Examples
    ///
    /// ```
    /// use di_core::{App, Dependency, DiError, InjectKind, ProtoDef};
    ///
    /// struct Ledger;
    /// struct Report;
    ///
    /// fn ledger() -> ProtoDef {
    ///     ProtoDef::singleton::<Ledger>(|_| Ok(Ledger)).private_to("billing")
    /// }
    /// fn report(krate: &'static str) -> ProtoDef {
    ///     ProtoDef::singleton::<Report>(|r| { r.arc::<Ledger>(0)?; Ok(Report) })
    ///         .dep(Dependency::new::<Ledger>(InjectKind::Arc, None))
    ///         .in_crate(krate)
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// // Injected by a proto of its own crate: allowed.
    /// let app = App::builder().without_inventory().register(ledger()).register(report("billing")).build().await?;
    /// assert!(app.get_object::<Report>().is_ok());
    /// // By another crate's: refused by `build()`.
    /// let err = App::builder().without_inventory().register(ledger()).register(report("web")).build().await.unwrap_err();
    /// assert!(matches!(err, DiError::Private { .. }), "{err}");
    /// # Ok(()) }
    /// ```
    pub fn private_to(mut self, krate: impl Into<Cow<'static, str>>) -> Self {
        self.access = Access::Private;
        self.krate = krate.into();
        self
    }

    /// Sets the crate this proto belongs to, which private protos are checked against.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::{App, Dependency, DiError, InjectKind, ProtoDef};
    ///
    /// struct Ledger;
    /// struct Audit { ledger: Arc<Ledger> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let audit = || {
    ///     ProtoDef::singleton::<Audit>(|r| Ok(Audit { ledger: r.arc(0)? }))
    ///         .dep(Dependency::new::<Ledger>(InjectKind::Arc, None))
    /// };
    /// let ledger = ProtoDef::singleton::<Ledger>(|_| Ok(Ledger)).private_to("billing");
    /// // With no crate set, `Audit` may not inject a private proto of `billing`...
    /// let err = App::builder().without_inventory().register(ledger.clone()).register(audit()).build().await.unwrap_err();
    /// assert!(matches!(err, DiError::Private { .. }), "{err}");
    /// // ... in `billing`, it may.
    /// let app = App::builder().without_inventory().register(ledger).register(audit().in_crate("billing")).build().await?;
    /// assert!(Arc::ptr_eq(&app.get_object::<Audit>()?.ledger, &app.get_object::<Ledger>()?));
    /// # Ok(()) }
    /// ```
    pub fn in_crate(mut self, krate: impl Into<Cow<'static, str>>) -> Self {
        self.krate = krate.into();
        self
    }

    /// Sets an async init hook, run once after construction (for singletons during
    /// [`build`](crate::AppBuilder::build); for context protos on first
    /// [`get_async`](crate::ContextRef::get_async)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use di_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Pool { warm: AtomicBool }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool::default()))
    ///         .on_init(|pool: Arc<Pool>| async move {
    ///             pool.warm.store(true, Ordering::SeqCst);
    ///             Ok(())
    ///         }))
    ///     .build()
    ///     .await?;
    /// assert!(app.get_object::<Pool>()?.warm.load(Ordering::SeqCst)); // run by `build()`
    /// # Ok(()) }
    /// ```
    pub fn on_init<T, F, Fut>(mut self, hook: F) -> Self
    where
        T: Send + Sync + 'static,
        F: Fn(Arc<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.init = Some(erase_hook(hook));
        self
    }

    /// Sets the async completion hook of a context proto: run inside the scope when its work
    /// is done, newest object first, before the scope's output leaves (for HTTP: before the
    /// response is sent). This is where a unit of work commits; an error or a panic here is the
    /// scope's failure (di-http answers 500). See
    /// [`App::run_in_context`](crate::App::run_in_context) for the whole sequence. A singleton
    /// with a completion hook is refused by [`build`](crate::AppBuilder::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use di_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct UnitOfWork { committed: Mutex<bool> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<UnitOfWork>(|_| Ok(UnitOfWork::default()))
    ///         .on_complete(|uow: Arc<UnitOfWork>| async move {
    ///             *uow.committed.lock().unwrap() = true;
    ///             Ok(())
    ///         }))
    ///     .build()
    ///     .await?;
    /// let uow = app.try_run_in_context(async { app.get_object::<UnitOfWork>() }).await??;
    /// assert!(*uow.committed.lock().unwrap());
    /// # Ok(()) }
    /// ```
    pub fn on_complete<T, F, Fut>(mut self, hook: F) -> Self
    where
        T: Send + Sync + 'static,
        F: Fn(Arc<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.complete = Some(erase_hook(hook));
        self
    }

    /// Sets an async destroy hook, run once before the object is dropped (singletons on
    /// [`App::shutdown`](crate::App::shutdown), context objects when their scope ends).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use di_core::{App, ProtoDef};
    ///
    /// static CLOSED: AtomicUsize = AtomicUsize::new(0);
    /// struct Conn;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Conn>(|_| Ok(Conn))
    ///         .on_destroy(|_: Arc<Conn>| async {
    ///             CLOSED.fetch_add(1, Ordering::SeqCst);
    ///             Ok(())
    ///         }))
    ///     .build()
    ///     .await?;
    /// app.run_in_context(async { app.get_object::<Conn>().map(|_| ()) }).await?;
    /// assert_eq!(CLOSED.load(Ordering::SeqCst), 1); // when its scope ended
    /// app.run_in_context(async {}).await; // no `Conn` created, none destroyed
    /// assert_eq!(CLOSED.load(Ordering::SeqCst), 1);
    /// # Ok(()) }
    /// ```
    pub fn on_destroy<T, F, Fut>(mut self, hook: F) -> Self
    where
        T: Send + Sync + 'static,
        F: Fn(Arc<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.destroy = Some(erase_hook(hook));
        self
    }

    /// The object name.
    ///
    /// # Examples
    ///
    /// ```
    /// struct Clock;
    /// let def = di_core::ProtoDef::singleton::<Clock>(|_| Ok(Clock));
    /// assert_eq!(def.object_name(), "clock"); // tegg's default: the type in lowerCamelCase
    /// ```
    pub fn object_name(&self) -> &str {
        &self.name
    }

    /// The scope.
    ///
    /// # Examples
    ///
    /// ```
    /// struct Clock;
    /// let def = di_core::ProtoDef::singleton::<Clock>(|_| Ok(Clock));
    /// assert_eq!(def.scope(), di_core::Scope::Singleton);
    /// ```
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The type name.
    ///
    /// # Examples
    ///
    /// ```
    /// struct Clock;
    /// let def = di_core::ProtoDef::singleton::<Clock>(|_| Ok(Clock));
    /// assert!(def.type_name().ends_with("Clock"));
    /// ```
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    pub(crate) fn label(&self) -> String {
        format!("{} (\"{}\")", self.type_name, self.name)
    }
}

impl fmt::Debug for ProtoDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtoDef")
            .field("type", &self.type_name)
            .field("name", &self.name)
            .field("scope", &self.scope)
            .field("access", &self.access)
            .field("deps", &self.deps)
            .field("provides", &self.provides.iter().map(|p| p.type_name).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn erase_hook<T, F, Fut>(hook: F) -> Arc<DynHook>
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    Arc::new(move |obj: AnyArc| Box::pin(hook(downcast::<T>(obj))) as HookFuture)
}

/// The erased object as its own type: the one downcast every typed accessor goes through.
#[inline]
pub fn downcast<T: Send + Sync + 'static>(obj: AnyArc) -> Arc<T> {
    match obj.downcast::<T>() {
        Ok(t) => t,
        Err(_) => stored_as_another_type(),
    }
}

/// tegg's default object name: the last path segment of the type name in lowerCamelCase
/// (`my_app::UserService` becomes `userService`).
///
/// # Examples
///
/// ```
/// assert_eq!(di_core::registry::default_name("my_app::UserService"), "userService");
/// assert_eq!(di_core::registry::default_name("Wrapper<my_app::Inner>"), "wrapper");
/// ```
pub fn default_name(type_name: &str) -> String {
    let base = type_name.split('<').next().unwrap_or(type_name);
    let last = base.rsplit("::").next().unwrap_or(base);
    let mut chars = last.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A type registered as a proto by `#[singleton_proto]`, `#[context_proto]` or `#[config_proto]`.
///
/// Implemented by the macros; the compiler uses it to reject `#[inject]` of a type that is not a
/// proto. [`AppBuilder::link`](crate::AppBuilder::link) uses [`Proto::descriptor`] to register a
/// proto even where the linker dropped its `inventory` entry.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
/// use di_core::{App, DiError, Proto, Resolver, Scope};
///
/// struct Clock;
///
/// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Clock))
/// }
///
/// // What `#[singleton_proto]` on `Clock` implements.
/// impl Proto for Clock {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Clock>("clock", Scope::Singleton, clock, cast_to::<Clock>);
/// }
///
/// /// An App of `T` alone: code generic over protos.
/// async fn app_of<T: Proto>() -> Result<App, DiError> {
///     App::builder().without_inventory().link::<T>().build().await
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = app_of::<Clock>().await?;
/// assert!(app.get_object::<Clock>().is_ok());
/// assert_eq!(app.proto_count(), 1);
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a proto",
    label = "not annotated with `#[singleton_proto]`, `#[context_proto]` or `#[config_proto]`",
    note = "annotate `{Self}` (or an `impl` block with its constructor), inject a `dyn Trait` that a proto provides, or, if `{Self}` is registered by hand with `ProtoDef`, mark the dependency `#[inject(external)]`"
)]
pub trait Proto: Send + Sync + 'static {
    /// Whether a context scope builds it asynchronously: a context proto with an async
    /// constructor or init hook, or one that takes such a context proto by value. Always
    /// `false` for singletons, which exist before any scope (the default). The macros check it
    /// where a `ContextRef<Self>` is injected, so that `get()` cannot meet it at run time.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, HookFuture, ProtoDescriptor, cast_to};
    /// use di_core::{App, DiError, Proto, Resolver, Scope};
    ///
    /// struct Session;
    ///
    /// fn session(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Session))
    /// }
    /// fn load(_: AnyArc) -> HookFuture {
    ///     Box::pin(async { Ok(()) })
    /// }
    ///
    /// // A context proto with an init hook: a scope builds it asynchronously.
    /// impl Proto for Session {
    ///     const NEEDS_ASYNC: bool = true;
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Session>("session", Scope::Context, session, cast_to::<Session>).init(load);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// assert!(<Session as Proto>::NEEDS_ASYNC);
    /// let app = App::builder().without_inventory().link::<Session>().build().await?;
    /// let (sync, not_sync) = app
    ///     .run_in_context(async { (app.get_object::<Session>().is_ok(), app.get_object_async::<Session>().await.is_ok()) })
    ///     .await;
    /// assert!(!sync && not_sync); // reached with `get_async`, not `get`
    /// # Ok(()) }
    /// ```
    const NEEDS_ASYNC: bool = false;

    /// The proto's static description, the one submitted to `inventory`. A constant rather
    /// than a function so that the macros generate no code for it: in a large project every
    /// item per proto shows in the build time (issue 13).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
    /// use di_core::{Access, App, DiError, Proto, Resolver, Scope};
    ///
    /// struct Tracer { id: u32 }
    ///
    /// fn tracer(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Tracer { id: 7 }))
    /// }
    ///
    /// // Built in `const` context, as `#[context_proto]` writes it.
    /// impl Proto for Tracer {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Tracer>("tracer", Scope::Context, tracer, cast_to::<Tracer>)
    ///             .access(Access::Public, module_path!());
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// // Linked twice (as `link` and `inventory` may both do): registered once.
    /// let app = App::builder().without_inventory().link::<Tracer>().link::<Tracer>().build().await?;
    /// assert_eq!(app.proto_count(), 1);
    /// let id = app.run_in_context(async { app.get_object::<Tracer>().map(|t| t.id) }).await?;
    /// assert_eq!(id, 7);
    /// # Ok(()) }
    /// ```
    const DESCRIPTOR: ProtoDescriptor;

    /// [`DESCRIPTOR`](Self::DESCRIPTOR), as a `'static` reference.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
    /// use di_core::{DiError, Proto, Resolver, Scope};
    ///
    /// struct Clock;
    ///
    /// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Clock))
    /// }
    ///
    /// impl Proto for Clock {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Clock>("clock", Scope::Singleton, clock, cast_to::<Clock>);
    /// }
    ///
    /// // What `AppBuilder::link` keeps, and a tool can list.
    /// let descriptor: &'static ProtoDescriptor = Clock::descriptor();
    /// let shown = format!("{descriptor:?}");
    /// assert!(shown.contains("name: \"clock\"") && shown.contains("scope: Singleton"), "{shown}");
    /// ```
    fn descriptor() -> &'static ProtoDescriptor {
        const { &Self::DESCRIPTOR }
    }
}

/// A proto built once per App: what a singleton may take by value (`Arc<T>`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
/// use di_core::{App, DiError, Proto, Resolver, Scope, SingletonProto};
///
/// struct Clock;
///
/// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Clock))
/// }
///
/// // What `#[singleton_proto]` on `Clock` implements.
/// impl Proto for Clock {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Clock>("clock", Scope::Singleton, clock, cast_to::<Clock>);
/// }
/// impl SingletonProto for Clock {}
///
/// /// The App's `T`: only a singleton is the same object everywhere.
/// fn shared<T: SingletonProto>(app: &App) -> Result<Arc<T>, DiError> {
///     app.get_object::<T>()
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Clock>().build().await?;
/// assert!(Arc::ptr_eq(&shared::<Clock>(&app)?, &shared::<Clock>(&app)?));
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "a singleton cannot take `{Self}` by value: it is not an annotated singleton",
    label = "`{Self}` is not a singleton proto",
    note = "if `{Self}` is a context proto, hold `ContextRef<{Self}>`, which resolves the current request's object; if it is a transient proto, hold `Provider<{Self}>`, which builds a new one per call; if it is registered by hand with `ProtoDef`, mark the dependency `#[inject(external)]` (checked at build instead); otherwise annotate it with `#[singleton_proto]`"
)]
pub trait SingletonProto: Proto {}

/// A proto built per context scope: what `ContextRef<T>` may point at.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
/// use di_core::{App, ContextProto, DiError, Proto, Resolver, Scope};
///
/// struct Tracer;
///
/// fn tracer(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Tracer))
/// }
///
/// // What `#[context_proto]` on `Tracer` implements.
/// impl Proto for Tracer {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Tracer>("tracer", Scope::Context, tracer, cast_to::<Tracer>);
/// }
/// impl ContextProto for Tracer {}
///
/// /// The current scope's `T`.
/// fn current<T: ContextProto>(app: &App) -> Result<Arc<T>, DiError> {
///     app.get_object::<T>()
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Tracer>().build().await?;
/// let same = app
///     .run_in_context(async { Ok::<_, DiError>(Arc::ptr_eq(&current::<Tracer>(&app)?, &current::<Tracer>(&app)?)) })
///     .await?;
/// assert!(same); // one per scope
/// assert!(current::<Tracer>(&app).is_err()); // and none outside a scope
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "`ContextRef<{Self}>` needs a context proto",
    label = "`{Self}` is not a context proto",
    note = "a singleton is injected as `Arc<{Self}>`; a per-request type is annotated with `#[context_proto]`; a context proto registered by hand with `ProtoDef` is injected with `#[inject(external)]`"
)]
pub trait ContextProto: Proto {}

/// A proto built anew for every injection: what `Provider<T>` may point at.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use di_core::registry::{AnyArc, ProtoDescriptor, cast_to};
/// use di_core::{App, DiError, Proto, Resolver, Scope, TransientProto};
///
/// static NEXT: AtomicU64 = AtomicU64::new(1);
/// struct Ticket(u64);
///
/// fn ticket(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Ticket(NEXT.fetch_add(1, Ordering::Relaxed))))
/// }
///
/// // What `#[transient_proto]` on `Ticket` implements.
/// impl Proto for Ticket {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Ticket>("ticket", Scope::Transient, ticket, cast_to::<Ticket>);
/// }
/// impl TransientProto for Ticket {}
///
/// /// A new `T`.
/// fn fresh<T: TransientProto>(app: &App) -> Result<Arc<T>, DiError> {
///     app.get_object::<T>()
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Ticket>().build().await?;
/// assert_eq!((fresh::<Ticket>(&app)?.0, fresh::<Ticket>(&app)?.0), (1, 2));
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "`Provider<{Self}>` needs a transient proto",
    label = "`{Self}` is not a transient proto",
    note = "a singleton is injected as `Arc<{Self}>`, a context proto as `ContextRef<{Self}>`; a proto built per call is annotated with `#[transient_proto]`"
)]
pub trait TransientProto: Proto {}
