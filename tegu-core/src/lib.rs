//! A tegg-style dependency-injection container for async Rust services.
//!
//! Services are **singletons**, built once when the [`App`] is built. The few objects that hold
//! per-request state (a tracer, the current user, a unit of work) are **context protos**: built
//! lazily, at most once per context scope (one request), and destroyed when it ends. Singletons
//! reach them through [`ContextRef<T>`] proxies, resolved through a task-local of the request's future, so a
//! request costs what it touches, not the size of the project.
//!
//! # With the macros
//!
//! Annotate the types; [`App::builder`] finds them (they register through `inventory`),
//! validates the graph and builds the singletons:
//!
//! ```rust,standalone_crate
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use tegu_core::{context_proto, singleton_proto, App, ContextRef};
//!
//! static NEXT_ID: AtomicU64 = AtomicU64::new(1);
//!
//! /// One per request, created the first time a request touches it.
//! #[context_proto]
//! pub struct Tracer {
//!     id: AtomicU64,
//! }
//!
//! impl Tracer {
//!     fn id(&self) -> u64 {
//!         let _ = self.id.compare_exchange(0, NEXT_ID.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed, Ordering::Relaxed);
//!         self.id.load(Ordering::Relaxed)
//!     }
//! }
//!
//! /// A singleton: built once, holds a proxy to "the current request's tracer".
//! #[singleton_proto]
//! pub struct HelloService {
//!     #[inject]
//!     tracer: ContextRef<Tracer>,
//! }
//!
//! impl HelloService {
//!     pub fn hello(&self, name: &str) -> String {
//!         format!("[trace {}] hello, {name}", self.tracer.get().id())
//!     }
//! }
//!
//! #[singleton_proto]
//! pub struct HelloWorldController {
//!     #[inject]
//!     hello_service: Arc<HelloService>,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
//! let app = App::builder().build().await?;
//! let controller = app.get_object::<HelloWorldController>()?;
//! // One context scope per request (tegu-http opens one for each HTTP request).
//! let a = app.run_in_context(async { controller.hello_service.hello("ada") }).await;
//! let b = app.run_in_context(async { controller.hello_service.hello("bob") }).await;
//! assert_ne!(a, b); // two requests, two tracers
//! app.shutdown().await
//! # }
//! ```
//!
//! The attributes: `#[singleton_proto]`, `#[context_proto]`, `#[transient_proto]` and
//! `#[config_proto]` (on a struct, or on an `impl` block with a constructor), `#[inject]` on
//! fields; `#[intercept]`, and `#[handlers]` with `#[event_handler]` and `#[schedule]`.
//!
//! # Where to start
//!
//! The guide, from a first service to operating one, is in tegu-http's documentation:
//! [`tegu_http::guide`](https://docs.rs/tegu-http/latest/tegu_http/guide/index.html) (and
//! `docs/guide/` in the repository), a chapter per topic. [tegu-http](https://docs.rs/tegu-http)
//! serves an App over HTTP: controllers, one context scope per request, tenants, probes.
//!
//! # Scopes, tests, configuration, errors
//!
//! - A context scope ([`App::run_in_context`]) ends in one sequence: completion hooks, the
//!   output, background tasks ([`spawn`]), destroy hooks.
//! - Tests take objects with [`App::get_object`], replace protos with
//!   [`AppBuilder::override_provider`] and [`AppBuilder::override_with`], seed scopes with
//!   [`App::scope`], and build only what they reach with [`AppBuilder::root`].
//! - Configuration sections are `#[config_proto(prefix = "db")]` structs read from files, the
//!   environment and values ([`AppBuilder::config_file`], [`AppBuilder::config_env`],
//!   [`AppBuilder::config_value`]).
//! - A broken graph fails [`AppBuilder::build`] with a [`DiError`] naming the types involved;
//!   the errors found in one pass come together, as [`DiError::Multiple`].
//!
//! # Without macros
//!
//! [`ProtoDef`] registers the same protos by hand, with closures and names chosen at run time
//! (generated projects, many named instances of one type):
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use tegu_core::{App, ContextRef, registry::{Dependency, InjectKind}, ProtoDef};
//!
//! /// Per request: which request this is.
//! struct Tracer { id: usize }
//! /// A singleton service that logs through the current request's tracer.
//! struct HelloService { tracer: ContextRef<Tracer> }
//! impl HelloService {
//!     fn hello(&self, who: &str) -> String {
//!         format!("[request {}] hello, {who}", self.tracer.get().id)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
//! static REQUESTS: AtomicUsize = AtomicUsize::new(0);
//! let app = App::builder()
//!     .register(ProtoDef::context::<Tracer>(|_| Ok(Tracer { id: REQUESTS.fetch_add(1, Ordering::Relaxed) })))
//!     .register(ProtoDef::singleton::<HelloService>(|r| Ok(HelloService { tracer: r.context_ref(0)? }))
//!         .dep(Dependency::new::<Tracer>(InjectKind::ContextRef, None)))
//!     .build()
//!     .await?;
//!
//! let service: Arc<HelloService> = app.get_object()?;
//! // One scope per request: each sees its own Tracer, created on first use.
//! let first = app.run_in_context(async { service.hello("ada") }).await;
//! let second = app.run_in_context(async { service.hello("bob") }).await;
//! assert_eq!(first, "[request 0] hello, ada");
//! assert_eq!(second, "[request 1] hello, bob");
//! app.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! # Where things are
//!
//! The root holds the everyday names: [`App`] and [`AppBuilder`], the injection forms
//! ([`ContextRef`], [`AsyncContextRef`], [`Provider`], [`Keyed`]), the proto traits and [`ProtoDef`], [`DiError`],
//! [`spawn`] and the attribute macros; [`prelude`] brings them with one `use`. The rest is
//! by concept: [`scope`] (context scopes), [`config`] (sections and live configuration),
//! [`events`], [`schedule`](mod@schedule), [`hosted`] (long-running services), [`health`], [`advice`]
//! (interceptors and crosscuts), [`tenant`], [`error`] (the error's families), [`startup`] and
//! [`telemetry`] (the start-up timeline, the metrics), [`futures`], and [`registry`] (a proto's
//! description, for registration by hand and for macro authors).
//!
//! # The pieces
//!
//! - [`ProtoDescriptor`](registry::ProtoDescriptor): the static description the attribute macros submit through `inventory`;
//!   [`ProtoDef`]: the same, registered by hand on the [`AppBuilder`].
//! - [`AppBuilder::build`]: validates the graph (missing, ambiguous, cyclic, duplicate,
//!   context-by-value, private: see [`DiError`]) and builds the singletons in dependency order,
//!   running their async init hooks.
//! - [`App::run_in_context`]: one context scope, and the sequence that ends it (completion
//!   hooks, the output, background tasks, destroy hooks); [`App::try_run_in_context`] returns a
//!   failed completion; [`spawn`] carries the scope into background tasks;
//!   [`App::run_in_context_with`] gives the scope an object made outside (a request head).
//! - [`ContextRef`]: `get`, `try_get`, `get_async`, `with`; of a proto's type, or of a
//!   `dyn Trait` a context proto provides ([`RefTarget`](scope::RefTarget)). [`Provider`]: a new transient per call.
//! - For tests: [`App::get_object`], [`App::get_provider`], [`App::get_object_async`],
//!   [`AppBuilder::override_provider`], [`AppBuilder::override_with`], [`App::scope`] (a scope
//!   seeded with objects), [`AppBuilder::root`] (build only what a test reaches),
//!   [`AppBuilder::expect_providers`]. A guide putting them together on a controller, with an
//!   HTTP request through the router, is `tegu_http::testing`.
//! - [`Advice`](advice::Advice) and `#[intercept(..)]`: advices (protos) around methods, outermost first;
//!   [`EventBus`](events::EventBus) and `#[event_handler]`: events held by the scope until it has succeeded, each
//!   handler in a scope of its own (`before_commit` handlers in the emitting scope, before its
//!   completion hooks; `after_rollback` ones when it failed); `#[schedule(every = "30s")]`/`#[schedule(cron = "..")]`:
//!   jobs on timers, [`App::run_schedule`] by hand. Handlers and jobs live in `#[handlers]`
//!   impl blocks.
//! - [`App::shutdown`]: stops the jobs' timers, waits for the scopes still ending and the
//!   running handlers and jobs, then destroys the singletons.
//! - [`App::to_dot`], [`App::to_mermaid`]: see the graph.
//! - [`registry`]: what the macros generate, for macro and tool authors; [`futures`]: the
//!   futures tegu-core returns, by name.
//!
//! # Cargo features
//!
//! - `macros` (default): the attribute macros, re-exported from tegu-macros.
//! - `schedule` (default): `#[schedule(..)]` jobs, [`App::run_schedule`] and
//!   [`AppBuilder::without_schedules`]; brings `cron` and `chrono`. Without it, the rest of the
//!   container is the same, and a `#[schedule]` fails to compile.
//! - `metrics`: the App's metrics through the `metrics` facade ([`METRICS`](telemetry::METRICS) lists them);
//!   without it, recording them costs nothing.
//! - `watch`: `AppBuilder::watch_config` reloads the live configuration when its files change;
//!   brings `notify`.
//!
//! The design and its measurements are in `docs/decisions.md` and `benches/RESULTS.md` of the
//! repository.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod advice;
mod app;
pub mod config;
mod context_ref;
mod erased;
pub mod error;
pub mod events;
mod export;
mod graph;
pub mod health;
pub mod hosted;
mod isolate;
mod join;
mod keyed;
pub mod lineage;
mod local;
mod maps;
mod pending;
mod private;
mod proto;
mod provider;
mod reload;
mod resolver;
mod runtime;
#[cfg(feature = "schedule")]
#[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
pub mod schedule;
pub mod scope;
pub mod startup;
pub mod telemetry;
pub mod tenant;

pub use app::{App, AppBuilder};
pub use context_ref::{AsyncContextRef, ContextRef};
pub use error::DiError;
pub use keyed::Keyed;
pub use proto::{ContextProto, Proto, ProtoDef, SingletonProto, TransientProto};
pub use provider::Provider;
pub use resolver::Resolver;
pub use scope::spawn;

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use tegu_macros::{
    config_proto, context_proto, crosscut, event_handler, handlers, intercept, schedule, singleton_proto,
    transient_proto,
};

/// The everyday names, for a glob import: the attribute macros, the App and its builder, the
/// injection forms, the error types, and what a service reaches for most (a configuration
/// section's live view, the event bus, `spawn`).
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::Arc;
/// use tegu_core::prelude::*;
///
/// #[singleton_proto]
/// pub struct Greeter;
///
/// #[singleton_proto]
/// pub struct Front {
///     #[inject]
///     greeter: Arc<Greeter>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().build().await?;
/// assert!(Arc::ptr_eq(&app.get_object::<Front>()?.greeter, &app.get_object::<Greeter>()?));
/// # Ok(()) }
/// ```
pub mod prelude {
    pub use crate::config::ConfigRef;
    pub use crate::error::{BoxError, DiError};
    pub use crate::events::EventBus;
    pub use crate::{App, AppBuilder, AsyncContextRef, ContextRef, Keyed, Provider, spawn};
    #[cfg(feature = "macros")]
    pub use crate::{
        config_proto, context_proto, crosscut, event_handler, handlers, intercept, schedule, singleton_proto,
        transient_proto,
    };
}

/// The registry of protos: the vocabulary of a proto's description, which a registration by hand
/// with [`ProtoDef`] speaks too ([`Lifetime`](registry::Lifetime), [`Dependency`](registry::Dependency),
/// [`InjectKind`](registry::InjectKind), [`Access`](registry::Access)); and, for macro and tool
/// authors, what the attribute macros generate and submit: the static description of a proto
/// ([`ProtoDescriptor`](registry::ProtoDescriptor)), the erased object
/// ([`AnyArc`](registry::AnyArc)), the function types of factories, casts and hooks, and the
/// helpers that build them. An application that writes the attributes needs none of it.
///
/// # Examples
///
/// A proto described by hand, as `#[singleton_proto]` would, and linked into an App:
///
/// ```
/// use tegu_core::registry::{AnyArc, ProtoDescriptor};
/// use tegu_core::{App, DiError, Proto, Resolver, registry::Lifetime, SingletonProto};
///
/// pub struct Clock;
///
/// fn clock(_: &Resolver<'_>) -> Result<AnyArc, DiError> {
///     Ok(std::sync::Arc::new(Clock))
/// }
///
/// impl Proto for Clock {
///     const DESCRIPTOR: ProtoDescriptor =
///         ProtoDescriptor::new::<Clock>("clock", Lifetime::Singleton, clock);
/// }
/// impl SingletonProto for Clock {}
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
/// let app = App::builder().without_inventory().link::<Clock>().build().await?;
/// assert!(app.get_object::<Clock>().is_ok());
/// # Ok(()) }
/// ```
pub mod registry {
    pub use crate::config::ConfigReader;
    pub use crate::config::section::{LoadFn, load_section};
    pub use crate::erased::{AnyArc, BuildFuture, CastFn, HookFn, UnitFuture, cast_to, put};
    pub use crate::proto::descriptor::ProtoDescriptor;
    pub use crate::proto::descriptor::default_name;
    pub use crate::proto::factory::{AsyncFactoryFn, FactoryFn};
    pub use crate::proto::provide::Provide;
    pub use crate::proto::{Access, Dependency, InjectKind, Lifetime, Unmarked};
}

/// The futures tegu-core returns, named for those who store them: a scope
/// ([`ContextFuture`](futures::ContextFuture), from [`App::run_in_context`]), a scope returning
/// its completion's failure ([`TryContextFuture`](futures::TryContextFuture)), the completion
/// phase run from inside ([`CompleteScope`](futures::CompleteScope)), and the rest of an
/// intercepted call ([`Run`](futures::Run), from [`Next::run`](advice::Next::run)); and the two
/// boxed futures the container's traits return: [`BoxFuture`](futures::BoxFuture) and
/// [`UnitFuture`](futures::UnitFuture) (a hook's, a health check's, a hosted service's).
///
/// # Examples
///
/// ```
/// use tegu_core::futures::ContextFuture;
///
/// /// A job that keeps its scope's future to poll it later.
/// struct Job<F: std::future::Future> { scope: ContextFuture<F> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = tegu_core::App::builder().build().await?;
/// let job = Job { scope: app.run_in_context(async { 6 * 7 }) };
/// assert_eq!(job.scope.await, 42);
/// # Ok(()) }
/// ```
pub mod futures {
    pub use crate::advice::Run;
    pub use crate::erased::{BoxFuture, UnitFuture};
    pub use crate::scope::end::{CompleteScope, ContextFuture, TryContextFuture};
}

/// Used by code generated by tegu-macros. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use ::core::default::Default;
    pub use ::core::module_path;
    pub use ::core::option::Option;
    pub use ::core::result::Result;
    pub use ::inventory;
    pub use ::std::boxed::Box;
    pub use ::std::sync::Arc;

    pub use crate::__register_proto as register;

    /// What a sync factory returns.
    pub type Made = Result<crate::registry::AnyArc, crate::DiError>;

    /// Where a `provides` cast writes its `Arc<dyn Trait>`.
    pub type CastOut<'a> = &'a mut dyn ::core::any::Any;

    pub use ::core::fmt::Formatter;

    pub use crate::advice::crosscut::{
        AroundFn, CrosscutDef, JoinPoint, JoinPointSite, Named, Outcome, Rest, ShowFailed, ShowNoFailure, crosscut,
    };
    pub use crate::advice::{
        Advice, AdviceParams, AdviceSite, Call, Next, Probe, Proceed, Replay, ShowDebug, ShowOpaque, advice, body,
        body_fn, shower,
    };
    pub use crate::context_ref::AsyncContextRef;
    pub use crate::events::{AnyEvent, EventPhase, HandlerDescriptor, Once, assert_event, event_ref};
    pub use crate::isolate::panic_message;
    pub use crate::lineage::Emitted;
    pub use crate::private::{
        ByValue, ByValueContext, ByValueOther, ByValueSingleton, ByValueTransient, CtorOutput, DeclaredWithLineageType,
        DefaultField, FieldProbe, HandleField, HoldAnArc, HoldContextRef, HoldProvider, HoldTheApps, HookOutput,
        InjectIt, InjectTheHandle, InjectTheOption, InjectTheVec, LineageProbe, LineageProbeOther, LineageProbeTravels,
        NoDefault, OptionField, Own, PlainField, ProtoField, Skipped, ValueField, VecField, WrappedField,
        assert_context, assert_proto, assert_singleton, assert_transient, construct_async, constructed, dep,
        dep_context, dep_singleton, dep_transient, downcast, fill, hook_result, refused_field, unmarked,
    };
    pub use crate::proto::{Access, Dependency, InjectKind, Lifetime};
    pub use crate::registry::{AnyArc, BuildFuture, ProtoDescriptor, Provide, UnitFuture, load_section, put};
    pub use crate::reload::ConfigRef;
    #[cfg(feature = "schedule")]
    pub use crate::schedule::{ScheduleDescriptor, When};
    pub use crate::scope::carry::{CarriedValue, Carrier};
    pub use crate::tenant::TenantRef;
    pub use crate::{
        ContextProto, ContextRef, DiError, Keyed, Proto, ProtoDef, Provider, Resolver, SingletonProto, TransientProto,
    };
}
