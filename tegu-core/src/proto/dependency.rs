//! What a proto needs: one `Dependency` per injected field or parameter.

use std::borrow::Cow;

use std::any::TypeId;
use std::fmt;

use super::kinds::InjectKind;

/// One declared dependency of a proto: a type, how it is injected, and an optional qualifier.
///
/// Dependencies are positional: the factory asks the [`Resolver`](crate::Resolver) for dependency `i` with the
/// same type and kind.
///
/// # Examples
///
/// ```
/// use tegu_core::{registry::{Dependency, InjectKind}};
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
    /// Where it is declared: the field's type, or the call that made it.
    pub(crate) site: Option<crate::error::Site>,
}

impl Dependency {
    /// A dependency on `T` (a proto type or a `dyn Trait`), injected as `kind`, optionally
    /// qualified by an object name. Usable in `const` and `static` items.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{registry::{Dependency, InjectKind}};
    ///
    /// struct Db;
    /// // What `#[inject(name = "primary")] db: Arc<Db>` declares.
    /// const DEP: Dependency = Dependency::new::<Db>(InjectKind::Arc, Some("primary"));
    /// assert_eq!((DEP.kind(), DEP.qualifier()), (InjectKind::Arc, Some("primary")));
    /// ```
    #[track_caller]
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
            site: Some(std::panic::Location::caller()),
        }
    }

    /// Like [`Dependency::new`], with a qualifier computed at run time (for generated graphs).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{registry::{Dependency, InjectKind}};
    ///
    /// struct Db;
    /// // A qualifier chosen at run time (`#[inject(name = "...")]` with a literal uses `new`).
    /// let name = format!("shard{}", 3);
    /// let dep = Dependency::named::<Db>(InjectKind::Arc, name);
    /// assert_eq!(dep.qualifier(), Some("shard3"));
    /// ```
    #[track_caller]
    pub fn named<T: ?Sized + 'static>(kind: InjectKind, qualifier: impl Into<String>) -> Self {
        Dependency { qualifier: Some(Cow::Owned(qualifier.into())), ..Dependency::new::<T>(kind, None) }
    }

    /// Records the field this dependency fills, for error messages and graph export.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct Db;
    /// struct Repo { db: Arc<Db> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    /// ([`DiError::ContextRefToAsync`](crate::DiError::ContextRefToAsync)) instead of `get()` failing in a request. The macros set
    /// it on every `ContextRef<T>` field (not on `AsyncContextRef<T>`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, DiError, ProtoDef};
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
    /// use tegu_core::{registry::{Dependency, InjectKind}};
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
    /// use tegu_core::{registry::{Dependency, InjectKind}};
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
    /// use tegu_core::{registry::{Dependency, InjectKind}};
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

/// A field of a proto that its factory fills with `Default` (a field without `#[inject]`) and
/// whose type holds a `T` the App may have as a proto: `Arc<T>`, `Option<Arc<T>>`,
/// `Vec<Arc<T>>`, `Box<T>` or `Weak<T>`. `build()` and `check()` refuse one whose `T` is a proto
/// of the App ([`DiError::UninjectedProto`](crate::DiError::UninjectedProto)): it would hold a
/// private `T` (or none) instead of the App's. The macros record each such field; they refuse
/// one of a `T` that implements [`Proto`](crate::Proto) at compile time, so this catches a `T`
/// registered by hand (`ProtoDef::singleton::<T>(..)`).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, Lifetime, ProtoDescriptor, Unmarked};
/// use tegu_core::{App, DiError, Proto, ProtoDef, Resolver};
///
/// #[derive(Default)]
/// struct HttpClient;
/// struct Fetcher {
///     client: Arc<HttpClient>, // no `#[inject]`: `Default` makes a second client
/// }
///
/// fn fetcher(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Fetcher { client: Arc::default() }))
/// }
///
/// // What `#[singleton_proto]` writes for `Fetcher`.
/// impl Proto for Fetcher {
///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Fetcher>("", Lifetime::Singleton, fetcher)
///         .unmarked(&[Unmarked::new::<HttpClient>("client")]);
/// }
///
/// let app = || App::builder().without_inventory().link::<Fetcher>();
/// // The App registers a client by hand: the field would not be it.
/// let error = app().register(ProtoDef::singleton::<HttpClient>(|_| Ok(HttpClient))).check().unwrap_err();
/// assert!(matches!(error, DiError::UninjectedProto { field: "client", .. }), "{error}");
/// // Without one, the field is the proto's own state.
/// assert!(app().check().is_ok());
/// ```
#[derive(Clone, Copy)]
pub struct Unmarked {
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) type_name: fn() -> &'static str,
    pub(crate) field: &'static str,
}

impl Unmarked {
    /// Field `field`, which holds a `T`. Usable in `const` and `static` items.
    pub const fn new<T: ?Sized + 'static>(field: &'static str) -> Self {
        Unmarked { type_id: TypeId::of::<T>, type_name: core::any::type_name::<T>, field }
    }
}

impl fmt::Debug for Unmarked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unmarked").field("type", &(self.type_name)()).field("field", &self.field).finish()
    }
}
