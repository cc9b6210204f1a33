//! The builder of a proto registered by hand, [`ProtoDef`]: a [`ProtoDescriptor`] made with
//! closures and names computed at run time (the type is declared beside the record it builds).

use crate::erased::{AnyArc, BuildFuture, UnitFuture, downcast, put};
use crate::error::{BoxError, DiError};
use crate::proto::dependency::Dependency;
use crate::proto::descriptor::{ProtoDef, ProtoDescriptor};
use crate::proto::factory::{AsyncFactory, ConfigDef, Factory, Hook, SyncFactory};
use crate::proto::kinds::{Access, Lifetime};
use crate::proto::provide::{Provide, ProvideCast};
use crate::resolver::Resolver;

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

impl ProtoDef {
    /// A singleton of type `T`, built once by `factory` when the App is built.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Clock { started: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock { started: 42 }))).build().await?;
    /// assert_eq!(app.get_object::<Clock>()?.started, 42);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn singleton<T: Send + Sync + 'static>(
        factory: impl Fn(&Resolver<'_>) -> Result<T, DiError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(Lifetime::Singleton, factory)
    }

    /// A transient proto of type `T`: `factory` builds a new one for every injection and every
    /// [`Provider::get`](crate::Provider::get).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef, Provider};
    ///
    /// static NEXT: AtomicU64 = AtomicU64::new(1);
    /// struct Ticket(u64);
    /// struct Desk { tickets: Provider<Ticket> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    #[track_caller]
    pub fn transient<T: Send + Sync + 'static>(
        factory: impl Fn(&Resolver<'_>) -> Result<T, DiError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(Lifetime::Transient, factory)
    }

    /// A context proto of type `T`, built by `factory` on first use in each scope.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Tracer { id: u32 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().register(ProtoDef::context::<Tracer>(|_| Ok(Tracer { id: 7 }))).build().await?;
    /// let id = app.run_in_context(async { app.get_object::<Tracer>().map(|t| t.id) }).await?;
    /// assert_eq!(id, 7);
    /// assert!(app.get_object::<Tracer>().is_err()); // no scope, no tracer
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn context<T: Send + Sync + 'static>(
        factory: impl Fn(&Resolver<'_>) -> Result<T, DiError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(Lifetime::Context, factory)
    }

    /// A proto of type `T` in `scope`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef, registry::Lifetime};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let scope = if cfg!(test) { Lifetime::Context } else { Lifetime::Singleton };
    /// let app = App::builder().register(ProtoDef::new::<Clock>(scope, |_| Ok(Clock))).build().await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn new<T: Send + Sync + 'static>(
        scope: Lifetime,
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
    /// use tegu_core::{App, error::BoxError, registry::{Dependency, InjectKind, Lifetime}, ProtoDef};
    ///
    /// struct Url(String);
    /// struct Pool { url: String }
    /// impl Pool {
    ///     async fn connect(url: Arc<Url>) -> Result<Pool, BoxError> { Ok(Pool { url: url.0.clone() }) }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Url>(|_| Ok(Url("sqlite::memory:".into()))))
    ///     .register(
    ///         ProtoDef::new_async::<Pool, _, _>(Lifetime::Singleton, |r| Ok(Pool::connect(r.arc(0)?)))
    ///             .dep(Dependency::new::<Url>(InjectKind::Arc, None)),
    ///     )
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object::<Pool>()?.url, "sqlite::memory:");
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn new_async<T, F, Fut>(scope: Lifetime, factory: F) -> Self
    where
        T: Send + Sync + 'static,
        F: Fn(&Resolver<'_>) -> Result<Fut, DiError> + Send + Sync + 'static,
        Fut: Future<Output = Result<T, BoxError>> + Send + 'static,
    {
        Self::with::<T>(
            scope,
            Factory::Async(AsyncFactory::Closure(Arc::new(move |r: &Resolver<'_>| {
                let fut = factory(r)?;
                Ok(Box::pin(async move { fut.await.map(|t| Arc::new(t) as AnyArc) }) as BuildFuture)
            }))),
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::config::<BTreeMap<String, u32>>("limits"))
    ///     .config_value("limits.upload", 10)
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object::<BTreeMap<String, u32>>()?["upload"], 10);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn config<T: serde::de::DeserializeOwned + Send + Sync + 'static>(
        prefix: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self::with::<T>(
            Lifetime::Singleton,
            Factory::Config(ConfigDef {
                prefix: prefix.into(),
                instances: false,
                load: crate::config::section::load_section::<T>,
                live: None,
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Redis { url: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
        match &mut self.0.factory {
            Factory::Config(config) => config.instances = true,
            _ => panic!("`instances()` on `{}`, which is not a config section (ProtoDef::config)", self.type_name()),
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
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct RedisConfig { url: String }
    /// struct Redis { url: String }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    pub fn instances_of<C: ?Sized + 'static>(self) -> Self {
        ProtoDef(self.0.instances_of::<C>())
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// static BUILT: AtomicBool = AtomicBool::new(false);
    /// struct Geo;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
    pub fn lazy(self) -> Self {
        ProtoDef(self.0.lazy())
    }

    /// Registers this proto only when `profile` is the App's active profile
    /// ([`AppBuilder::profile`](crate::AppBuilder::profile)).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
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
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().without_inventory().register_all(mailers()).profile("test").build().await?;
    /// assert!(app.get_object::<Mailer>()?.fake);
    /// let app = App::builder().without_inventory().register_all(mailers()).build().await?;
    /// assert!(app.get_object::<Mailer>().is_err()); // no profile: neither
    /// # Ok(()) }
    /// ```
    pub fn profile(mut self, profile: impl Into<Cow<'static, str>>) -> Self {
        self.0.profile = Some(profile.into());
        self
    }

    #[track_caller]
    fn with<T: Send + Sync + 'static>(scope: Lifetime, factory: Factory) -> Self {
        ProtoDef::from(ProtoDescriptor::with::<T>("", scope, factory))
    }

    /// Where this proto comes in the collections of the types it provides
    /// (`Vec<Arc<dyn Trait>>`, and the lists of providers in errors): lower first.
    /// 0 by default; ties go by object name, then type name (Spring's `@Order`). A
    /// [`Keyed`](crate::Keyed) map is by name and ignores it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// trait Filter: Send + Sync { fn name(&self) -> &'static str; }
    /// struct Auth;
    /// impl Filter for Auth { fn name(&self) -> &'static str { "auth" } }
    /// struct Log;
    /// impl Filter for Log { fn name(&self) -> &'static str { "log" } }
    /// struct Zip;
    /// impl Filter for Zip { fn name(&self) -> &'static str { "zip" } }
    /// struct Chain(Vec<Arc<dyn Filter>>);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Zip>(|_| Ok(Zip)).provides::<Zip, dyn Filter>(|f| f).order(10))
    ///     .register(ProtoDef::singleton::<Log>(|_| Ok(Log)).provides::<Log, dyn Filter>(|f| f))
    ///     .register(ProtoDef::singleton::<Auth>(|_| Ok(Auth)).provides::<Auth, dyn Filter>(|f| f).order(-1))
    ///     .register(ProtoDef::singleton::<Chain>(|r| Ok(Chain(r.all(0)?)))
    ///         .dep(Dependency::new::<dyn Filter>(InjectKind::All, None)))
    ///     .build()
    ///     .await?;
    /// let names: Vec<_> = app.get_object::<Chain>()?.0.iter().map(|f| f.name()).collect();
    /// assert_eq!(names, ["auth", "log", "zip"]); // -1, then 0 (the default), then 10
    /// # Ok(()) }
    /// ```
    pub fn order(self, order: i32) -> Self {
        ProtoDef(self.0.order(order))
    }

    /// Marks a context proto whose object a scope has only when it is given one where it opens
    /// ([`ScopeBuilder::seed`](crate::scope::ScopeBuilder::seed),
    /// [`App::run_in_context_with`](crate::App::run_in_context_with)); its factory fails
    /// everywhere else. tegu-http's `RequestHead`, which each request's scope is given, is one.
    /// `build()` and `check()` then refuse a handler of an event a job emits outside any request
    /// whose graph reads it, through any dependency (a lineage type's factory included), as they
    /// refuse one that reads a lineage type ([`DiError::LineageUnmet`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, DiError, ProtoDef};
    ///
    /// /// The request a scope serves: given by the server where each request's scope opens.
    /// struct Call { path: &'static str }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<Call>(|_| Err(DiError::construction::<Call>("call", "there is no call"))).seed_only())
    ///     .build()
    ///     .await?;
    /// let slot = app.context_slot::<Call>()?;
    /// let path = app.scope().seed(slot, Arc::new(Call { path: "/todos" })).run(async { app.get_object::<Call>().map(|c| c.path) });
    /// assert_eq!(path.await?, "/todos");
    /// # Ok(()) }
    /// ```
    pub fn seed_only(self) -> Self {
        ProtoDef(self.0.seed_only())
    }

    /// Brings the proto `make` returns into every App this one is in, once however many protos
    /// bring it, and not at all if the App has a proto of its type and name already: what a
    /// holder of a [`TenantRef<F>`](crate::tenant::TenantRef) needs
    /// (`.also(ProtoDef::tenants::<F>)`, which `#[inject]` adds by itself).
    pub fn also(mut self, make: fn() -> ProtoDef) -> Self {
        self.0.also.to_mut().push(make);
        self
    }

    /// Sets the object name (default: the type name in lowerCamelCase, as tegg does).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Pool(&'static str);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool("primary"))).name("primary"))
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool("replica"))).name("replica"))
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Pool>("replica")?.0, "replica");
    /// # Ok(()) }
    /// ```
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.0.name = name.into();
        self
    }

    /// Appends a dependency; the factory asks for it by its position.
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
    ///     .register(ProtoDef::singleton::<Db>(|_| Ok(Db)))
    ///     // Dependency #0, which the factory asks for by index.
    ///     .register(ProtoDef::singleton::<Repo>(|r| Ok(Repo { db: r.arc(0)? })).dep(Dependency::new::<Db>(InjectKind::Arc, None)))
    ///     .build()
    ///     .await?;
    /// assert!(Arc::ptr_eq(&app.get_object::<Repo>()?.db, &app.get_object::<Db>()?));
    /// # Ok(()) }
    /// ```
    pub fn dep(mut self, dep: Dependency) -> Self {
        self.0.deps.to_mut().push(dep);
        self
    }

    /// Declares that the factory reads the configuration at `key` as a `T` (with
    /// [`Config::get`](crate::config::Config::get)): `build()` and `check()` then refuse a key
    /// under `key` that `T` does not take, as they do for a `#[config_proto]` section, and
    /// know that the keys there are read. A key that no section or reader takes is refused as
    /// unknown; this is how a proto registered by hand says which keys are its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Smtp { host: String, #[serde(default)] port: Option<u16> }
    /// struct Mailer { host: String }
    ///
    /// fn mailer() -> ProtoDef {
    ///     ProtoDef::singleton::<Mailer>(|r| Ok(Mailer { host: r.config().get::<Smtp>("smtp")?.host }))
    ///         .reads_config::<Smtp>("smtp")
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().register(mailer()).config_value("smtp.host", "mx").build().await?;
    /// assert_eq!(app.get_object::<Mailer>()?.host, "mx");
    ///
    /// // A misspelled key under `smtp` is refused, with the field it meant.
    /// let error = App::builder().register(mailer()).config_value("smtp.host", "mx").config_value("smtp.prot", 25).check();
    /// assert!(error.unwrap_err().to_string().contains("did you mean `smtp.port`?"));
    /// # Ok(()) }
    /// ```
    pub fn reads_config<T: serde::de::DeserializeOwned>(mut self, key: impl Into<Cow<'static, str>>) -> Self {
        self.0.config_reads.to_mut().push(crate::config::ConfigReader::named::<T>(key));
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// trait Mailer: Send + Sync { fn send(&self) -> &'static str; }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn send(&self) -> &'static str { "smtp" } }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
            self.0.type_id(),
            TypeId::of::<T>(),
            "provides::<{}, _> on a proto of type `{}`",
            core::any::type_name::<T>(),
            self.type_name()
        );
        self.0.provides.to_mut().push(Provide {
            type_id: TypeId::of::<U>,
            type_name: core::any::type_name::<U>,
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
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, DiError, ProtoDef};
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
        self.0.access = Access::Private;
        self.0.krate = krate.into();
        self
    }

    /// Sets the crate this proto belongs to, which private protos are checked against.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, DiError, ProtoDef};
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
        self.0.krate = krate.into();
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct Pool { warm: AtomicBool }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
        self.0.init = Some(erase_hook(hook));
        self
    }

    /// Sets the async completion hook of a context proto: run inside the scope when its work
    /// is done, newest object first, before the scope's output leaves (for HTTP: before the
    /// response is sent). This is where a unit of work commits; an error or a panic here is the
    /// scope's failure (tegu-http answers 500). See
    /// [`App::run_in_context`](crate::App::run_in_context) for the whole sequence. A singleton
    /// with a completion hook is refused by [`build`](crate::AppBuilder::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tegu_core::{App, ProtoDef};
    ///
    /// #[derive(Default)]
    /// struct UnitOfWork { committed: Mutex<bool> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
        self.0.complete = Some(erase_hook(hook));
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
    /// use tegu_core::{App, ProtoDef};
    ///
    /// static CLOSED: AtomicUsize = AtomicUsize::new(0);
    /// struct Conn;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
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
        self.0.destroy = Some(erase_hook(hook));
        self
    }

    /// The object name.
    ///
    /// # Examples
    ///
    /// ```
    /// struct Clock;
    /// let def = tegu_core::ProtoDef::singleton::<Clock>(|_| Ok(Clock));
    /// assert_eq!(def.object_name(), "clock"); // tegg's default: the type in lowerCamelCase
    /// ```
    pub fn object_name(&self) -> &str {
        &self.0.name
    }

    /// How long its objects live.
    ///
    /// # Examples
    ///
    /// ```
    /// struct Clock;
    /// let def = tegu_core::ProtoDef::singleton::<Clock>(|_| Ok(Clock));
    /// assert_eq!(def.lifetime(), tegu_core::registry::Lifetime::Singleton);
    /// ```
    pub fn lifetime(&self) -> Lifetime {
        self.0.scope
    }

    /// The type name.
    ///
    /// # Examples
    ///
    /// ```
    /// struct Clock;
    /// let def = tegu_core::ProtoDef::singleton::<Clock>(|_| Ok(Clock));
    /// assert!(def.type_name().ends_with("Clock"));
    /// ```
    pub fn type_name(&self) -> &'static str {
        self.0.type_name()
    }
}

impl From<ProtoDescriptor> for ProtoDef {
    /// A descriptor's proto, to register by hand (or to change before it is: a name, a
    /// profile, a dependency).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, DiError, Proto, ProtoDef, singleton_proto};
    ///
    /// #[singleton_proto]
    /// #[derive(Default)]
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// assert_eq!(ProtoDef::from(Clock::DESCRIPTOR).object_name(), "clock"); // the type's default
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::from(Clock::DESCRIPTOR).name("wallClock"))
    ///     .build()
    ///     .await?;
    /// assert!(app.get_object_named::<Clock>("wallClock").is_ok());
    /// # Ok(()) }
    /// ```
    fn from(mut record: ProtoDescriptor) -> Self {
        // Named now, so that `object_name` says what the App will use.
        record.name = record.name();
        ProtoDef(record)
    }
}

impl fmt::Debug for ProtoDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProtoDef").field(&self.0).finish()
    }
}

fn erase_hook<T, F, Fut>(hook: F) -> Hook
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
{
    Hook::Closure(Arc::new(move |obj: AnyArc| Box::pin(hook(downcast::<T>(obj))) as UnitFuture))
}
