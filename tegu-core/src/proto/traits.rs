//! The traits the attribute macros implement: `Proto` (its descriptor) and the scope markers
//! that compile-time checks read.

use std::marker::PhantomData;

use super::descriptor::ProtoDescriptor;
use super::kinds::Lifetime;
use crate::erased::AnyArc;
use crate::error::DiError;
use crate::resolver::Resolver;

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
/// use tegu_core::registry::{AnyArc, ProtoDescriptor};
/// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
///
/// struct Clock;
///
/// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Clock))
/// }
///
/// // What `#[singleton_proto]` on `Clock` implements.
/// impl Proto for Clock {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Clock>("clock", Lifetime::Singleton, clock);
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
    note = "annotate `{Self}` (or an `impl` block with its constructor), inject a `dyn Trait` that a proto provides, or, if `{Self}` is registered by hand with `ProtoDef`, mark the dependency `#[inject(external)]`",
    note = "if `{Self}` is a lineage type (it implements `Travels`), declare it with `tegu_core::lineage_type!({Self});`"
)]
pub trait Proto: Sized + Send + Sync + 'static {
    /// Whether a context scope builds it asynchronously: a context proto with an async
    /// constructor or init hook, or one that takes such a context proto by value. Always
    /// `false` for singletons, which exist before any scope (the default). The macros check it
    /// where a `ContextRef<Self>` is injected, so that `get()` cannot meet it at run time.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, UnitFuture, ProtoDescriptor};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
    ///
    /// struct Session;
    ///
    /// fn session(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Session))
    /// }
    /// fn load(_: AnyArc) -> UnitFuture {
    ///     Box::pin(async { Ok(()) })
    /// }
    ///
    /// // A context proto with an init hook: a scope builds it asynchronously.
    /// impl Proto for Session {
    ///     const NEEDS_ASYNC: bool = true;
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Session>("session", Lifetime::Context, session).init(load);
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

    /// The proto's static description, the one the macros register. A constant rather than a
    /// function so that the macros generate no code for it: in a large project every item per
    /// proto shows in the build time.
    ///
    /// A hand-written impl sets it. Its default describes a singleton under its default name
    /// (the type's, in lowerCamelCase), built by the factory the macros write: what
    /// `#[singleton_proto]` on a proto with no injected dependency and no option relies on, so
    /// that such a proto costs its crate no constant of its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor};
    /// use tegu_core::{registry::{Access, Lifetime}, App, DiError, Proto, Resolver};
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
    ///         ProtoDescriptor::new::<Tracer>("tracer", Lifetime::Context, tracer)
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
    const DESCRIPTOR: ProtoDescriptor =
        ProtoDescriptor::new::<Self>("", Lifetime::Singleton, Self::__di_factory::<()>).unsited();

    /// The factory of a proto whose descriptor is the default one: written by the macros,
    /// generic over `()` so that its code sits apart from the user's (`docs/decisions.md`,
    /// "Compile cost"). Not API. An impl that sets neither this nor `DESCRIPTOR` fails to build
    /// where its descriptor is used (`NoFactory`).
    #[doc(hidden)]
    fn __di_factory<G>(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
        #[allow(clippy::let_unit_value)] // the constant is the point: evaluated for `Self` only
        let () = NoFactory::<Self>::FAILS;
        unreachable!("`NoFactory::FAILS` fails the build")
    }

    /// The object a factory the macros write has made, as its result. Not API.
    #[doc(hidden)]
    fn __di_made(self) -> Result<AnyArc, DiError> {
        Ok(std::sync::Arc::new(self))
    }

    /// [`DESCRIPTOR`](Self::DESCRIPTOR), as a `'static` reference.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor};
    /// use tegu_core::{DiError, Proto, Resolver, registry::Lifetime};
    ///
    /// struct Clock;
    ///
    /// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Clock))
    /// }
    ///
    /// impl Proto for Clock {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Clock>("clock", Lifetime::Singleton, clock);
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

/// Fails the build of a `Proto` impl whose default `DESCRIPTOR` is used while it has no
/// factory (a hand-written impl that sets neither): a constant of a generic type, evaluated
/// for that type only, where its descriptor is used (never for the impls that set either).
struct NoFactory<T>(PhantomData<T>);

impl<T> NoFactory<T> {
    const FAILS: () = panic!(
        "a hand-written `Proto` impl must set `DESCRIPTOR`: the default calls the `__di_factory` that only the macros write"
    );
}

/// A proto built once per App: what a singleton may take by value (`Arc<T>`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, ProtoDescriptor};
/// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime, SingletonProto};
///
/// struct Clock;
///
/// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Clock))
/// }
///
/// // What `#[singleton_proto]` on `Clock` implements.
/// impl Proto for Clock {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Clock>("clock", Lifetime::Singleton, clock);
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
/// use tegu_core::registry::{AnyArc, ProtoDescriptor};
/// use tegu_core::{App, ContextProto, DiError, Proto, Resolver, registry::Lifetime};
///
/// struct Tracer;
///
/// fn tracer(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Tracer))
/// }
///
/// // What `#[context_proto]` on `Tracer` implements.
/// impl Proto for Tracer {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Tracer>("tracer", Lifetime::Context, tracer);
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
    note = "a singleton is injected as `Arc<{Self}>`; a per-request type is annotated with `#[context_proto]`; a lineage type (one that implements `Travels`) is declared with `tegu_core::lineage_type!({Self});`; a context proto registered by hand with `ProtoDef` is injected with `#[inject(external)]`"
)]
pub trait ContextProto: Proto {}

/// A proto built anew for every injection: what `Provider<T>` may point at.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use tegu_core::registry::{AnyArc, ProtoDescriptor};
/// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime, TransientProto};
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
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Ticket>("ticket", Lifetime::Transient, ticket);
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
