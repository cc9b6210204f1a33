//! The container's error type, [`DiError`], its families ([`ErrorKind`]), [`BoxError`] (what
//! hooks and factories return) and [`Busy`] (a failure to try again later).

#[cfg(feature = "miette")]
mod diagnostic;
pub(crate) mod kind;
mod label;
mod words;

pub use kind::{Busy, ErrorKind};
pub use label::{Label, Site};
pub(crate) use words::{closest, short_type};
use words::{left_out_reader_fix, missing_fix, unread_section_fix};

use std::sync::Arc;

/// A boxed error, as returned by lifecycle hooks and user factories.
///
/// # Examples
///
/// Any error converts into one with `?` or `.into()`: what hooks and factories return.
///
/// ```
/// use tegu_core::error::BoxError;
///
/// fn parse_port(text: &str) -> Result<u16, BoxError> {
///     if text.is_empty() {
///         return Err("no port given".into());
///     }
///     Ok(text.parse()?) // a ParseIntError, boxed
/// }
///
/// assert_eq!(parse_port("8080").unwrap(), 8080);
/// assert_eq!(parse_port("").unwrap_err().to_string(), "no port given");
/// assert!(parse_port("http").is_err());
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong while building an [`App`](crate::App) or resolving an object.
///
/// Every variant names the types (by [`type_name`](core::any::type_name)) and object names
/// involved, and its message ends with the usual fix. Graph errors come out of
/// [`AppBuilder::build`](crate::AppBuilder::build), never in the middle of a request.
///
/// `DiError` is `Clone`: a context object whose construction failed reports the same error to
/// every task of the scope that asks for it.
///
/// Its `Debug` is its message, as anyhow's and eyre's reports are: `fn main() -> Result<(),
/// DiError>` (or `Box<dyn Error>`) prints an error it returns with `Debug`, so a broken graph
/// shows its fix there too. Match on the variant for its fields.
///
/// # Examples
///
/// ```
/// use tegu_core::{App, DiError, ProtoDef};
///
/// #[derive(Debug)]
/// struct Clock;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let app = App::builder().without_inventory().build().await.unwrap();
/// match app.get_object::<Clock>() {
///     Err(DiError::NotFound { wanted, .. }) => assert!(wanted.ends_with("Clock")),
///     other => panic!("expected NotFound, got {other:?}"),
/// }
/// // The message names the type and says what to do.
/// let message = app.get_object::<Clock>().err().unwrap().to_string();
/// assert!(message.contains("Clock"), "{message}");
///
/// // A failing constructor fails `build()`, naming the type.
/// let failed = App::builder()
///     .register(ProtoDef::singleton::<Clock>(|_| Err(DiError::construction::<Clock>("clock", "no time source"))))
///     .build()
///     .await;
/// assert!(failed.unwrap_err().to_string().contains("no time source"));
/// # }
/// ```
#[derive(Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DiError {
    // The graph: what `build()` and `check()` refuse (`ErrorKind::Graph`).
    /// A dependency names a type that no registered proto provides.
    #[error("`{by}` injects `{wanted}`, but no proto provides it; {}", missing_fix(wanted))]
    Missing {
        /// The requested type.
        wanted: &'static str,
        /// The proto that asked for it.
        by: Label,
    },
    /// A dependency asks for a qualifier (object name) that none of the providers has.
    #[error(
        "`{by}` injects `{wanted}` named \"{qualifier}\", but no provider has that name; the providers are: {}",
        .available.join(", ")
    )]
    UnknownQualifier {
        /// The requested type.
        wanted: &'static str,
        /// The requested object name.
        qualifier: String,
        /// The proto that asked for it.
        by: Label,
        /// The names of the protos that do provide `wanted`.
        available: Vec<String>,
    },
    /// Several protos provide the requested type and the dependency names none of them.
    #[error(
        "`{by}` injects `{wanted}`, which {} protos provide ({}); pick one with a qualifier (`#[inject(name = \"...\")]`), or inject all of them as a collection",
        .candidates.len(), .candidates.join(", ")
    )]
    Ambiguous {
        /// The requested type.
        wanted: &'static str,
        /// The proto that asked for it.
        by: Label,
        /// The candidates, as `name: type`.
        candidates: Vec<String>,
    },
    /// Two protos have the same type and the same object name.
    #[error("two protos of type `{type_name}` are both named \"{name}\"; give each instance its own name")]
    Duplicate {
        /// The type registered twice.
        type_name: &'static str,
        /// The shared object name.
        name: String,
    },
    /// The construction dependencies form a cycle.
    #[error("dependency cycle: {}; {fix}", label::join(.chain, " -> "))]
    Cycle {
        /// The protos on the cycle, the first repeated at the end, as `type (name)`.
        chain: Vec<Label>,
        /// The way out that applies to this cycle: a context proto's by-value dependency on
        /// another context proto can become a `ContextRef`; between singletons, the shared
        /// part moves into a proto of its own.
        fix: String,
    },
    /// A singleton declares a completion hook, which only context objects have.
    #[error(
        "singleton `{singleton}` has a `complete` hook, but completion is the end of a context scope's work; make it a context proto, or do the work in its `destroy` hook"
    )]
    CompleteOnSingleton {
        /// The singleton.
        singleton: Label,
    },
    /// A singleton takes a context object by value (`Arc<T>`, `Option<Arc<T>>` or a collection).
    #[error(
        "singleton `{singleton}` takes context proto `{context}` by value; use `ContextRef<{context}>`, which resolves the current request's object"
    )]
    ContextByValue {
        /// The singleton.
        singleton: Label,
        /// The context proto.
        context: &'static str,
    },
    /// A `ContextRef<T>` points at a singleton.
    #[error(
        "`{by}` holds `ContextRef<{singleton}>`, but `{singleton}` is a singleton; inject it as `Arc<{singleton}>`"
    )]
    ContextRefToSingleton {
        /// The proto holding the reference.
        by: Label,
        /// The singleton.
        singleton: &'static str,
    },
    /// A `ContextRef<T>` whose holder calls `get()` (see [`Dependency::sync_only`]) reaches a
    /// context proto built asynchronously. The macros refuse this at compile time when `T` is
    /// a proto's type; a `dyn Trait` is only known at `build()`.
    ///
    /// [`Dependency::sync_only`]: crate::registry::Dependency::sync_only
    #[error(
        "`{by}` holds `ContextRef<{wanted}>`, but `{target}` is built asynchronously (an async constructor or init hook, its own or a by-value dependency's), so `get()` could not return it; hold `AsyncContextRef<{wanted}>` and call `get_async().await`"
    )]
    ContextRefToAsync {
        /// The proto holding the reference.
        by: Label,
        /// The type named in the `ContextRef`.
        wanted: &'static str,
        /// The context proto it reaches.
        target: &'static str,
    },
    /// A proto's field without `#[inject]` holds a proto of the App (`Arc<T>`, `Option<Arc<T>>`,
    /// `Vec<Arc<T>>`, `Box<T>`, `Weak<T>`): built with `Default`, it would be a private `T` (or
    /// none), not the App's. The macros refuse this at compile time when `T` is a `Proto`; a `T`
    /// registered by hand is only known at `build()` (see
    /// [`Unmarked`](crate::registry::Unmarked)).
    #[error(
        "`{proto}`'s field `{field}` holds `{wanted}`, a proto of this App, but has no `#[inject]`: it is built with `Default`, a private `{wanted}` (or none) rather than the App's; mark it `#[inject(external)]` (an `Arc<{wanted}>`, `Option<Arc<..>>` or `Vec<Arc<..>>`) to receive the App's, or `#[inject(skip)]` if a private one is what you mean"
    )]
    UninjectedProto {
        /// The proto whose field it is.
        proto: Label,
        /// The field.
        field: &'static str,
        /// The type it holds, which the App has as a proto.
        wanted: &'static str,
    },
    /// A private proto is injected from another crate.
    #[error(
        "`{by}` (crate `{by_crate}`) injects `{wanted}`, which is private to crate `{owner_crate}`; make it public or inject it only from its own crate"
    )]
    Private {
        /// The private type.
        wanted: &'static str,
        /// The crate that owns it.
        owner_crate: String,
        /// The proto that asked for it.
        by: Label,
        /// The crate of that proto.
        by_crate: String,
    },
    /// A singleton takes a transient proto by value, which would keep one object forever.
    #[error(
        "singleton `{singleton}` takes transient proto `{transient}` by value, which would keep one `{transient}` for the App's whole life; hold `Provider<{transient}>` and call `get()` for a new one each time"
    )]
    TransientByValue {
        /// The singleton.
        singleton: Label,
        /// The transient proto.
        transient: &'static str,
    },
    /// A `Provider<T>` or `ContextRef<T>` points at a proto of the wrong kind.
    #[error("`{by}` holds `{holds}`, but `{target}` is a {scope} proto; {fix}")]
    WrongHandle {
        /// The proto holding it.
        by: Label,
        /// What it holds: `Provider<T>` or `ContextRef<T>`.
        holds: String,
        /// The proto pointed at.
        target: &'static str,
        /// `singleton`, `context` or `transient`.
        scope: &'static str,
        /// What to hold instead.
        fix: String,
    },
    /// A transient proto has what only kept objects can have: a lifecycle hook or an async
    /// constructor.
    #[error(
        "transient proto `{transient}` has {what}, but the container does not keep transients, so it can neither await nor destroy them; make it a context proto (one per request), or do that work in its factory"
    )]
    TransientHook {
        /// The transient proto.
        transient: Label,
        /// `an init hook`, `a destroy hook`, `a complete hook` or `an async constructor`.
        what: &'static str,
    },
    /// A lazy proto cannot be built on first use as declared: it is not a singleton, or it
    /// needs awaiting.
    #[error("`{proto}` is declared lazy, but {reason}")]
    Lazy {
        /// The proto.
        proto: Label,
        /// What is wrong, and the fix.
        reason: &'static str,
    },
    /// A dependency is provided only by protos that are left out: registered for another
    /// profile, excluded, or templates (`instances_of`) whose followed type has no instance.
    #[error("`{by}` injects `{wanted}`, but every proto that provides it is left out: {}", .inactive.join(", "))]
    Inactive {
        /// The requested type.
        wanted: &'static str,
        /// The proto that asked for it.
        by: Label,
        /// Each candidate, as `type ("name")`, why it is left out and the fix.
        inactive: Vec<String>,
    },
    /// An `#[intercept(..)]` names an advice that this App does not register.
    #[error("method `{method}` of module `{module}` ({at}) is intercepted by `{advice}`, but {why}")]
    AdviceMissing {
        /// The advice type, as written in `#[intercept]`.
        advice: &'static str,
        /// The module of the intercepted method.
        module: &'static str,
        /// The intercepted method.
        method: &'static str,
        /// Where: `file:line` of the `#[intercept]`.
        at: String,
        /// Why the App has no such proto: excluded, another profile, or not registered.
        why: String,
    },
    /// A use of an advice needs something of the App that it does not have: a
    /// `#[transactional]` method with no data source, or none of the name it gives.
    #[error("{site} is intercepted by `{advice}`, which needs `{wanted}`{why}; {fix}")]
    AdviceNeeds {
        /// The advice type, as written.
        advice: &'static str,
        /// The use: "method `m` of module `a::b` (src/b.rs:12)".
        site: String,
        /// What it needs (`dyn tegu_tx::TxSource`).
        wanted: &'static str,
        /// The name it needs, if the use gives one, and what the App has instead: `, but this
        /// App has none`, ` named "b", but this App has none of that name (it has "a")`.
        why: String,
        /// The advice's fix.
        fix: &'static str,
    },
    /// A `crosscut!` selects no method of the program: its selector is wrong, or the impl
    /// blocks it means are not marked `#[intercept]`.
    #[error(
        "the crosscut of `{advice}` ({at}) selects no method: no `pub async fn` of an impl block marked `#[intercept]` matches {selector}"
    )]
    CrosscutMatchesNothing {
        /// The advice type, as written in `crosscut!`.
        advice: &'static str,
        /// The selector, as written: `implements = dyn Audited, methods = "get_*"`.
        selector: String,
        /// Where: `file:line` of the `crosscut!`.
        at: String,
    },
    /// A crosscut selects protos by a trait they provide, and one of them has no method it can
    /// advise: its impl block is not marked `#[intercept]` (or is generic, or a trait impl), or
    /// it is registered by hand, where crosscuts do not see what it provides.
    #[error(
        "`{proto}` is selected by the crosscut of `{advice}` ({selector}, {at}), but none of its methods can be advised; mark its impl block `#[intercept]`, and declare the proto with its attribute (crosscuts do not see a proto registered by hand)"
    )]
    CrosscutUnreachable {
        /// The advice type, as written in `crosscut!`.
        advice: &'static str,
        /// The proto selected, as its label (`my_app::Orders ("orders")`).
        proto: String,
        /// The selector, as written.
        selector: String,
        /// Where: `file:line` of the `crosscut!`.
        at: String,
    },
    /// Several singletons provide a role an App has at most one of (`dyn EventTransport`,
    /// `dyn ScheduleLock`).
    #[error("several singletons provide `{role}`, which an App has at most one of: {}; keep one", .providers.join(", "))]
    OneOfRole {
        /// The role, as `dyn Trait`.
        role: &'static str,
        /// The singletons that provide it.
        providers: Vec<String>,
    },
    /// A proto provides a role that only a singleton may have (`dyn HostedService`,
    /// `dyn HealthCheck`).
    #[error("{proto} provides `{role}`, but is a {scope} proto; a `{role}` must be a singleton (`#[singleton_proto]`)")]
    MustBeSingleton {
        /// The proto, as errors name it.
        proto: Label,
        /// The role.
        role: &'static str,
        /// Its scope.
        scope: &'static str,
    },
    /// A factory asked the resolver for a dependency it did not declare, or with another type.
    #[error("factory of `{by}` asked for dependency #{index} as `{asked}`, but it is declared as {declared}")]
    Undeclared {
        /// The proto whose factory asked.
        by: Label,
        /// The position asked for.
        index: usize,
        /// The requested type and kind.
        asked: String,
        /// What was declared at that position (or "nothing").
        declared: String,
    },

    // The builder's test seams, misnamed (`ErrorKind::Setup`).
    /// `override_with` names a type that no proto has.
    #[error("cannot override `{type_name}`: no proto of that type is registered")]
    OverrideUnknown {
        /// The type of the fake.
        type_name: &'static str,
    },
    /// `override_provider` names a type (or a name) that no proto provides.
    #[error(
        "cannot override the provider of `{wanted}`{}: no proto provides it{}; the providers of `{wanted}` are: {}",
        .name.as_ref().map(|n| format!(" named \"{n}\"")).unwrap_or_default(),
        if .name.is_some() { " under that name" } else { "" },
        if .providers.is_empty() { "none".to_owned() } else { .providers.join(", ") }
    )]
    OverrideNoProvider {
        /// The provided type, usually a `dyn Trait`.
        wanted: &'static str,
        /// The name asked for, if any.
        name: Option<String>,
        /// The protos that do provide it, as `type ("name")`.
        providers: Vec<String>,
    },
    /// Fewer protos provide a type than `AppBuilder::expect_providers` said.
    #[error(
        "`{wanted}` should have at least {expected} provider(s), but {} registered ({}); if one lives in a crate the program never names, the linker may have dropped its registration: name one of its protos with `App::builder().link::<ThatProto>()`",
        match .found.len() { 0 => "none is".to_owned(), 1 => "1 is".to_owned(), n => format!("{n} are") },
        if .found.is_empty() { "no provider".to_owned() } else { .found.join(", ") }
    )]
    ExpectedProviders {
        /// The provided type, usually a `dyn Trait`.
        wanted: &'static str,
        /// How many were expected, at least.
        expected: usize,
        /// The protos that do provide it, as `type ("name")`.
        found: Vec<String>,
    },
    /// `exclude` names a type that no proto has.
    #[error("cannot exclude `{type_name}`: no proto of that type is registered")]
    ExcludeUnknown {
        /// The excluded type.
        type_name: &'static str,
    },

    // Configuration (`ErrorKind::Config`).
    /// A configuration key has a value that does not fit its section's field.
    #[error("config key {key} of `{section}`: {message}{}", .origin.as_ref().map(|o| format!(" (from {o})")).unwrap_or_default())]
    ConfigInvalid {
        /// The full key, as `db.pool`.
        key: String,
        /// The config section (type) that reads it.
        section: &'static str,
        /// What was found and what was expected.
        message: String,
        /// Where the value came from: `file app.toml`, `env APP_DB__POOL`, `config_value("db.pool") at ...`.
        origin: Option<String>,
    },
    /// A configuration key that a section needs is set by no source.
    #[error("config key {key} is missing (`{section}` needs it; {hint})")]
    ConfigMissing {
        /// The full key, as `db.url`.
        key: String,
        /// The config section (type) that needs it.
        section: &'static str,
        /// Where it could be set, from the App's sources.
        hint: String,
    },
    /// An environment variable under the App's prefix sets a key inside a section that the
    /// section's type has no field for (a typo, or a field that was renamed). Keys match fields
    /// whatever their case (`APP_POOL__MAXCONN` sets `maxConn`); one that matches none would be
    /// silently ignored, so it is refused.
    #[error(
        "environment variable {variable} sets config key {key}, but `{section}` has no such field{}; check the variable's name (keys match fields whatever their case)",
        if .fields.is_empty() { String::new() } else { format!(" (its fields there: {})", .fields.join(", ")) }
    )]
    ConfigUnknownEnv {
        /// The variable, as `APP_POOL__MAXCONNS`.
        variable: String,
        /// The key it sets, as `db.pool.maxconns`.
        key: String,
        /// The config section (type) that reads the key's table.
        section: &'static str,
        /// The fields the type has at that place, if it is a struct.
        fields: Vec<String>,
    },
    /// A key set in a file or with `config_value` that nothing reads: not a field of the
    /// section whose table it is in, or under no section, reader or declared prefix at all.
    #[error(
        "config key `{key}` ({source_name}) {}{}; {}",
        match (.section, .left_out) { (Some(section), false) => format!("is not a field of `{section}`, the section that reads its table"), _ => "is read by no config section".to_owned() },
        if .near.is_empty() { String::new() } else { format!("; did you mean {}?", .near.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(" or ")) },
        match (.section, .left_out) {
            (Some(reader), true) => left_out_reader_fix(reader),
            (Some(_), false) => "fix its name or remove it".to_owned(),
            (None, _) => unread_section_fix(.key),
        }
    )]
    ConfigUnknownKey {
        /// The key, as `db.max_conections`.
        key: String,
        /// Where it is set: `file config/app.toml, line 4`, `config_value("db") at src/main.rs:9:10`.
        source_name: String,
        /// The type of the section whose table holds it, if one does; with `left_out`, the
        /// registered section that reads it.
        section: Option<&'static str>,
        /// Known keys close to it, in full.
        near: Vec<String>,
        /// `section` reads it, but the App leaves it out, built `without_inventory()` without
        /// linking it: the real problem, whose fix is the link. (A flag on `section`, not a
        /// field of its own, so that no variant is larger than 104 bytes: errors are moved in
        /// `Result`s.)
        left_out: bool,
    },
    /// The App's profile is not a plain name: it is joined into file names
    /// (`app.{profile}.toml`).
    #[error(
        "profile {profile:?} is not a profile name: use 1 to 64 ASCII letters, digits, `-` and `_` (it names files such as app.{{profile}}.toml)"
    )]
    InvalidProfile {
        /// The profile given.
        profile: String,
    },
    /// A configuration source cannot be read: a malformed or missing required file.
    #[error("{source_name}: {message}")]
    ConfigSource {
        /// The source: `file app.toml`, `config_value("db")`.
        source_name: String,
        /// What is wrong with it.
        message: String,
    },

    // An object that could not be built (`ErrorKind::Construction`).
    /// A factory or a constructor returned an error: the object could not be built. (A panic
    /// there propagates to the caller: `build()`, or the request, which tegu-http answers 500.)
    #[error("construction of `{type_name}` (\"{name}\") failed: {source}")]
    Construction {
        /// The type of the object.
        type_name: &'static str,
        /// Its object name.
        name: String,
        /// What the factory or constructor returned.
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A lifecycle hook failed: returned an error, or (completion and destroy hooks, which
    /// tegu-core runs isolated) panicked.
    #[error("{stage} of `{type_name}` (\"{name}\") failed: {source}")]
    Hook {
        /// `"init"`, `"complete"` or `"destroy"`.
        stage: &'static str,
        /// The type of the object.
        type_name: &'static str,
        /// Its object name.
        name: String,
        /// What the hook returned.
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Context objects dereference each other while being built: a factory or an init hook of
    /// one asks (through a `ContextRef` or `get_object`) for another whose construction needs
    /// the first. The graph allows it (a `ContextRef` is lazy), the order of construction
    /// cannot; reported by the `get`, `try_get` or `get_async` that would otherwise wait forever.
    #[error(
        "context objects need each other while being built: {}; a factory or init hook dereferences a `ContextRef` (or calls `get_object`) whose object needs the first one; defer that access until after construction (in a method, or a `complete` hook)",
        .chain.join(" -> ")
    )]
    EagerCycle {
        /// The objects on the cycle, the first repeated at the end, as `type ("name")`.
        chain: Vec<String>,
    },

    // The App's lifecycle: start-up, shutdown, deadlines (`ErrorKind::Lifecycle`).
    /// `build()` ran past [`AppBuilder::start_timeout`](crate::AppBuilder::start_timeout).
    #[error(
        "the App did not start within {timeout:?} (`AppBuilder::start_timeout`); still running: {}",
        .running.join(", ")
    )]
    StartTimeout {
        /// The deadline.
        timeout: std::time::Duration,
        /// The constructors and init hooks still running, as `` my_app::Type ("name") (stage) ``.
        running: Vec<String>,
    },
    /// [`App::shutdown`](crate::App::shutdown) cut hosted services or destroy hooks that ran
    /// past [`AppBuilder::stop_timeout`](crate::AppBuilder::stop_timeout).
    #[error("shutting down cut what did not stop within {timeout:?} (`AppBuilder::stop_timeout`): {}", .cut.join(", "))]
    StopTimeout {
        /// The deadline of each phase.
        timeout: std::time::Duration,
        /// The hosted services and destroy hooks cut, and the destroy hooks never run.
        cut: Vec<String>,
    },
    /// A hosted service could not start, or failed with [`OnFailure::StopApp`](crate::hosted::OnFailure::StopApp).
    #[error("hosted service {service} {reason}")]
    Hosted {
        /// The service's proto, as errors name it.
        service: String,
        /// What happened.
        reason: String,
    },
    /// An object was asked for once `App::shutdown` had begun destroying what would hold it:
    /// a lazy singleton once singletons are being destroyed, a tenant's object once its cache
    /// is closed. Built then, it would never be destroyed. (While shutdown still waits for
    /// scopes, event handlers and jobs, lazy singletons are built as usual, and destroyed with
    /// the others.)
    #[error("the App has shut down, so `{wanted}` can no longer be built")]
    ShutDown {
        /// The type of the object.
        wanted: &'static str,
    },
    /// A `Provider` was used before `build()` returned, or after its App was dropped.
    #[error(
        "`Provider<{wanted}>` was used while its App is not built (from a singleton's constructor or init hook) or after the App was dropped; use it once `build()` has returned"
    )]
    AppNotReady {
        /// The transient type.
        wanted: &'static str,
    },
    /// `App::reload_config` was called once `App::shutdown` had begun: its change hooks would
    /// run on singletons being destroyed.
    #[error(
        "the App is shutting down, so its configuration is no longer reloaded (change hooks would run on singletons being destroyed)"
    )]
    ReloadAfterShutdown,
    /// A singleton was not built: the App was built with roots
    /// ([`AppBuilder::root`](crate::AppBuilder::root)) and none of them reaches it.
    #[error(
        "singleton `{wanted}` was not built: it is not reachable from the roots given to `AppBuilder::root`; add it (or something that injects it) as a root"
    )]
    NotBuilt {
        /// The singleton.
        wanted: &'static str,
    },

    // A lookup by type or name (`ErrorKind::Lookup`).
    /// `get_object` found no proto of the requested type (or name).
    #[error(
        "no proto of type `{wanted}`{} is registered in this App{}",
        .name.as_ref().map(|n| format!(" named \"{n}\"")).unwrap_or_default(),
        if .near.is_empty() { String::new() } else { format!("; did you mean {}?", .near.join(" or ")) }
    )]
    NotFound {
        /// The requested type.
        wanted: &'static str,
        /// The requested name, if any.
        name: Option<String>,
        /// Registered protos whose type or name is close to the one asked for, as `type
        /// ("name")`: a typo, or the same type under another path (at most three).
        near: Vec<String>,
    },
    /// [`Keyed::get`](crate::Keyed::get) was given a name that none of the providers has.
    #[error("no instance of `{wanted}` is named \"{name}\"; the instances are: {}", if .known.is_empty() { "none".to_owned() } else { .known.join(", ") })]
    UnknownInstance {
        /// The type.
        wanted: &'static str,
        /// The name asked for.
        name: String,
        /// The names there are, quoted.
        known: Vec<String>,
    },

    // Context scopes and tenants (`ErrorKind::Scope`).
    /// A context object was asked for while no context scope is active.
    #[error(
        "no context scope is active, so there is no `{wanted}` to return; run the code inside `app.run_in_context(..)` (or a tegu-http request), and use `tegu_core::spawn` instead of `tokio::spawn` to carry the scope into a task"
    )]
    NoScope {
        /// The requested type.
        wanted: &'static str,
    },
    /// A [`TenantRef`](crate::tenant::TenantRef) was read in a scope that serves no tenant.
    #[error(
        "`{wanted}` needs the scope's tenant, and this scope has none: in a tegu-http request, have the router read it (`RouterBuilder::tenant(TenantFrom::header(\"x-tenant\"))`); elsewhere, open the scope with `app.scope().tenant(key)?.run(..)` (in a job, one per tenant)"
    )]
    NoTenant {
        /// The `TenantObjects` whose object was asked for.
        wanted: &'static str,
    },
    /// A lineage type ([`ProtoDef::lineage`](crate::ProtoDef::lineage)) was read in a scope that
    /// has no value of it: nobody seeded it, and the work was not caused by a request that had one.
    #[error(
        "`{wanted}` travels with a request's lineage, and this scope has none: seed it where the scope opens (`app.scope().lineage(..)`, or a `Lineage` a tower layer puts in the request's extensions); the tasks, handlers and jobs of that scope inherit it"
    )]
    NoLineage {
        /// The lineage type asked for.
        wanted: &'static str,
    },
    /// A handler reads a lineage type (a tenant, a user), or a proto only a request's scope is
    /// given ([`ProtoDef::seed_only`](crate::ProtoDef::seed_only): tegu-http's `RequestHead`,
    /// which its `RequestId` is built from), that an emitter of its event cannot give it: a
    /// `#[schedule]` that declares `emits(E)` runs outside any request, and so does every
    /// handler of the events it causes.
    #[error(
        "`{handler}` handles `{event}`, which {emitter} emits outside any request, but it reads `{wanted}` (through {}): there it would fail at run time; emit the event in a scope that has one (in the job: `app.scope().tenant(key)?.run(..)` for each tenant, then drop `emits(..)` from it), or take `{wanted}` out of the handler's graph",
        .through.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(" → ")
    )]
    LineageUnmet {
        /// The handler, `Type::method`.
        handler: String,
        /// The event type it handles.
        event: &'static str,
        /// Who emits it outside a request: the schedule, and the handlers between.
        emitter: String,
        /// The lineage type, or the `seed_only` proto, it reads.
        wanted: &'static str,
        /// The protos through which it reads it, the handler's first.
        through: Arc<[String]>,
    },
    /// A lineage type cannot travel as declared: its header is no header name, or another
    /// type's too, or its log field is no field of the spans or another type's too.
    #[error("lineage type `{ty}` cannot travel: {why}")]
    LineageType {
        /// The lineage type.
        ty: &'static str,
        /// What is wrong, and the fix.
        why: String,
    },
    /// A tenant key breaks the rules of a key ([`Tenant::new`](crate::tenant::Tenant::new)): it comes
    /// from a client, and is written to logs and errors.
    #[error(
        "a tenant key is refused: {why}; a key is 1 to 128 ASCII letters, digits, `-`, `_` and `.` (check the header or host it is read from)"
    )]
    TenantKey {
        /// Which rule it breaks (never the key itself).
        why: String,
    },
    /// The scope ended (its objects are destroyed), but a background task asked for an object.
    #[error(
        "the context scope has ended, so `{wanted}` can no longer be created; a background task outlived its scope's timeout"
    )]
    ScopeClosed {
        /// The requested type.
        wanted: &'static str,
    },
    /// A context object with a completion hook was first asked for after its scope's
    /// completion phase was over: by a background task, a streamed response body, a destroy
    /// hook. Created then, it would never be completed (a unit of work would take writes that
    /// no commit follows), so it is not created. Objects created *while* the phase runs (by a
    /// completion hook) are completed in a further pass instead.
    #[error(
        "`{wanted}` has a completion hook, but its context scope's completion phase is over (the scope's work has returned; for HTTP, the response is fixed), so it would never be completed; create it before the work returns (in a handler: touch it before answering), or give the late work a scope of its own (`App::run_in_context`)"
    )]
    LateCompletion {
        /// The requested type.
        wanted: &'static str,
    },
    /// A `ContextRef` or `get_object` of one `App` was used inside a scope of another `App`.
    #[error("`{wanted}` was requested inside a context scope of another App")]
    ForeignScope {
        /// The requested type.
        wanted: &'static str,
    },
    /// `get()` was called on a context proto that is built asynchronously (an async
    /// constructor or init hook, its own or a by-value dependency's).
    #[error(
        "`{wanted}` (or something it is built from) has an async constructor or init hook; use `get_async().await`"
    )]
    AsyncInit {
        /// The requested type.
        wanted: &'static str,
    },

    // Event handlers and scheduled jobs (`ErrorKind::Work`).
    /// A `#[schedule]` job cannot be set up or run: its cron expression does not parse, or
    /// `App::run_schedule` names no job or one already running.
    #[error("scheduled job `{job}` {reason}")]
    Schedule {
        /// The job, `Type::method`.
        job: String,
        /// What is wrong.
        reason: String,
    },
    /// A `#[schedule]` job run by `App::run_schedule` failed (returned an error or panicked).
    #[error("scheduled job `{job}` failed: {source}")]
    JobFailed {
        /// The job, `Type::method`.
        job: String,
        /// Its error.
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// A `before_commit` event handler (`#[event_handler(before_commit)]`) failed: returned an
    /// error or panicked. It ran in the completion phase of the scope that emitted the event,
    /// which fails with it.
    #[error("event handler `{handler}` of `{event}` failed before its scope's commit: {source}")]
    EventHandler {
        /// The event's type.
        event: &'static str,
        /// The handler, as `Type::method`.
        handler: String,
        /// What the handler returned, or its panic.
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The event transport (`dyn EventTransport`) failed to send an event in its scope's
    /// completion phase, which fails with it.
    #[error("the event transport failed to send an event before its scope's commit: {source}")]
    EventTransport {
        /// What the transport returned, or its panic.
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },

    /// Several graph errors found in one build, in a stable order.
    #[error("{} errors in the object graph:\n{}", .0.len(), .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Multiple(Vec<DiError>),
}

/// The message, then where the protos it is about are declared, one `--> file:line:column` per
/// line (the field first, then the proto): what `fn main() -> Result<(), DiError>` prints.
impl std::fmt::Debug for DiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)?;
        for (site, what) in self.sites() {
            write!(f, "\n  --> {site}: {what}")?;
        }
        Ok(())
    }
}
