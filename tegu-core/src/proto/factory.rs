//! How a proto is built: the factory a descriptor names, and the forms a definition holds.

use std::any::TypeId;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::section::LoadFn;
use crate::erased::{AnyArc, BuildFuture, DynHook, HookFn, UnitFuture};
use crate::error::DiError;
use crate::resolver::Resolver;

/// A type-erased factory in a static descriptor.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, FactoryFn, ProtoDescriptor};
/// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
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
///         ProtoDescriptor::new::<Clock>("clock", Lifetime::Singleton, FACTORY);
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Clock>().build().await?;
/// assert_eq!(app.get_object::<Clock>()?.started, 42);
/// # Ok(()) }
/// ```
pub type FactoryFn = fn(&Resolver<'_>) -> Result<AnyArc, DiError>;

/// A type-erased async factory in a static descriptor: it takes its dependencies from the
/// [`Resolver`] at once and returns the construction to await.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, AsyncFactoryFn, BuildFuture, ProtoDescriptor};
/// use tegu_core::{App, registry::{Dependency, InjectKind, Lifetime}, DiError, Proto, Resolver};
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
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Url>("url", Lifetime::Singleton, url);
/// }
/// impl Proto for Client {
///     const DESCRIPTOR: ProtoDescriptor =
///         ProtoDescriptor::new_async::<Client>("client", Lifetime::Singleton, CLIENT).deps(CLIENT_DEPS);
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Url>().link::<Client>().build().await?;
/// assert_eq!(app.get_object::<Client>()?.url, "http://db");
/// # Ok(()) }
/// ```
pub type AsyncFactoryFn = fn(&Resolver<'_>) -> Result<BuildFuture, DiError>;

pub(crate) type DynFactory = dyn Fn(&Resolver<'_>) -> Result<AnyArc, DiError> + Send + Sync;

pub(crate) type DynAsyncFactory = dyn Fn(&Resolver<'_>) -> Result<BuildFuture, DiError> + Send + Sync;

/// How a proto's object is made.
#[derive(Clone)]
pub(crate) enum Factory {
    /// By a descriptor's function, as the descriptor names it: `const`, so with nothing to
    /// remember whether its object's type was checked. The graph holds it as `Sync`
    /// ([`SyncFactory::Fn`]; `ProtoDescriptor::arm`).
    Fn(FactoryFn),
    /// By a function, now.
    Sync(SyncFactory),
    /// By an async constructor, awaited.
    Async(AsyncFactory),
    /// From the configuration, read when the App is built (and then replaced by `Sync`).
    Config(ConfigDef),
}

/// A lifecycle hook (init, complete, destroy): a descriptor's `fn`, or a closure of
/// [`ProtoDef`](crate::ProtoDef)'s `on_*` methods.
#[derive(Clone)]
pub(crate) enum Hook {
    Fn(HookFn),
    Closure(Arc<DynHook>),
}

impl Hook {
    /// The hook's future for `obj`.
    pub(crate) fn call(&self, obj: AnyArc) -> UnitFuture {
        match self {
            Hook::Fn(f) => f(obj),
            Hook::Closure(f) => f(obj),
        }
    }
}

/// A sync factory: a descriptor's `fn` (called directly: a context object in a large graph is
/// built once per request, from cold code, so each indirection shows) or a closure (from
/// [`ProtoDef`](crate::ProtoDef)'s constructors).
#[derive(Clone)]
pub(crate) enum SyncFactory {
    /// A descriptor's function, which returns its object erased, and the proto's type, which
    /// the first object it returns is checked to be (see [`OwnType`]).
    Fn(FactoryFn, Arc<OwnType>),
    /// A closure of [`ProtoDef`](crate::ProtoDef)'s constructors, typed: its object is of the
    /// proto's type.
    Closure(Arc<DynFactory>),
}

/// An async constructor: a descriptor's `fn`, or a closure of
/// [`ProtoDef::new_async`](crate::ProtoDef::new_async).
#[derive(Clone)]
pub(crate) enum AsyncFactory {
    Fn(AsyncFactoryFn),
    Closure(Arc<DynAsyncFactory>),
}

impl AsyncFactory {
    /// The dependencies now, from `r`; the construction to await.
    pub(crate) fn call(&self, r: &Resolver<'_>) -> Result<BuildFuture, DiError> {
        match self {
            AsyncFactory::Fn(f) => f(r),
            AsyncFactory::Closure(f) => f(r),
        }
    }
}

/// A descriptor's own type, for [`SyncFactory::Fn`]'s check: a hand-written function could
/// return an object of another type, which a consumer's [`Own::take`](crate::private::Own::take)
/// refuses with an abort (it must not unwind). The first object the function returns is
/// checked, and another type refused with a panic naming the proto, where it returns (the
/// caller's, as any panic of a factory: `build()`, or the request); the later ones are not,
/// which saves every context object built per request a check (`take` still checks each).
pub(crate) struct OwnType {
    pub(crate) id: TypeId,
    pub(crate) name: fn() -> &'static str,
    pub(crate) checked: AtomicBool,
}

impl SyncFactory {
    #[inline]
    pub(crate) fn call(&self, r: &Resolver<'_>) -> Result<AnyArc, DiError> {
        match self {
            SyncFactory::Fn(f, own) if own.checked.load(Ordering::Relaxed) => f(r),
            SyncFactory::Fn(f, own) => first_call(*f, r, own),
            SyncFactory::Closure(f) => f(r),
        }
    }
}

/// [`SyncFactory::call`] until a descriptor's function returned its first object: the call,
/// and the object's type checked.
#[cold]
#[inline(never)]
fn first_call(f: FactoryFn, r: &Resolver<'_>, own: &OwnType) -> Result<AnyArc, DiError> {
    let obj = f(r)?;
    if (*obj).type_id() != own.id {
        panic!(
            "the factory of `{}` returned an object of another type (a hand-written descriptor's factory must return its proto's type)",
            (own.name)()
        );
    }
    own.checked.store(true, Ordering::Relaxed);
    Ok(obj)
}

/// A config section: where it is and how to read it.
#[derive(Clone)]
pub(crate) struct ConfigDef {
    pub(crate) prefix: Cow<'static, str>,
    pub(crate) instances: bool,
    pub(crate) load: LoadFn,
    /// A reloadable section: how to make the proto of its `ConfigRef<T>`, given the App's live
    /// configuration (erased), the section's index there and the section's object name.
    pub(crate) live: Option<LiveFn>,
}

/// [`ConfigDef::live`].
pub(crate) type LiveFn = fn(AnyArc, usize, Cow<'static, str>) -> crate::proto::descriptor::ProtoDescriptor;
