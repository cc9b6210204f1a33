//! The attribute macros of `tegu-core`. Depend on `tegu-core`, which re-exports them
//! (`use tegu_core::{singleton_proto, context_proto};`); generated code reaches the runtime only
//! through `tegu_core::__private`.
//!
//! The pipeline follows serde: parse the attribute and the struct into a validated model
//! (`ast`), check rules that need the whole model (`check`), then expand (`expand`, the only
//! file that emits the generated code of protos). `#[http_routes]` follows the same stages in `http/`.
//! Errors accumulate in a `Ctxt`, so one compile reports them all.
//! `DI_MACROS_DEBUG=1` prints each expansion to stderr.

mod advice_use;
mod crosscut;
mod ctxt;
mod handlers;
mod http;
mod intercept;
mod internals;
mod proto;
mod symbol;
mod transactional;

use proc_macro::TokenStream;

use crate::proto::attr::ProtoScope;

/// Registers a struct as a singleton proto: built once when the App is built.
///
/// Fields marked `#[inject]` are filled by the container, by their type: `Arc<T>` (a singleton
/// proto), `ContextRef<T>` or `AsyncContextRef<T>` (a context proto, resolved per request),
/// `Provider<T>` (a transient, built anew per call), `ConfigRef<T>` (a reloadable config
/// section), `Option<Arc<T>>` (if registered), `Arc<dyn Trait>` (the proto that provides it),
/// `Vec<Arc<dyn Trait>>` (all of them, by `order`, then object name), `Keyed<T>` (all of them,
/// by object name). `#[inject(name = "...")]` picks an instance by object name;
/// `#[inject(external)]` takes a type registered by hand with `ProtoDef`, checked by `build()`
/// rather than by the compiler; `#[inject(skip)]` gives the field `Default::default()` on
/// purpose, whatever its type. Any other field takes `Default::default()` too, and is a compile
/// error where that is a mistake: a proto (by value, or in an `Arc`, `Option`, `Vec`, `Box` or
/// `Weak`), one of tegu's handles, an `Arc<dyn Trait>`, or a type without `Default`.
///
/// Options: `name = "..."` (default: the type name in lowerCamelCase), `provides(dyn A, ...)`,
/// `access = public | private` (default `public`), `init = method`, `destroy = method` (async
/// `&self` methods returning `()` or `Result<(), E>`), `lazy` (validated at `build()`, built on
/// first use), `order = N` (its place in a `Vec<Arc<dyn Trait>>`: lower first, 0 by default),
/// `profile = "..."` (registered under that profile only), `instances_of = Section` (one per
/// instance of a multi-instance config section), `crate = path` (where tegu-core is, if
/// renamed). On an `impl` block, the constructor's parameters are the dependencies. The guide's
/// chapter is `tegu_http::guide::Protos` (`docs/guide/protos.md` in the repository).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{context_proto, singleton_proto, App, ContextRef};
///
/// pub trait Store: Send + Sync { fn get(&self, key: &str) -> Option<String>; }
///
/// #[singleton_proto(name = "memory", provides(dyn Store), init = warm_up)]
/// pub struct MemoryStore;
/// impl MemoryStore {
///     async fn warm_up(&self) -> Result<(), std::io::Error> { Ok(()) }
/// }
/// impl Store for MemoryStore {
///     fn get(&self, key: &str) -> Option<String> { Some(format!("value of {key}")) }
/// }
///
/// #[context_proto]
/// pub struct CurrentUser { name: String }
///
/// #[singleton_proto]
/// pub struct Profile {
///     #[inject(name = "memory")]
///     store: Arc<dyn Store>,
///     #[inject]
///     user: ContextRef<CurrentUser>,
///     /// The profile's own state: `Default::default()`, on purpose.
///     #[inject(skip)]
///     seen: std::sync::Mutex<Vec<String>>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let profile = app.get_object::<Profile>()?;
/// let user_is_new = app.run_in_context(async { profile.user.get().name.is_empty() }).await;
/// assert!(user_is_new);
/// assert_eq!(profile.store.get("a").as_deref(), Some("value of a"));
/// assert!(profile.seen.lock().unwrap().is_empty());
/// # Ok(()) }
/// ```
///
/// A singleton cannot take a context proto by value:
///
/// ```compile_fail
/// use std::sync::Arc;
/// use tegu_core::{context_proto, singleton_proto};
///
/// #[context_proto]
/// pub struct Tracer;
///
/// #[singleton_proto]
/// pub struct Greeter {
///     #[inject]
///     tracer: Arc<Tracer>, // error: a singleton cannot take context proto `Tracer` by value
/// }
/// ```
#[proc_macro_attribute]
pub fn singleton_proto(args: TokenStream, item: TokenStream) -> TokenStream {
    proto::expand::proto(args.into(), item.into(), ProtoScope::Singleton).into()
}

/// Registers a struct as a context proto: built at most once per context scope (a request), on
/// first use, and destroyed when the scope ends.
///
/// Same fields and options as [`macro@singleton_proto`] (but `lazy`), plus `complete = method`: an async
/// `&self` method run when the scope's work is done, before its output leaves (for HTTP: before
/// the response is sent), newest object first. It is where a unit of work commits: an error or
/// a panic there fails the scope (tegu-http answers 500). `destroy` runs after the output left,
/// for every object, also when the request failed or was cancelled: where it rolls back what
/// `complete` did not commit. A context proto may take singletons and other context protos by
/// value (`Arc<T>`): they come from the same scope. A context proto with an `init` hook is
/// reached with `ContextRef::get_async().await`.
///
/// # Examples
///
/// ```
/// use std::sync::Mutex;
/// use tegu_core::{context_proto, App};
///
/// #[context_proto(name = "uow", complete = commit, destroy = roll_back)]
/// pub struct UnitOfWork { pending: Mutex<Vec<String>> }
/// impl UnitOfWork {
///     async fn commit(&self) -> Result<(), std::io::Error> {
///         self.pending.lock().unwrap().clear(); // COMMIT
///         Ok(())
///     }
///     async fn roll_back(&self) {
///         let left = self.pending.lock().unwrap().len();
///         if left > 0 { /* ROLLBACK: the scope failed before `commit` */ }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let uow = app.try_run_in_context(async {
///     let uow = app.get_object::<UnitOfWork>().unwrap();
///     uow.pending.lock().unwrap().push("INSERT ...".into());
///     uow
/// }).await?; // committed, then destroyed
/// assert!(uow.pending.lock().unwrap().is_empty());
/// # Ok(()) }
/// ```
///
/// A singleton has no completion hook:
///
/// ```compile_fail
/// #[tegu_core::singleton_proto(complete = flush)]
/// pub struct Cache;
/// impl Cache { async fn flush(&self) {} }
/// ```
#[proc_macro_attribute]
pub fn context_proto(args: TokenStream, item: TokenStream) -> TokenStream {
    proto::expand::proto(args.into(), item.into(), ProtoScope::Context).into()
}

/// Registers a `#[derive(serde::Deserialize)]` struct as a configuration section: a singleton
/// whose value is the section at `prefix` of the App's configuration, deserialized when the App
/// is built. Inject it like any singleton (`#[inject] db: Arc<DbConfig>`, or a constructor
/// parameter `config: Arc<DbConfig>`); its fields may use serde defaults, and an absent section
/// reads as an empty table.
///
/// Options: `prefix = "db"` (required; a dotted key such as `"services.db"` works),
/// `instances` (each table under the prefix is an instance, named by its key: `[redis.cache]`
/// is the instance `"cache"`), `name`, `access`, `profile`, `crate`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{config_proto, singleton_proto, App};
///
/// #[config_proto(prefix = "http")]
/// #[derive(serde::Deserialize)]
/// pub struct HttpConfig {
///     #[serde(default = "default_port")]
///     port: u16,
/// }
/// fn default_port() -> u16 { 7001 }
///
/// #[singleton_proto]
/// pub struct Server {
///     #[inject]
///     config: Arc<HttpConfig>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// assert_eq!(app.get_object::<Server>()?.config.port, 7001);
/// let app = App::builder().config_value("http.port", 8080).build().await?;
/// assert_eq!(app.get_object::<Server>()?.config.port, 8080);
/// # Ok(()) }
/// ```
#[proc_macro_attribute]
pub fn config_proto(args: TokenStream, item: TokenStream) -> TokenStream {
    proto::expand::proto(args.into(), item.into(), ProtoScope::Config).into()
}

/// Registers a struct (or an `impl` block with its constructor) as a transient proto: built
/// anew for every injection, and not kept. Context and transient protos take it by value
/// (`Arc<T>`: a new one each); a singleton holds `Provider<T>` and calls `get()` for a new one
/// per call (taking it by value would keep one forever, and does not compile).
///
/// Same fields and options as [`macro@singleton_proto`], but no hooks: the container does not
/// keep a transient, so it cannot await or destroy it; for the same reason its constructor
/// cannot be `async`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{singleton_proto, transient_proto, App, Provider};
///
/// #[transient_proto]
/// pub struct Buffer { bytes: std::sync::Mutex<Vec<u8>> }
///
/// #[singleton_proto]
/// pub struct Encoder {
///     #[inject]
///     buffers: Provider<Buffer>,
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let encoder = app.get_object::<Encoder>()?;
/// let (a, b) = (encoder.buffers.get()?, encoder.buffers.get()?);
/// assert!(!Arc::ptr_eq(&a, &b));
/// # Ok(()) }
/// ```
///
/// A singleton cannot hold one by value:
///
/// ```compile_fail
/// use std::sync::Arc;
/// #[tegu_core::transient_proto]
/// pub struct Buffer;
/// #[tegu_core::singleton_proto]
/// pub struct Encoder {
///     #[inject]
///     buffer: Arc<Buffer>, // error: hold `Provider<Buffer>`
/// }
/// ```
#[proc_macro_attribute]
pub fn transient_proto(args: TokenStream, item: TokenStream) -> TokenStream {
    proto::expand::proto(args.into(), item.into(), ProtoScope::Transient).into()
}

/// Makes a struct an HTTP controller: a singleton proto (same fields and options as
/// [`macro@singleton_proto`]) whose routes, declared by [`macro@http_routes`] on its impl block,
/// `tegu_http::router` serves.
///
/// Options: `path = "/prefix"` (prepended to every route of the controller) and those of
/// `#[singleton_proto]`; `crate` names the path to `tegu_http`. `#[middleware(layer)]` attributes
/// under it wrap every route of the controller in a tower layer, listed outermost first.
/// Use it through `tegu_http`, which documents it with examples.
#[proc_macro_attribute]
pub fn http_controller(args: TokenStream, item: TokenStream) -> TokenStream {
    proto::expand::proto(args.into(), item.into(), ProtoScope::Controller).into()
}

/// Turns the methods of a controller's impl block marked `#[get("/path")]`, `#[post]`, `#[put]`,
/// `#[delete]`, `#[patch]`, `#[head]`, `#[options]`, `#[trace]` or
/// `#[route("/path", method = "...")]` into axum routes. Arguments are axum extractors, the
/// return type anything `IntoResponse`; `#[middleware(layer)]` wraps one method's routes.
/// Use it through `tegu_http`, which documents it with examples.
#[proc_macro_attribute]
pub fn http_routes(args: TokenStream, item: TokenStream) -> TokenStream {
    http::routes(args.into(), item.into()).into()
}

/// Runs advices around a method: `#[intercept(Timing, Transactional)]` on an async method
/// (outermost first), or on an impl block for each of its `pub async fn`s. See
/// `tegu_core::advice::Advice`. `crate = path` among the advices (`#[intercept(Timing, crate = my::di)]`)
/// names tegu-core where a crate re-exports it.
#[proc_macro_attribute]
pub fn intercept(args: TokenStream, item: TokenStream) -> TokenStream {
    intercept::intercept(args.into(), item.into()).into()
}

/// Declares a crosscut: an advice that runs around every method it selects, among the
/// `pub async fn`s of impl blocks marked `#[intercept]` (alone or with advices), outside the
/// method's own advices.
///
/// `crosscut!(Audit, implements = dyn Audited)`: the advice first, with parameters if it takes
/// some (`RateLimit(per_sec = 10)`, see `tegu_core::advice::AdviceParams`); then one or more selectors,
/// all of which a method must match: `implements = dyn Trait` (the protos that
/// `provides(dyn Trait)`), `module = "crate::orders"` (types defined there or below),
/// `types = "*Service"` (the type's name), `methods = "get_*|list"` (the method's name; `*`
/// any text, `|` between alternatives). `order = n`: crosscuts run lower `order` outermost
/// (0 by default, then by advice name). `crate = path` names tegu-core where a crate re-exports
/// it. The advice implements `tegu_core::advice::Advice<tegu_core::advice::Outcome>` (an `impl<R> Advice<R>` does).
/// `build()` fails on a crosscut that selects nothing, whose advice the App lacks, or that
/// selects by trait a proto none of whose methods can be advised. See `tegu_core::advice::Outcome`.
#[proc_macro]
pub fn crosscut(input: TokenStream) -> TokenStream {
    crosscut::crosscut(input.into()).into()
}

/// Runs an async method returning a `Result` in a transaction: tegu-tx's advice `Transactional`
/// through the interceptor machinery (`#[intercept]`), with the options as the call's
/// parameters. Options: a propagation (`required`, the default; `requires_new`, `nested`,
/// `mandatory`, `never`), `source = "name"` (the data source's object name; needed when an App
/// has several), `crate = path` (tegu-tx where a crate re-exports it). Use it through tegu-tx
/// (`tegu_tx::transactional`); see its documentation.
#[proc_macro_attribute]
pub fn transactional(args: TokenStream, item: TokenStream) -> TokenStream {
    intercept::transactional(args.into(), item.into()).into()
}

/// Registers the `#[event_handler]` and `#[schedule(..)]` methods of a singleton's impl block.
/// See `tegu_core::events::EventBus` and `tegu_core::App::run_schedule`. Options: `crate = path` (tegu-core
/// where a crate re-exports it).
#[proc_macro_attribute]
pub fn handlers(args: TokenStream, item: TokenStream) -> TokenStream {
    handlers::handlers(args.into(), item.into()).into()
}

/// Marks an event handler, `async fn on_x(&self, event: &MyEvent)`, inside a `#[handlers]`
/// impl block (which consumes it; alone, it is an error saying so). Its phase, against the
/// emitting scope's completion phase: `#[event_handler]` or `#[event_handler(after_commit)]`
/// (once it succeeded), `#[event_handler(before_commit)]` (in the scope, before its completion
/// hooks; a failure fails it), `#[event_handler(after_rollback)]` (once it failed). See
/// `tegu_core::events::EventBus`.
#[proc_macro_attribute]
pub fn event_handler(_: TokenStream, item: TokenStream) -> TokenStream {
    handlers::stray("event_handler", item.into()).into()
}

/// Marks a scheduled job, `#[schedule(every = "30s")]` or `#[schedule(cron = "0 */5 * * * *")]`
/// on `async fn job(&self)`, inside a `#[handlers]` impl block (which consumes it; alone, it
/// is an error saying so). `#[schedule(every = "1h", once_per_cluster)]`: one instance of the
/// service runs each due time, the one that claims it through the App's
/// `tegu_core::schedule::ScheduleLock`. `config = "purge.every"`: that configuration key, when set, gives
/// the period (or the cron expression) instead, checked when the App is built.
#[proc_macro_attribute]
pub fn schedule(_: TokenStream, item: TokenStream) -> TokenStream {
    handlers::stray("schedule", item.into()).into()
}
