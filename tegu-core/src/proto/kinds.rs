//! The small vocabularies of a proto: its lifetime, who may inject it, and how a dependency is
//! injected.

/// How long a proto's objects live: once per App, once per context scope, or once per
/// injection.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, DiError, ProtoDef, registry::Lifetime};
///
/// struct Settings(u8);
/// struct Request(u8);
/// struct Buffer(u8);
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder()
///     .register(ProtoDef::new::<Settings>(Lifetime::Singleton, |_| Ok(Settings(0))))
///     .register(ProtoDef::new::<Request>(Lifetime::Context, |_| Ok(Request(0))))
///     .register(ProtoDef::new::<Buffer>(Lifetime::Transient, |_| Ok(Buffer(0))))
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
pub enum Lifetime {
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
/// use tegu_core::{registry::{Access, Dependency, InjectKind}, App, AppBuilder, DiError, ProtoDef};
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
/// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef};
///
/// trait Plugin: Send + Sync {}
/// struct Gzip;
/// impl Plugin for Gzip {}
/// struct Cache;
/// struct Server { plugins: Vec<Arc<dyn Plugin>>, cache: Option<Arc<Cache>> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    /// `Vec<Arc<T>>`: every provider, ordered by their `order` (0 unless set), then object name,
    /// then type name.
    All,
    /// `Keyed<T>`: every provider, by object name.
    Keyed,
    /// `Provider<T>`: a handle that builds a new transient `T` per call.
    Provider,
}

impl InjectKind {
    pub(crate) fn wrap(self, ty: &str) -> String {
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
