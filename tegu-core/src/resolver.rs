//! What a factory sees: its declared dependencies, resolved.

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use crate::config::Config;
use crate::context_ref::{AsyncContextRef, ContextRef, RefTarget};
use crate::erased::AnyArc;
use crate::error::{BoxError, DiError};
use crate::graph::{Graph, Resolved, Target};
use crate::keyed::Keyed;
use crate::proto::kinds::{InjectKind, Lifetime};
use crate::provider::Provider;
use crate::runtime::AppCell;
use crate::scope::handle::{Seeds, TaskCache};
use crate::scope::table::ScopeShared;

/// Hands a factory the dependencies its proto declared, by position.
///
/// The graph was validated before any factory runs, so these calls fail only when the factory
/// asks for something it did not declare (a programming error the message spells out).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
///
/// struct Tracer { id: u64 }
/// struct Greeter { tracer: ContextRef<Tracer>, plugins: Vec<Arc<dyn Plugin>> }
/// trait Plugin: Send + Sync { fn name(&self) -> &str; }
/// struct Upper;
/// impl Plugin for Upper { fn name(&self) -> &str { "upper" } }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::context::<Tracer>(|_| Ok(Tracer { id: 7 })))
///     .register(ProtoDef::singleton::<Upper>(|_| Ok(Upper)).provides::<Upper, dyn Plugin>(|u| u))
///     .register(
///         ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { tracer: r.context_ref(0)?, plugins: r.all(1)? }))
///             .dep(Dependency::new::<Tracer>(InjectKind::ContextRef, None))
///             .dep(Dependency::new::<dyn Plugin>(InjectKind::All, None)),
///     )
///     .build()
///     .await?;
/// let greeter = app.get_object::<Greeter>()?;
/// assert_eq!(greeter.plugins[0].name(), "upper");
/// let id = app.run_in_context(async { greeter.tracer.get().id }).await;
/// assert_eq!(id, 7);
/// # Ok(()) }
/// ```
pub struct Resolver<'a> {
    pub(crate) graph: &'a Graph,
    pub(crate) singletons: &'a [Option<AnyArc>],
    pub(crate) app_id: u64,
    pub(crate) proto: usize,
    pub(crate) scope: ScopeAt<'a>,
    pub(crate) config: &'a Config,
    pub(crate) cell: &'a AppCell,
    /// The context objects this proto takes by value, built just before it in the same scope:
    /// found here without the scope table's lock.
    pub(crate) fresh: Fresh<'a>,
}

/// Where a factory's context dependencies come from.
#[derive(Clone, Copy)]
pub(crate) enum ScopeAt<'a> {
    /// Outside any scope (singletons at `build()`, a transient outside a scope).
    None,
    /// A scope's shared table.
    Shared(&'a ScopeShared),
    /// The current task's scope, through the task-local (a scope still owned by its task; a
    /// transient built in a scope). Not the handle itself: a `Resolver` stays `Send` and
    /// `Sync`, and the task-local is one load.
    Current,
    /// As `Current`, for a factory an owned scope runs: its dependencies built ahead of it are
    /// in `cache` (the scope's table, borrowed for the call), its seeded ones (a request's head)
    /// in `seeds`, found there with no task-local read; anything else goes through the
    /// task-local as for `Current`.
    Owned(&'a TaskCache, &'a Seeds),
}

impl ScopeAt<'_> {
    /// Context proto `proto`'s object if an owned scope lends it: a seed, or one in its cache.
    #[inline]
    fn lent(&self, proto: usize) -> Option<&AnyArc> {
        match self {
            ScopeAt::Owned(cache, seeds) => seeds.get(proto as u32).or_else(|| cache.get(proto as u32)),
            _ => None,
        }
    }
}

/// Context objects built for a construction just before it: `objs[i]` is proto `keys[i].0`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Fresh<'a> {
    pub(crate) keys: &'a [(u32, u32)],
    pub(crate) objs: &'a [AnyArc],
}

impl Resolver<'_> {
    /// Dependency `index`, declared as `Arc<T>` ([`InjectKind::Arc`]); `T` may be a `dyn Trait`.
    ///
    /// # Errors
    ///
    /// [`DiError::Undeclared`] if dependency `index` is not an `Arc<T>`.
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
    ///     .register(ProtoDef::singleton::<Repo>(|r| Ok(Repo { db: r.arc(0)? })).dep(Dependency::new::<Db>(InjectKind::Arc, None)))
    ///     .build()
    ///     .await?;
    /// assert!(Arc::ptr_eq(&app.get_object::<Repo>()?.db, &app.get_object::<Db>()?));
    /// # Ok(()) }
    /// ```
    pub fn arc<T: ?Sized + 'static>(&self, index: usize) -> Result<Arc<T>, DiError> {
        // The generic part is the cast alone: per dependency type, as little code as can be (a
        // large graph runs thousands of these once each, and each is cold code).
        let (obj, t) = self.fetch_one(index, TypeId::of::<T>(), core::any::type_name::<T>())?;
        Ok(provided_as::<T>(self.graph, t, obj))
    }

    /// [`fill`](crate::private::fill)'s loop: the object of each dependency `indices[k]`, an
    /// `Arc<T>` of a proto's own type, into `objs[k]`, which [`Own::take`](crate::private::Own::take)
    /// makes an `Arc<T>` of (a fake stored as another type converted first by its target's cast:
    /// see [`cast_own`](Self::cast_own)). Not generic: the macros fetch every such field of a
    /// factory through it. `T` was checked at compile time, so only the kind is checked here, by
    /// the field's entry in `Graph::arc_targets` (one `u32`: its target and whether it needs its
    /// cast, or none for another kind), and the object's type by `take`. An object at hand (a
    /// built singleton, or a seed or cached object of the owned scope that lends its factory
    /// both: all of them, when a proto's by-value dependencies were built ahead of it) is taken
    /// from where it lives; any other as every dependency is ([`object`](Self::object)).
    pub(crate) fn fill_own(&self, indices: &[usize], objs: &mut [crate::erased::Own]) -> Result<(), DiError> {
        let targets = &self.graph.arc_targets[self.proto];
        let mut fakes = false;
        for (&index, obj) in indices.iter().zip(objs.iter_mut()) {
            let t = match targets.get(index) {
                Some(&t) if t != crate::graph::NO_TARGET => t,
                _ => return Err(self.undeclared(index, InjectKind::Arc, "a proto's own type")),
            };
            let proto = (t & !crate::graph::CAST_TARGET) as usize;
            obj.set(match self.at_hand(proto) {
                Some(found) => found,
                None => self.object(proto, index)?,
            });
            fakes |= t & crate::graph::CAST_TARGET != 0;
        }
        // Then each fake as what its cast makes of it, once all exist: an error above drops
        // them with the array.
        if fakes {
            for (&index, obj) in indices.iter().zip(objs) {
                if targets[index] & crate::graph::CAST_TARGET != 0 {
                    let cast = |o, out: &mut crate::erased::RawOut| self.cast_own(index, o, out);
                    obj.convert_by(self.declared_type(index), cast, || self.declared_name(index));
                }
            }
        }
        Ok(())
    }

    /// The type dependency `index` was declared as.
    pub(crate) fn declared_type(&self, index: usize) -> TypeId {
        self.graph.declared[self.proto][index].1
    }

    /// The name of the type dependency `index` was declared as.
    pub(crate) fn declared_name(&self, index: usize) -> &'static str {
        (self.graph.protos[self.proto].deps[index].type_name)()
    }

    /// Proto `proto`'s object if it is at hand with nothing to build, check or ask: a singleton
    /// built, a context object among an owned scope's seeds or in its cache.
    #[inline]
    fn at_hand(&self, proto: usize) -> Option<AnyArc> {
        match (self.graph.scopes[proto], self.scope) {
            (Lifetime::Singleton, _) => self.singletons[proto].clone(),
            (Lifetime::Context, _) => self.scope.lent(proto).cloned(),
            _ => None,
        }
    }

    /// The rare path of [`fill`](crate::private::fill): its object is not of the declared type
    /// (a fake given to `override_provider`), so its target's cast writes it into `out`, a
    /// `RawOut` for that type.
    #[cold]
    #[inline(never)]
    pub(crate) fn cast_own(&self, index: usize, obj: AnyArc, out: &mut dyn std::any::Any) {
        match self.one_target(index) {
            // The target's own type, which the object is not: a factory returned another type.
            t if t.cast == 0 => crate::erased::stored_as_another_type(),
            t => crate::proto::provide::run_cast(cast_of(self.graph, t), obj, out),
        }
    }

    /// The one target of `Arc` dependency `index`.
    fn one_target(&self, index: usize) -> Target {
        match &self.graph.resolved[self.proto][index] {
            Resolved::One(t) => *t,
            _ => unreachable!("an Arc dependency resolves to one target"),
        }
    }

    /// Dependency `index`, declared as `Option<Arc<T>>` ([`InjectKind::Optional`]).
    ///
    /// # Errors
    ///
    /// [`DiError::Undeclared`] if dependency `index` is not an `Option<Arc<T>>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct Cache;
    /// struct Repo { cache: Option<Arc<Cache>> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::singleton::<Repo>(|r| Ok(Repo { cache: r.optional(0)? }))
    ///         .dep(Dependency::new::<Cache>(InjectKind::Optional, None)))
    ///     .build()
    ///     .await?;
    /// assert!(app.get_object::<Repo>()?.cache.is_none()); // nobody registered a Cache
    /// # Ok(()) }
    /// ```
    pub fn optional<T: ?Sized + 'static>(&self, index: usize) -> Result<Option<Arc<T>>, DiError> {
        match self.declared(index, InjectKind::Optional, TypeId::of::<T>(), core::any::type_name::<T>())? {
            Resolved::Maybe(t) => {
                t.map(|t| Ok(provided_as::<T>(self.graph, t, self.object(t.proto, index)?))).transpose()
            }
            _ => unreachable!("an optional dependency resolves to zero or one target"),
        }
    }

    /// Dependency `index`, declared as `Vec<Arc<T>>` ([`InjectKind::All`]): every provider,
    /// ordered by object name, then type name.
    ///
    /// # Errors
    ///
    /// [`DiError::Undeclared`] if dependency `index` is not a `Vec<Arc<T>>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct Shard(u8);
    /// struct Router { shards: Vec<Arc<Shard>> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Shard>(|_| Ok(Shard(2))).name("b"))
    ///     .register(ProtoDef::singleton::<Shard>(|_| Ok(Shard(1))).name("a"))
    ///     .register(ProtoDef::singleton::<Router>(|r| Ok(Router { shards: r.all(0)? }))
    ///         .dep(Dependency::new::<Shard>(InjectKind::All, None)))
    ///     .build()
    ///     .await?;
    /// let ids: Vec<u8> = app.get_object::<Router>()?.shards.iter().map(|s| s.0).collect();
    /// assert_eq!(ids, [1, 2]); // ordered by object name
    /// # Ok(()) }
    /// ```
    pub fn all<T: ?Sized + 'static>(&self, index: usize) -> Result<Vec<Arc<T>>, DiError> {
        match self.declared(index, InjectKind::All, TypeId::of::<T>(), core::any::type_name::<T>())? {
            Resolved::Many(ts) => ts.iter().map(|t| self.cast::<T>(*t)).collect(),
            _ => unreachable!("a collection dependency resolves to a list"),
        }
    }

    /// Dependency `index`, declared as `Keyed<T>` ([`InjectKind::Keyed`]): every provider,
    /// by object name.
    ///
    /// # Errors
    ///
    /// [`DiError::Undeclared`] if dependency `index` is not a `Keyed<T>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, Keyed, ProtoDef};
    ///
    /// trait Store: Send + Sync { fn region(&self) -> &'static str; }
    /// struct Bucket(&'static str);
    /// impl Store for Bucket { fn region(&self) -> &'static str { self.0 } }
    /// struct Router { stores: Keyed<dyn Store> }
    ///
    /// fn bucket(name: &'static str) -> ProtoDef {
    ///     ProtoDef::singleton::<Bucket>(move |_| Ok(Bucket(name))).name(name).provides::<Bucket, dyn Store>(|b| b as Arc<dyn Store>)
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(bucket("eu"))
    ///     .register(bucket("us"))
    ///     .register(ProtoDef::singleton::<Router>(|r| Ok(Router { stores: r.keyed(0)? }))
    ///         .dep(Dependency::new::<dyn Store>(InjectKind::Keyed, None)))
    ///     .build()
    ///     .await?;
    /// let router = app.get_object::<Router>()?;
    /// assert_eq!(router.stores.names().collect::<Vec<_>>(), ["eu", "us"]);
    /// assert_eq!(router.stores.get("us")?.region(), "us");
    /// # Ok(()) }
    /// ```
    pub fn keyed<T: ?Sized + 'static>(&self, index: usize) -> Result<Keyed<T>, DiError> {
        match self.declared(index, InjectKind::Keyed, TypeId::of::<T>(), core::any::type_name::<T>())? {
            Resolved::Many(ts) => {
                let entries = ts
                    .iter()
                    .map(|t| Ok((self.graph.protos[t.proto].name.to_string(), self.cast::<T>(*t)?)))
                    .collect::<Result<Vec<_>, DiError>>()?;
                Ok(Keyed::new(entries))
            }
            _ => unreachable!("a keyed dependency resolves to a list"),
        }
    }

    /// Dependency `index`, declared as `Provider<T>` ([`InjectKind::Provider`]): a handle that
    /// builds a new transient `T` per call.
    ///
    /// # Errors
    ///
    /// [`DiError::Undeclared`] if dependency `index` is not a `Provider<T>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef, Provider};
    ///
    /// struct Buffer(Vec<u8>);
    /// struct Encoder { buffers: Provider<Buffer> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::transient::<Buffer>(|_| Ok(Buffer(Vec::with_capacity(64)))))
    ///     .register(ProtoDef::singleton::<Encoder>(|r| Ok(Encoder { buffers: r.provider(0)? }))
    ///         .dep(Dependency::new::<Buffer>(InjectKind::Provider, None)))
    ///     .build()
    ///     .await?;
    /// let encoder = app.get_object::<Encoder>()?;
    /// assert!(!std::sync::Arc::ptr_eq(&encoder.buffers.get()?, &encoder.buffers.get()?)); // a new one each time
    /// # Ok(()) }
    /// ```
    pub fn provider<T: Send + Sync + 'static>(&self, index: usize) -> Result<Provider<T>, DiError> {
        match self.declared(index, InjectKind::Provider, TypeId::of::<T>(), core::any::type_name::<T>())? {
            Resolved::Provider(p) => Ok(Provider::new(self.cell.clone(), *p as u32)),
            _ => unreachable!("a Provider dependency resolves to a transient proto"),
        }
    }

    /// The App's configuration, for a factory that reads a key itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Port(u16);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .config_value("http.port", 8080)
    ///     // Declared: `build()` refuses a key that nothing says it reads.
    ///     .register(ProtoDef::singleton::<Port>(|r| Ok(Port(r.config().get("http.port")?))).reads_config::<u16>("http.port"))
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object::<Port>()?.0, 8080);
    /// # Ok(()) }
    /// ```
    pub fn config(&self) -> &Config {
        self.config
    }

    /// A failure of the constructor of the proto being built, as
    /// [`DiError::Construction`] naming it.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, DiError, ProtoDef};
    ///
    /// struct Socket;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let error = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::singleton::<Socket>(|r| Err(r.construction_error("port 80 is taken"))))
    ///     .build()
    ///     .await
    ///     .unwrap_err();
    /// assert!(matches!(error, DiError::Construction { .. }));
    /// assert!(error.to_string().ends_with("failed: port 80 is taken"), "{error}");
    /// # Ok(()) }
    /// ```
    pub fn construction_error(&self, source: impl Into<BoxError>) -> DiError {
        self.graph.protos[self.proto].construction_error(source.into())
    }

    /// Dependency `index`, declared as `ContextRef<T>` ([`InjectKind::ContextRef`]).
    ///
    /// # Errors
    ///
    /// [`DiError::Undeclared`] if dependency `index` is not a `ContextRef<T>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct User(&'static str);
    /// struct Greeter { user: ContextRef<User> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::context::<User>(|_| Ok(User("ada"))))
    ///     .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { user: r.context_ref(0)? }))
    ///         .dep(Dependency::new::<User>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let greeter = app.get_object::<Greeter>()?;
    /// assert_eq!(app.run_in_context(async { greeter.user.get().0 }).await, "ada");
    /// # Ok(()) }
    /// ```
    pub fn context_ref<T: ?Sized + RefTarget>(&self, index: usize) -> Result<ContextRef<T>, DiError> {
        match self.declared(index, InjectKind::ContextRef, TypeId::of::<T>(), core::any::type_name::<T>())? {
            Resolved::Context(t) => Ok(ContextRef::new(self.app_id, t.proto as u32, t.cast as u32)),
            _ => unreachable!("a ContextRef dependency resolves to a context proto"),
        }
    }

    /// Dependency `index`, declared as `ContextRef<T>` ([`InjectKind::ContextRef`]), as an
    /// [`AsyncContextRef`]: for a context proto built asynchronously.
    ///
    /// # Errors
    ///
    /// [`DiError::Undeclared`] if dependency `index` is not a `ContextRef<T>`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, AsyncContextRef, error::BoxError, registry::{Dependency, InjectKind, Lifetime}, ProtoDef};
    ///
    /// struct Session { user: String }
    /// struct Greeter { session: AsyncContextRef<Session> }
    ///
    /// async fn load_session() -> Result<Session, BoxError> {
    ///     Ok(Session { user: "ada".into() }) // a real one would await a store
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::new_async::<Session, _, _>(Lifetime::Context, |_| Ok(load_session())))
    ///     .register(ProtoDef::singleton::<Greeter>(|r| Ok(Greeter { session: r.async_context_ref(0)? }))
    ///         .dep(Dependency::new::<Session>(InjectKind::ContextRef, None)))
    ///     .build()
    ///     .await?;
    /// let greeter: Arc<Greeter> = app.get_object()?;
    /// let user = app.run_in_context(async { greeter.session.get_async().await.map(|s| s.user.clone()) }).await?;
    /// assert_eq!(user, "ada");
    /// # Ok(()) }
    /// ```
    pub fn async_context_ref<T: ?Sized + RefTarget>(&self, index: usize) -> Result<AsyncContextRef<T>, DiError> {
        self.context_ref(index).map(AsyncContextRef::from)
    }

    /// The object name of the proto being built (handy for one factory shared by many named
    /// instances).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Queue(String);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// // One factory for every named instance: each learns its own name.
    /// let app = App::builder()
    ///     .register_all(["mail", "sms"].map(|name| ProtoDef::singleton::<Queue>(|r| Ok(Queue(r.object_name().to_owned()))).name(name)))
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Queue>("sms")?.0, "sms");
    /// # Ok(()) }
    /// ```
    pub fn object_name(&self) -> &str {
        &self.graph.protos[self.proto].name
    }

    #[inline]
    pub(crate) fn declared(
        &self,
        index: usize,
        kind: InjectKind,
        ty: TypeId,
        asked: &'static str,
    ) -> Result<&Resolved, DiError> {
        match self.graph.declared[self.proto].get(index) {
            Some(&declared) if declared == (kind, ty) => Ok(&self.graph.resolved[self.proto][index]),
            _ => Err(self.undeclared(index, kind, asked)),
        }
    }

    #[cold]
    #[inline(never)]
    fn undeclared(&self, index: usize, kind: InjectKind, asked: &'static str) -> DiError {
        let def = &self.graph.protos[self.proto];
        DiError::Undeclared {
            by: match def.deps.get(index) {
                Some(dep) => def.label_of(dep),
                None => def.label_at(),
            },
            index,
            asked: format!("{kind:?} of {asked}"),
            declared: def.deps.get(index).map_or_else(|| "nothing".to_owned(), |d| format!("`{}`", d.describe())),
        }
    }

    fn cast<T: ?Sized + 'static>(&self, t: Target) -> Result<Arc<T>, DiError> {
        Ok(provided_as::<T>(self.graph, t, self.instance(t.proto)?))
    }

    /// The object of dependency `index`, of proto `proto`: from `fresh` if it was built for this
    /// proto just now, else where it lives.
    fn object(&self, proto: usize, index: usize) -> Result<AnyArc, DiError> {
        match self.fresh(proto, index) {
            Some(obj) => Ok(obj),
            None => self.instance(proto),
        }
    }

    /// Dependency `index`, declared as `Arc<T>` (`ty`, `asked`): its object and its target (whose
    /// cast makes it an `Arc<T>`; not read here, its `ProtoDef` is cold memory). Not generic:
    /// one copy for every dependency type.
    #[inline(never)]
    fn fetch_one(&self, index: usize, ty: TypeId, asked: &'static str) -> Result<(AnyArc, Target), DiError> {
        self.declared(index, InjectKind::Arc, ty, asked)?;
        let t = self.one_target(index);
        Ok((self.object(t.proto, index)?, t))
    }

    /// Context proto `proto` among the objects just built for this one. `fresh` follows the
    /// declaration order of the dependencies, leaving out those built before, so dependency
    /// `index` is at `index` or a little before it: a short scan back, else the table.
    #[inline]
    fn fresh(&self, proto: usize, index: usize) -> Option<AnyArc> {
        const SCAN: usize = 16;
        let Fresh { keys, objs } = self.fresh;
        let end = (index + 1).min(keys.len()).min(objs.len());
        let start = end.saturating_sub(SCAN);
        let found = keys[start..end].iter().rposition(|&(k, _)| k as usize == proto)?;
        Some(objs[start + found].clone())
    }

    fn instance(&self, proto: usize) -> Result<AnyArc, DiError> {
        let def = || &self.graph.protos[proto];
        match self.graph.scopes[proto] {
            // Built before its dependents; absent only when the App was built from roots that do
            // not reach it (a context object outside them asked for it).
            Lifetime::Singleton => match &self.singletons[proto] {
                Some(obj) => Ok(obj.clone()),
                // Lazy, or not reached from the roots: built now if lazy (after `build()`).
                None => match self.cell.get().and_then(std::sync::Weak::upgrade) {
                    Some(app) => app.lazy_singleton(proto, def().type_name()),
                    None => Err(DiError::NotBuilt { wanted: def().type_name() }),
                },
            },
            Lifetime::Context => match self.scope {
                ScopeAt::Shared(scope) => scope.resolve_sync(proto),
                ScopeAt::Current => crate::scope::handle::in_factory(self.app_id, proto as u32, || def().type_name()),
                ScopeAt::Owned(..) => match self.scope.lent(proto) {
                    Some(obj) => Ok(obj.clone()),
                    None => crate::scope::handle::in_factory(self.app_id, proto as u32, || def().type_name()),
                },
                ScopeAt::None => Err(DiError::NoScope { wanted: def().type_name() }),
            },
            Lifetime::Transient => self.transient(proto),
        }
    }

    /// A new object of transient proto `proto`, built with a resolver of its own in the same
    /// scope (or none).
    pub(crate) fn transient(&self, proto: usize) -> Result<AnyArc, DiError> {
        let resolver = Resolver { proto, ..*self };
        match &self.graph.protos[proto].factory {
            crate::proto::factory::Factory::Sync(factory) => factory.call(&resolver),
            // Refused by the graph: a transient is built synchronously, where it is asked for.
            _ => Err(DiError::AsyncInit { wanted: self.graph.protos[proto].type_name() }),
        }
    }
}

/// `obj`, the object of `t.proto`, as the `Arc<T>` its cast `t.cast` yields.
#[inline]
pub(crate) fn provided_as<T: ?Sized + 'static>(graph: &Graph, t: Target, obj: AnyArc) -> Arc<T> {
    // The proto's own type (the first it provides): no cast to read.
    if t.cast == 0 {
        return crate::erased::own_as::<T>(obj);
    }
    crate::proto::provide::cast_with::<T>(cast_of(graph, t), obj)
}

/// The cast of target `t`: not generic, so not compiled again per type.
fn cast_of(graph: &Graph, t: Target) -> &crate::proto::provide::ProvideCast {
    graph.protos[t.proto].cast(t.cast)
}

impl fmt::Debug for Resolver<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver").field("proto", &self.graph.protos[self.proto].label()).finish_non_exhaustive()
    }
}
