//! A proto's record: what the attribute macros write (a `const`), what `ProtoDef` builds at run
//! time, and what an App holds for each of its protos.

use crate::config::section::LoadFn;
use crate::erased::{HookFn, UnitFuture};
use crate::error::{BoxError, DiError, Label, Site};
use crate::proto::dependency::{Dependency, Unmarked};
use crate::proto::factory::{AsyncFactory, AsyncFactoryFn, ConfigDef, Factory, FactoryFn, Hook, OwnType, SyncFactory};
use crate::proto::kinds::{Access, Lifetime};
use crate::proto::provide::{Provide, ProvideCast};

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The static description of a proto, as `#[singleton_proto]` and `#[context_proto]` register
/// it: a `static` in a link section on Linux and Android, an [`inventory`] submission elsewhere
/// (`inventory::submit!` of a descriptor registers one by hand on every target). Built in
/// `const` context; every callback is a plain `fn` pointer.
///
/// It is the one record of a proto: [`ProtoDef`], the builder of hand-written registrations,
/// builds one with closures and names computed at run time, and the App holds one per proto.
///
/// # Examples
///
/// What `#[context_proto]` on `Tracer` generates, linked into an App:
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::registry::{AnyArc, ProtoDescriptor};
/// use tegu_core::{registry::{Access, Lifetime}, App, ContextProto, DiError, Proto, Resolver};
///
/// struct Tracer { id: u32 }
///
/// fn tracer(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(Arc::new(Tracer { id: 7 }))
/// }
///
/// impl Proto for Tracer {
///     const DESCRIPTOR: ProtoDescriptor =
///         ProtoDescriptor::new::<Tracer>("tracer", Lifetime::Context, tracer)
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
#[derive(Clone)]
pub struct ProtoDescriptor {
    /// Its type.
    pub(crate) ty: TypeRef,
    /// Its object name; empty for the type's default until an App takes it.
    pub(crate) name: Cow<'static, str>,
    pub(crate) scope: Lifetime,
    pub(crate) access: Access,
    /// The crate private protos are checked against, or a module path in it; empty for its
    /// type's crate until an App takes it.
    pub(crate) krate: Cow<'static, str>,
    pub(crate) deps: Cow<'static, [Dependency]>,
    /// The fields its factory fills with `Default` that hold a type the App may have: see
    /// [`Unmarked`](crate::registry::Unmarked).
    pub(crate) unmarked: &'static [Unmarked],
    /// The types it can be injected as besides its own (which is implicit: see [`Self::provided`]).
    pub(crate) provides: Cow<'static, [Provide]>,
    pub(crate) factory: Factory,
    /// A template: one instance per proto of this type (usually a multi-instance config).
    pub(crate) instances_of: Option<TypeRef>,
    /// Registered only under this profile.
    pub(crate) profile: Option<Cow<'static, str>>,
    /// A singleton built on first use.
    pub(crate) lazy: bool,
    /// Where it comes among its type's providers in a collection: lower first.
    pub(crate) order: i32,
    pub(crate) init: Option<Hook>,
    pub(crate) complete: Option<Hook>,
    pub(crate) destroy: Option<Hook>,
    /// Protos this one brings into every App it is in: see [`ProtoDef::also`].
    pub(crate) also: Cow<'static, [fn() -> ProtoDef]>,
    /// The configuration its factory reads with `Config::get`: see [`ProtoDef::reads_config`].
    pub(crate) config_reads: Cow<'static, [crate::config::ConfigReader]>,
    /// A lineage type's travel, and whether its factory can build a value (else only seeds).
    pub(crate) travel: Option<(&'static crate::lineage::Travel, bool)>,
    /// A context proto a scope has only as a seed: see [`ProtoDef::seed_only`].
    pub(crate) seed_only: bool,
    /// Where it is declared: the attribute's type, or the call that made the record.
    pub(crate) site: Option<Site>,
}

/// A proto registered by hand on the [`AppBuilder`](crate::AppBuilder): the builder of a
/// [`ProtoDescriptor`](crate::registry::ProtoDescriptor), the one record of a proto, with
/// closures and names computed at run time, so a program can register thousands of generated
/// protos, or many named instances of one type.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef};
///
/// struct Db { url: String }
/// struct Repo { db: Arc<Db> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
pub struct ProtoDef(pub(crate) ProtoDescriptor);

impl ProtoDescriptor {
    /// A proto of type `T` named `name` in `scope`, built by `factory`, which returns the
    /// object as an [`AnyArc`](crate::registry::AnyArc) of a `T`. An empty `name` is tegg's
    /// default: the type's name in lowerCamelCase ([`default_name`](crate::registry::default_name)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
    ///
    /// struct Clock { started: u64 }
    ///
    /// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Clock { started: 42 }))
    /// }
    ///
    /// impl Proto for Clock {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Clock>("systemClock", Lifetime::Singleton, clock);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Clock>().build().await?;
    /// assert_eq!(app.get_object_named::<Clock>("systemClock")?.started, 42);
    ///
    /// // An empty name is the type's own, in lowerCamelCase.
    /// const UNNAMED: ProtoDescriptor = ProtoDescriptor::new::<Clock>("", Lifetime::Singleton, clock);
    /// assert!(format!("{UNNAMED:?}").contains("name: \"clock\""));
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub const fn new<T: Send + Sync + 'static>(name: &'static str, scope: Lifetime, factory: FactoryFn) -> Self {
        Self::with::<T>(name, scope, Factory::Fn(factory))
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
    /// use tegu_core::registry::{AnyArc, BuildFuture, ProtoDescriptor};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
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
    ///         ProtoDescriptor::new_async::<Pool>("pool", Lifetime::Singleton, connect);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Pool>().build().await?;
    /// assert_eq!(app.get_object::<Pool>()?.size, 4);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub const fn new_async<T: Send + Sync + 'static>(
        name: &'static str,
        scope: Lifetime,
        factory: AsyncFactoryFn,
    ) -> Self {
        Self::with::<T>(name, scope, Factory::Async(AsyncFactory::Fn(factory)))
    }

    /// A singleton whose value is the configuration section at `prefix`, deserialized by `load`
    /// ([`load_section::<T>`](crate::registry::load_section)) when the App is built. With `instances`,
    /// each table under `prefix` is an instance, named by its key.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::registry::{ProtoDescriptor, load_section};
    /// use tegu_core::{App, DiError, Proto};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct DbConfig { url: String }
    ///
    /// // What `#[config_proto(prefix = "db")]` generates.
    /// impl Proto for DbConfig {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::config::<DbConfig>("dbConfig", "db", false, load_section::<DbConfig>);
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
    #[track_caller]
    pub const fn config<T: Send + Sync + 'static>(
        name: &'static str,
        prefix: &'static str,
        instances: bool,
        load: LoadFn,
    ) -> Self {
        let section = ConfigDef { prefix: Cow::Borrowed(prefix), instances, load, live: None };
        Self::with::<T>(name, Lifetime::Singleton, Factory::Config(section))
    }

    /// The record every constructor starts from: `T`'s, named `name`, public, with no
    /// dependency and no option.
    #[track_caller]
    pub(crate) const fn with<T: Send + Sync + 'static>(name: &'static str, scope: Lifetime, factory: Factory) -> Self {
        ProtoDescriptor {
            ty: TypeRef::of::<T>(),
            name: Cow::Borrowed(name),
            scope,
            access: Access::Public,
            krate: Cow::Borrowed(""),
            deps: Cow::Borrowed(&[]),
            unmarked: &[],
            provides: Cow::Borrowed(&[]),
            factory,
            instances_of: None,
            profile: None,
            lazy: false,
            order: 0,
            init: None,
            complete: None,
            destroy: None,
            also: Cow::Borrowed(&[]),
            config_reads: Cow::Borrowed(&[]),
            travel: None,
            seed_only: false,
            site: Some(Location::caller()),
        }
    }

    /// The context proto of lineage type `T` named `name` (empty: the type's own): a scope has
    /// a `T` only when seeded with one, or when it runs work a request with one caused. What
    /// [`lineage_type!`](crate::lineage_type) implements `Proto` with; see
    /// [`ProtoDef::lineage`](crate::ProtoDef::lineage).
    #[track_caller]
    pub const fn lineage<T: crate::lineage::Travels>(name: &'static str) -> Self {
        let mut descriptor = Self::new::<T>(name, Lifetime::Context, no_lineage_value::<T>);
        descriptor.travel = Some((crate::lineage::travel::<T>(), false));
        descriptor
    }

    /// Makes a singleton lazy: validated with the graph, built on first use (unless an eagerly
    /// built proto takes it by value).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
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
    ///         ProtoDescriptor::new::<Geo>("geo", Lifetime::Singleton, geo).lazy();
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
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor, load_section};
    /// use tegu_core::{App, registry::{Dependency, InjectKind, Lifetime}, DiError, Proto, Resolver};
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
    ///         "redisConfig", "redis", true, load_section::<RedisConfig>,
    ///     );
    /// }
    /// // `#[singleton_proto(instances_of = RedisConfig)]`: one client per section.
    /// impl Proto for Redis {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Redis>("redis", Lifetime::Singleton, redis)
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
        self.instances_of = Some(TypeRef::of::<C>());
        self
    }

    /// Registers this proto only when `profile` is the App's active profile
    /// ([`AppBuilder::profile`](crate::AppBuilder::profile)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
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
    ///         ProtoDescriptor::new::<FakeMailer>("fakeMailer", Lifetime::Singleton, fake_mailer)
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
        set(&mut self.profile, Some(Cow::Borrowed(profile)));
        self
    }

    /// Where this proto comes in the collections that gather its type's providers
    /// (`Vec<Arc<dyn Trait>>`): lower first, 0 by default, ties by object name
    /// ([`ProtoDef::order`](crate::ProtoDef::order) has an example).
    pub const fn order(mut self, order: i32) -> Self {
        self.order = order;
        self
    }

    /// Marks a context proto whose object a scope has only when it is given one where it opens,
    /// as [`ProtoDef::seed_only`](crate::ProtoDef::seed_only) does.
    pub const fn seed_only(mut self) -> Self {
        self.seed_only = true;
        self
    }

    /// The protos this one brings into every App it is in, as
    /// [`ProtoDef::also`](crate::ProtoDef::also) does.
    pub const fn also(mut self, makes: &'static [fn() -> ProtoDef]) -> Self {
        set(&mut self.also, Cow::Borrowed(makes));
        self
    }

    /// The fields the factory fills with `Default` that hold a type the App may have as a proto
    /// (`Arc<T>`, `Box<T>`, ... without `#[inject]`), which `build()` refuses where it has
    /// ([`Unmarked`] has an example).
    pub const fn unmarked(mut self, fields: &'static [Unmarked]) -> Self {
        self.unmarked = fields;
        self
    }

    /// The sections the factory reads with `Config::get`, as
    /// [`ProtoDef::reads_config`](crate::ProtoDef::reads_config) declares them.
    pub const fn reads_config(mut self, readers: &'static [crate::config::ConfigReader]) -> Self {
        set(&mut self.config_reads, Cow::Borrowed(readers));
        self
    }

    /// Sets the declared dependencies, in the order the factory asks for them.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor};
    /// use tegu_core::{App, registry::{Dependency, InjectKind, Lifetime}, DiError, Proto, Resolver};
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
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Db>("db", Lifetime::Singleton, db);
    /// }
    /// impl Proto for Repo {
    ///     // `#[inject] db: Arc<Db>`
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Repo>("repo", Lifetime::Singleton, repo)
    ///         .deps(const { &[Dependency::new::<Db>(InjectKind::Arc, None).field("db")] });
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Db>().link::<Repo>().build().await?;
    /// assert!(Arc::ptr_eq(&app.get_object::<Repo>()?.db, &app.get_object::<Db>()?));
    /// # Ok(()) }
    /// ```
    pub const fn deps(mut self, deps: &'static [Dependency]) -> Self {
        set(&mut self.deps, Cow::Borrowed(deps));
        self
    }

    /// Sets the extra types (usually `dyn Trait`) this proto can be injected as.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::any::Any;
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor, Provide, put};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
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
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Smtp>("smtp", Lifetime::Singleton, smtp)
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
        set(&mut self.provides, Cow::Borrowed(provides));
        self
    }

    /// Sets the access level and the crate it is checked against (`module_path!()` works).
    /// Without it, a proto is public and belongs to its type's crate (the first segment of its
    /// type's name), which is what the macros rely on: they call it for `access = private` only.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::registry::{AnyArc, ProtoDescriptor};
    /// use tegu_core::{registry::{Access, Dependency, InjectKind, Lifetime}, App, DiError, Proto, Resolver};
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
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Ledger>("ledger", Lifetime::Singleton, ledger)
    ///         .access(Access::Private, "billing::ledger");
    /// }
    /// // ... and injected by a proto of crate `web`.
    /// impl Proto for Report {
    ///     const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Report>("report", Lifetime::Singleton, report)
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
        set(&mut self.krate, Cow::Borrowed(krate));
        self
    }

    /// Sets the async init hook, run once after construction.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tegu_core::registry::{AnyArc, UnitFuture, ProtoDescriptor};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
    ///
    /// #[derive(Default)]
    /// struct Pool { warm: AtomicBool }
    ///
    /// fn pool(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Pool::default()))
    /// }
    /// fn warm_up(obj: AnyArc) -> UnitFuture {
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
    ///         ProtoDescriptor::new::<Pool>("pool", Lifetime::Singleton, pool).init(warm_up);
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder().without_inventory().link::<Pool>().build().await?;
    /// assert!(app.get_object::<Pool>()?.warm.load(Ordering::SeqCst)); // run by `build()`
    /// # Ok(()) }
    /// ```
    pub const fn init(mut self, hook: HookFn) -> Self {
        set(&mut self.init, Some(Hook::Fn(hook)));
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
    /// use tegu_core::registry::{AnyArc, UnitFuture, ProtoDescriptor};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
    ///
    /// #[derive(Default)]
    /// struct UnitOfWork { committed: AtomicBool }
    ///
    /// fn unit_of_work(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(UnitOfWork::default()))
    /// }
    /// fn commit(obj: AnyArc) -> UnitFuture {
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
    ///         ProtoDescriptor::new::<UnitOfWork>("unitOfWork", Lifetime::Context, unit_of_work)
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
        set(&mut self.complete, Some(Hook::Fn(hook)));
        self
    }

    /// Sets the async destroy hook, run once before the object is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use tegu_core::registry::{AnyArc, UnitFuture, ProtoDescriptor};
    /// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime};
    ///
    /// static CLOSED: AtomicBool = AtomicBool::new(false);
    /// struct Pool;
    ///
    /// fn pool(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
    ///     Ok(Arc::new(Pool))
    /// }
    /// fn close(_: AnyArc) -> UnitFuture {
    ///     Box::pin(async {
    ///         CLOSED.store(true, Ordering::SeqCst);
    ///         Ok(())
    ///     })
    /// }
    ///
    /// // `#[singleton_proto(destroy = close)]`
    /// impl Proto for Pool {
    ///     const DESCRIPTOR: ProtoDescriptor =
    ///         ProtoDescriptor::new::<Pool>("pool", Lifetime::Singleton, pool).destroy(close);
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
        set(&mut self.destroy, Some(Hook::Fn(hook)));
        self
    }

    /// Its type's id.
    pub(crate) fn type_id(&self) -> TypeId {
        (self.ty.type_id)()
    }

    /// Its type's name.
    pub(crate) fn type_name(&self) -> &'static str {
        (self.ty.type_name)()
    }

    /// The object name: `name`, or the type's default when `name` is empty.
    pub(crate) fn name(&self) -> Cow<'static, str> {
        match &self.name {
            name if name.is_empty() => Cow::Owned(default_name((self.ty.type_name)())),
            name => name.clone(),
        }
    }

    /// This record as an App selects it: its name and crate resolved (the type's where it says
    /// none), which overrides, profiles and access checks compare.
    pub(crate) fn taken(mut self) -> Self {
        self.name = self.name();
        self.krate = match self.krate {
            Cow::Borrowed("") => Cow::Borrowed(crate_of((self.ty.type_name)())),
            Cow::Owned(path) if path.is_empty() => Cow::Borrowed(crate_of((self.ty.type_name)())),
            Cow::Borrowed(path) => Cow::Borrowed(crate_of(path)),
            Cow::Owned(mut path) => {
                path.truncate(crate_of(&path).len());
                Cow::Owned(path)
            }
        };
        self
    }

    /// A descriptor's factory armed to check its first object's type: what the graph holds,
    /// so that the runtime only sees `Factory::Sync`, `Async` and (until read) `Config`.
    pub(crate) fn arm(&mut self) {
        if let Factory::Fn(f) = self.factory {
            let own = OwnType { id: (self.ty.type_id)(), name: self.ty.type_name, checked: AtomicBool::new(false) };
            self.factory = Factory::Sync(SyncFactory::Fn(f, Arc::new(own)));
        }
    }

    /// The types it can be injected as, by their index in the graph's targets: its own first
    /// (index 0), then those it provides.
    pub(crate) fn provided(&self) -> impl Iterator<Item = (TypeId, &'static str)> + '_ {
        std::iter::once(((self.ty.type_id)(), (self.ty.type_name)()))
            .chain(self.provides.iter().map(|p| ((p.type_id)(), (p.type_name)())))
    }

    /// Whether it can be injected as the type `ty` (its own or one it provides).
    pub(crate) fn provides_type(&self, ty: TypeId) -> bool {
        self.provided().any(|(id, _)| id == ty)
    }

    /// The cast of its `c`th provided type ([`Self::provided`]'s order), `c` at least 1: its
    /// own type (0) needs none.
    #[inline]
    pub(crate) fn cast(&self, c: usize) -> &ProvideCast {
        &self.provides[c - 1].cast
    }

    /// This record with no declaration site: one tegu-core makes (the default descriptor of a
    /// proto whose attribute writes none, a lineage type linked by the builder, a fake), whose
    /// constructor's caller is no line of the user's.
    pub(crate) const fn unsited(mut self) -> Self {
        self.site = None;
        self
    }

    /// Its label with where it is declared, for an error about it.
    pub(crate) fn label_at(&self) -> Label {
        Label::new(self.label(), self.site)
    }

    /// Its label for an error about its dependency `dep`: with where the field is declared.
    pub(crate) fn label_of(&self, dep: &Dependency) -> Label {
        self.label_at().with_field(dep.field, dep.site)
    }

    /// `Type ("name")`, as errors list protos.
    pub(crate) fn label(&self) -> String {
        format!("{} (\"{}\")", (self.ty.type_name)(), self.name)
    }

    /// A hook's error at `stage`, naming this proto.
    pub(crate) fn hook_error(&self, stage: &'static str, source: BoxError) -> DiError {
        DiError::Hook {
            stage,
            type_name: (self.ty.type_name)(),
            name: self.name.to_string(),
            source: Arc::from(source),
        }
    }

    /// Runs a hook's future at `stage`, a panic caught as its error.
    pub(crate) async fn run_hook(&self, stage: &'static str, call: impl FnOnce() -> UnitFuture) -> Result<(), DiError> {
        crate::isolate::catch_hook(call).await.map_err(|error| self.hook_error(stage, error))
    }

    /// A construction's error, naming this proto.
    pub(crate) fn construction_error(&self, source: BoxError) -> DiError {
        DiError::construction_named((self.ty.type_name)(), &self.name, source)
    }
}

/// The factory of a lineage type's proto: there is no value but a seed's.
fn no_lineage_value<T: crate::lineage::Travels>(
    _: &crate::resolver::Resolver<'_>,
) -> Result<crate::erased::AnyArc, crate::error::DiError> {
    use crate::error::DiError;
    use std::any::TypeId;
    Err(if TypeId::of::<T>() == TypeId::of::<crate::lineage::Tenant>() {
        DiError::NoTenant { wanted: "Tenant" }
    } else {
        DiError::NoLineage { wanted: std::any::type_name::<T>() }
    })
}

impl fmt::Debug for ProtoDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtoDescriptor")
            .field("type", &(self.ty.type_name)())
            .field("name", &self.name())
            .field("scope", &self.scope)
            .field("access", &self.access)
            .field("deps", &self.deps)
            .field("provides", &self.provides)
            .finish_non_exhaustive()
    }
}

/// Sets a field of a record in a `const fn`, which cannot run the destructor of the value it
/// replaces: that value is forgotten. The setters are called on a descriptor as it is
/// written, whose fields hold only borrowed data and `fn` pointers, so nothing is leaked;
/// `ProtoDef` sets owned values by assignment.
const fn set<T>(slot: &mut T, value: T) {
    std::mem::forget(std::mem::replace(slot, value));
}

/// A type named in a `const` descriptor.
#[derive(Clone, Copy)]
pub(crate) struct TypeRef {
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) type_name: fn() -> &'static str,
}

impl TypeRef {
    /// `T`'s.
    pub(crate) const fn of<T: ?Sized + 'static>() -> Self {
        TypeRef { type_id: TypeId::of::<T>, type_name: core::any::type_name::<T> }
    }
}

fn crate_of(module_path: &str) -> &str {
    module_path.split("::").next().unwrap_or(module_path)
}

/// A type name's last path segment, without its generic arguments: `Repo` for
/// `my_app::Repo<my_app::Db>`. What object names, graph labels and crosscuts' `types` read.
pub(crate) fn short_type_name(type_name: &str) -> &str {
    let base = type_name.split('<').next().unwrap_or(type_name);
    base.rsplit("::").next().unwrap_or(base)
}

/// tegg's default object name: the last path segment of the type name in lowerCamelCase
/// (`my_app::UserService` becomes `userService`).
///
/// # Examples
///
/// ```
/// assert_eq!(tegu_core::registry::default_name("my_app::UserService"), "userService");
/// assert_eq!(tegu_core::registry::default_name("Wrapper<my_app::Inner>"), "wrapper");
/// ```
pub fn default_name(type_name: &str) -> String {
    let mut chars = short_type_name(type_name).chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}
