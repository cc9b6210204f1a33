//! A proto's static description, as the attribute macros write it (a `const`).

use crate::config::section::LoadFn;
use crate::erased::{DynHook, HookFn};
use crate::proto::def::{ProtoDef, default_name};
use crate::proto::dependency::{Dependency, Unmarked};
use crate::proto::factory::{AsyncFactoryFn, ConfigDef, Construct, Factory, FactoryFn, OwnType, SyncFactory};
use crate::proto::kinds::{Access, Lifetime};
use crate::proto::provide::{Provide, ProvideCast, ProvideDef};

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The static description of a proto, as `#[singleton_proto]` and `#[context_proto]` register
/// it: a `static` in a link section on Linux and Android, an [`inventory`] submission elsewhere
/// (`inventory::submit!` of a descriptor registers one by hand on every target). Built in
/// `const` context; every callback is a plain `fn` pointer.
///
/// Hand-written registration usually goes through [`ProtoDef`] on the builder instead.
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
pub struct ProtoDescriptor {
    pub(crate) type_id: fn() -> TypeId,
    pub(crate) type_name: fn() -> &'static str,
    pub(crate) name: &'static str,
    pub(crate) scope: Lifetime,
    pub(crate) access: Access,
    pub(crate) krate: &'static str,
    pub(crate) deps: &'static [Dependency],
    pub(crate) unmarked: &'static [Unmarked],
    pub(crate) provides: &'static [Provide],
    pub(crate) construct: Construct,
    pub(crate) instances_of: Option<TypeRef>,
    pub(crate) profile: Option<&'static str>,
    pub(crate) lazy: bool,
    pub(crate) order: i32,
    pub(crate) init: Option<HookFn>,
    pub(crate) complete: Option<HookFn>,
    pub(crate) destroy: Option<HookFn>,
    pub(crate) also: &'static [fn() -> ProtoDef],
    pub(crate) config_reads: &'static [crate::config::ConfigReader],
    pub(crate) travel: Option<(&'static crate::lineage::Travel, bool)>,
    pub(crate) seed_only: bool,
}

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
    pub const fn new<T: Send + Sync + 'static>(name: &'static str, scope: Lifetime, factory: FactoryFn) -> Self {
        Self::with::<T>(name, scope, Construct::Sync(factory))
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
    pub const fn new_async<T: Send + Sync + 'static>(
        name: &'static str,
        scope: Lifetime,
        factory: AsyncFactoryFn,
    ) -> Self {
        Self::with::<T>(name, scope, Construct::Async(factory))
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
    pub const fn config<T: Send + Sync + 'static>(
        name: &'static str,
        prefix: &'static str,
        instances: bool,
        load: LoadFn,
    ) -> Self {
        Self::with::<T>(name, Lifetime::Singleton, Construct::Config { prefix, instances, load, live: None })
    }

    const fn with<T: Send + Sync + 'static>(name: &'static str, scope: Lifetime, construct: Construct) -> Self {
        ProtoDescriptor {
            type_id: TypeId::of::<T>,
            type_name: core::any::type_name::<T>,
            name,
            scope,
            access: Access::Public,
            krate: "",
            deps: &[],
            unmarked: &[],
            provides: &[],
            construct,
            instances_of: None,
            profile: None,
            lazy: false,
            order: 0,
            init: None,
            complete: None,
            destroy: None,
            also: &[],
            config_reads: &[],
            travel: None,
            seed_only: false,
        }
    }

    /// The context proto of lineage type `T` named `name` (empty: the type's own): a scope has
    /// a `T` only when seeded with one, or when it runs work a request with one caused. What
    /// [`lineage_type!`](crate::lineage_type) implements `Proto` with; see
    /// [`ProtoDef::lineage`](crate::ProtoDef::lineage).
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
        self.profile = Some(profile);
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
        self.also = makes;
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
        self.config_reads = readers;
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
        self.provides = provides;
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
        self.destroy = Some(hook);
        self
    }

    /// The object name: `name`, or the type's default when `name` is empty.
    fn name(&self) -> Cow<'static, str> {
        match self.name {
            "" => Cow::Owned(default_name((self.type_name)())),
            name => Cow::Borrowed(name),
        }
    }

    pub(crate) fn to_def(&'static self) -> ProtoDef {
        let hook = |h: Option<HookFn>| h.map(|h| Arc::new(h) as Arc<DynHook>);
        let mut provides = Vec::with_capacity(1 + self.provides.len());
        provides.push(ProvideDef { type_id: (self.type_id)(), type_name: (self.type_name)(), cast: ProvideCast::Own });
        provides.extend(self.provides.iter().map(|p| ProvideDef {
            type_id: (p.type_id)(),
            type_name: (p.type_name)(),
            cast: ProvideCast::Fn(p.cast),
        }));
        ProtoDef {
            type_id: (self.type_id)(),
            type_name: (self.type_name)(),
            name: self.name(),
            scope: self.scope,
            access: self.access,
            krate: Cow::Borrowed(crate_of(if self.krate.is_empty() { (self.type_name)() } else { self.krate })),
            deps: Cow::Borrowed(self.deps),
            unmarked: self.unmarked,
            provides,
            factory: match self.construct {
                Construct::Sync(f) => {
                    let own = OwnType { id: (self.type_id)(), name: self.type_name, checked: AtomicBool::new(false) };
                    Factory::Sync(SyncFactory::Fn(f, Arc::new(own)))
                }
                Construct::Async(f) => Factory::Async(Arc::new(f)),
                Construct::Config { prefix, instances, load, live } => {
                    Factory::Config(ConfigDef { prefix: Cow::Borrowed(prefix), instances, load, live })
                }
            },
            instances_of: self.instances_of.map(|c| ((c.type_id)(), (c.type_name)())),
            profile: self.profile.map(Cow::Borrowed),
            lazy: self.lazy,
            order: self.order,
            init: hook(self.init),
            complete: hook(self.complete),
            destroy: hook(self.destroy),
            also: Cow::Borrowed(self.also),
            config_reads: self.config_reads.to_vec(),
            travel: self.travel,
            seed_only: self.seed_only,
        }
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
            .field("type", &(self.type_name)())
            .field("name", &self.name())
            .field("scope", &self.scope)
            .field("deps", &self.deps)
            .finish_non_exhaustive()
    }
}

/// A type named in a `const` descriptor.
#[derive(Clone, Copy)]
pub(crate) struct TypeRef {
    type_id: fn() -> TypeId,
    type_name: fn() -> &'static str,
}

fn crate_of(module_path: &str) -> &str {
    module_path.split("::").next().unwrap_or(module_path)
}
