//! [`AppBuilder`]: what goes into an App (protos, configuration, overrides, roots).

use std::any::TypeId;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Sources;
use crate::erased::AnyArc;
use crate::proto::descriptor::ProtoDef;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::kinds::Lifetime;
use crate::resolver::Resolver;

/// Collects protos and options, then validates the graph and builds the singletons.
///
/// # Examples
///
/// Replace a proto with a fake in a test:
///
/// ```
/// use tegu_core::{App, ProtoDef};
///
/// struct Mailer { real: bool }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder()
///     .register(ProtoDef::singleton::<Mailer>(|_| Ok(Mailer { real: true })))
///     .override_with(Mailer { real: false })
///     .build()
///     .await?;
/// assert!(!app.get_object::<Mailer>()?.real);
/// # Ok(()) }
/// ```
#[must_use = "an AppBuilder does nothing until `build().await`"]
pub struct AppBuilder {
    pub(super) defs: Vec<ProtoDescriptor>,
    pub(super) linked: Vec<&'static ProtoDescriptor>,
    pub(super) inventory: bool,
    pub(super) overrides: Vec<Override>,
    pub(super) provider_overrides: Vec<ProviderOverride>,
    pub(super) expected: Vec<(TypeId, &'static str, usize)>,
    pub(super) roots: Vec<(TypeId, &'static str)>,
    pub(super) excluded: Vec<(TypeId, &'static str)>,
    pub(super) config: Sources,
    pub(super) background_timeout: Duration,
    pub(super) drain_scopes_timeout: Duration,
    pub(super) start_timeout: Duration,
    pub(super) stop_timeout: Duration,
    pub(super) slow_start: Duration,
    pub(super) health_cache: Duration,
    pub(super) hosted: bool,
    #[cfg(feature = "schedule")]
    pub(super) schedules: bool,
    #[cfg(feature = "watch")]
    pub(super) watch: Option<Duration>,
}

impl AppBuilder {
    /// Adds a TOML configuration file. A missing file is skipped (for optional layers such as
    /// `app.local.toml`; see [`config_file_required`](Self::config_file_required)); a malformed
    /// one fails [`build`](Self::build). With a [`profile`](Self::profile), the file's profile
    /// variant is read right after it, if it exists: `config/app.prod.toml` for
    /// `config/app.toml` and profile `prod`.
    ///
    /// Precedence, lowest first: files (in the order added), then
    /// [`config_env`](Self::config_env), then [`config_value`](Self::config_value), whatever
    /// the order of the calls. A relative path is relative to the working directory.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::App;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = std::env::temp_dir().join(format!("di-config-file-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("app.toml"), "[http]\nport = 8080\nhost = \"0.0.0.0\"\n")?;
    /// std::fs::write(dir.join("app.prod.toml"), "[http]\nport = 80\n")?;
    ///
    /// let app = App::builder()
    ///     .config_file(dir.join("app.toml"))
    ///     .config_file(dir.join("app.local.toml")) // missing: skipped
    ///     .profile("prod")
    ///     .config_known("http") // read with `config().get` below, by no section
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.config().get::<u16>("http.port")?, 80); // app.prod.toml, read after app.toml
    /// assert_eq!(app.config().get::<String>("http.host")?, "0.0.0.0");
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(()) }
    /// ```
    pub fn config_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.config.file(path.into(), false);
        self
    }

    /// As [`config_file`](Self::config_file), but a missing file fails [`build`](Self::build).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::App;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let missing = std::env::temp_dir().join("di-no-such-dir/app.toml");
    /// let error = App::builder().config_file_required(&missing).build().await.unwrap_err();
    /// assert!(error.to_string().contains("app.toml"), "{error}"); // the error names the file
    /// # }
    /// ```
    pub fn config_file_required(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.config.file(path.into(), true);
        self
    }

    /// Watches the folders of the configuration files and, after a change there, reloads the
    /// configuration ([`App::reload_config`](crate::App::reload_config)) once `every` has
    /// passed: changes within that time are read in one reload, and a request that begins
    /// after it sees the new version. A reload that fails (a file half written, a value that no
    /// longer reads as its type) keeps the version, as `reload_config` does, and the next change
    /// reloads again. The watch stops at shutdown. It watches the folders rather than the
    /// files, so a file replaced by a rename (editors, a Kubernetes ConfigMap's symlink swap)
    /// is seen; any change in them reloads, and a reload that changes nothing is no new
    /// version. An App without reloadable sections (`#[config_proto(.., reloadable)]`) or
    /// without configuration files watches nothing, and says so in a log line.
    ///
    /// The operating system's file events come through the `notify` crate (inotify, FSEvents,
    /// ReadDirectoryChangesW); `build()` fails if they cannot be had for a folder that exists
    /// (the inotify watch limit, say), naming the folder. Needs the `watch` feature.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use tegu_core::{App, config::ConfigRef, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Limits { per_minute: u32 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = std::env::temp_dir().join(format!("di-watch-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("app.toml"), "[limits]\nper_minute = 60\n")?;
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .config_file_required(dir.join("app.toml"))
    ///     .watch_config(Duration::from_millis(100))
    ///     .register(ProtoDef::live_config::<Limits>("limits"))
    ///     .build()
    ///     .await?;
    /// let limits = app.get_object::<ConfigRef<Limits>>()?;
    ///
    /// std::fs::write(dir.join("app.toml"), "[limits]\nper_minute = 120\n")?;
    /// while app.run_in_context(async { limits.get().per_minute }).await != 120 {
    ///     tokio::time::sleep(Duration::from_millis(20)).await; // the watch reloads
    /// }
    /// app.shutdown().await?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "watch")]
    pub fn watch_config(mut self, every: Duration) -> Self {
        self.watch = Some(every);
        self
    }

    /// Adds the environment variables starting with `prefix` as configuration: `__` separates
    /// the levels of a key, and names are lowercased, so with `config_env("APP_")`,
    /// `APP_DB__URL` sets `db.url`. Values are strings, read as the field's type asks:
    /// `APP_DB__POOL=4` fills a `u32`, `APP_DB__PASSWORD=1234` a `String`, `true` / `yes` / `1`
    /// a `bool`. Overrides files; overridden by values. A prefix is a name and its `_`: `"APP"`
    /// is taken as `"APP_"` (else `APP_DB__URL` would set `_db.url`).
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use tegu_core::App;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// // SAFETY: this program's only thread; usually the variables come from the shell.
    /// unsafe {
    ///     std::env::set_var("SHOP_DB__POOL", "8");
    ///     std::env::set_var("SHOP_DB__URL", "postgres://db/shop");
    /// }
    /// let app = App::builder()
    ///     .config_known("db") // read with `config().get` below, by no section
    ///     .config_value("db.url", "sqlite::memory:") // values win over the environment
    ///     .config_env("SHOP_")
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.config().get::<u32>("db.pool")?, 8); // a string read as a u32
    /// assert_eq!(app.config().get::<String>("db.url")?, "sqlite::memory:");
    ///
    /// // The same prefix, without its `_`.
    /// let app = App::builder().config_known("db").config_env("SHOP").build().await?;
    /// assert_eq!(app.config().get::<u32>("db.pool")?, 8);
    /// # Ok(()) }
    /// ```
    pub fn config_env(mut self, prefix: impl Into<String>) -> Self {
        let mut prefix = prefix.into();
        if !prefix.is_empty() && !prefix.ends_with('_') {
            prefix.push('_');
        }
        self.config.env(prefix);
        self
    }

    /// Declares that code outside the container reads the keys under `prefix` (with
    /// [`App::config`](crate::App::config)`().get`, after `build()`), so that they are not
    /// refused as unknown. `build()` and `check()` refuse a key set in a file or with
    /// [`config_value`](Self::config_value) that no `#[config_proto]` section, no
    /// [`ProtoDef::reads_config`](crate::ProtoDef::reads_config) reader and no such prefix
    /// takes: a misspelled key fails loudly instead of leaving its default in place.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::App;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().config_known("features").config_value("features.beta", true).build().await?;
    /// assert!(app.config().get::<bool>("features.beta")?);
    ///
    /// // Undeclared, the key is refused, naming where it was set.
    /// let error = App::builder().config_value("features.beta", true).check().unwrap_err();
    /// assert!(error.to_string().contains("config key `features.beta` (config_value(\"features.beta\")"));
    /// # Ok(()) }
    /// ```
    pub fn config_known(mut self, prefix: impl Into<String>) -> Self {
        self.config.known.push(prefix.into());
        self
    }

    /// Sets configuration key `key` (a dotted path: `db.pool`) to `value`, any serializable
    /// value: the highest precedence, for tests and for values computed at start-up.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use tegu_core::{App, config_proto};
    ///
    /// #[config_proto(prefix = "db")]
    /// #[derive(serde::Deserialize)]
    /// pub struct DbConfig {
    ///     url: String,
    ///     #[serde(default = "four")]
    ///     pool: u32,
    /// }
    /// fn four() -> u32 { 4 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().config_value("db.url", "sqlite::memory:").build().await?;
    /// let db = app.get_object::<DbConfig>()?;
    /// assert_eq!((db.url.as_str(), db.pool), ("sqlite::memory:", 4));
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn config_value(mut self, key: impl Into<String>, value: impl serde::Serialize) -> Self {
        let value = figment::value::Value::serialize(value).map_err(|e| e.kind.to_string());
        self.config.value(key.into(), value, std::panic::Location::caller());
        self
    }

    /// Sets the active profile: protos declared with `profile = "..."` (or
    /// [`ProtoDef::profile`]) register only under their profile, and each configuration file
    /// is followed by its profile variant (`app.prod.toml`). No profile by default.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, ProtoDef};
    ///
    /// trait Mailer: Send + Sync { fn kind(&self) -> &'static str; }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn kind(&self) -> &'static str { "smtp" } }
    /// struct Printer;
    /// impl Mailer for Printer { fn kind(&self) -> &'static str { "printer" } }
    ///
    /// fn builder() -> tegu_core::AppBuilder {
    ///     App::builder()
    ///         .register(ProtoDef::singleton::<Smtp>(|_| Ok(Smtp)).provides::<Smtp, dyn Mailer>(|s| s as Arc<dyn Mailer>).profile("prod"))
    ///         .register(ProtoDef::singleton::<Printer>(|_| Ok(Printer)).provides::<Printer, dyn Mailer>(|p| p as Arc<dyn Mailer>).profile("dev"))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let prod = builder().profile("prod").build().await?;
    /// let dev = builder().profile("dev").build().await?;
    /// assert_eq!(prod.get_provider::<dyn Mailer>()?.kind(), "smtp");
    /// assert_eq!(dev.get_provider::<dyn Mailer>()?.kind(), "printer");
    /// # Ok(()) }
    /// ```
    pub fn profile(mut self, profile: impl Into<String>) -> Self {
        self.config.profile = Some(profile.into());
        self
    }

    /// Starts no timer for the `#[schedule]` jobs: tests run them by hand with
    /// [`App::run_schedule`](crate::App::run_schedule).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// // Tests run jobs by hand (`App::run_schedule`), never on their timers.
    /// let app = tegu_core::App::builder().without_schedules().build().await?;
    /// # let _ = app;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "schedule")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schedule")))]
    pub fn without_schedules(mut self) -> Self {
        self.schedules = false;
        self
    }

    /// Builds only the singletons that `T` reaches (and those of the other roots): the whole
    /// graph is still validated, but a test that touches a handful of services does not build
    /// the thousands of others, nor run their init hooks and their I/O. Reached means: taken by
    /// value, or by a context proto that a root reaches through a `ContextRef`. `T` is a proto's
    /// own type or a type one provides (a `dyn Trait`). Asking for a singleton that was not
    /// built fails with [`DiError::NotBuilt`](crate::DiError::NotBuilt).
    ///
    /// What it saves is the construction and the init hooks of the rest: their I/O and side
    /// effects. In time, little when those are cheap: validating the graph is most of `build()`
    /// (`benches/RESULTS.md`, "Start-up: `build()`").
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, DiError, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// struct Clock;
    /// struct Signup { _clock: Arc<Clock> }
    /// struct Billing; // slow to build, not needed by this test
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Clock>(|_| Ok(Clock)))
    ///     .register(ProtoDef::singleton::<Signup>(|r| Ok(Signup { _clock: r.arc(0)? }))
    ///         .dep(Dependency::new::<Clock>(InjectKind::Arc, None)))
    ///     .register(ProtoDef::singleton::<Billing>(|_| unreachable!("not built")))
    ///     .root::<Signup>()
    ///     .build()
    ///     .await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// assert!(matches!(app.get_object::<Billing>(), Err(DiError::NotBuilt { .. })));
    /// # Ok(()) }
    /// ```
    pub fn root<T: ?Sized + 'static>(mut self) -> Self {
        self.roots.push((TypeId::of::<T>(), core::any::type_name::<T>()));
        self
    }

    /// Requires at least `n` providers of `U` (usually a `dyn Trait` that plugins provide):
    /// `build()` fails naming the ones found, instead of a `Vec<Arc<U>>` coming back short
    /// because the linker dropped a plugin crate the program never names.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, DiError};
    ///
    /// trait Plugin: Send + Sync {}
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let e = App::builder().without_inventory().expect_providers::<dyn Plugin>(1).build().await.unwrap_err();
    /// assert!(matches!(e, DiError::ExpectedProviders { expected: 1, .. }), "{e}");
    /// # }
    /// ```
    pub fn expect_providers<U: ?Sized + 'static>(mut self, n: usize) -> Self {
        self.expected.push((TypeId::of::<U>(), core::any::type_name::<U>(), n));
        self
    }

    /// Leaves out every proto of type `T`, annotated or registered by hand. A dependency that
    /// only `T` provided is then a build error naming it.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, DiError, ProtoDef};
    ///
    /// struct Metrics;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .without_inventory()
    ///     .register(ProtoDef::singleton::<Metrics>(|_| Ok(Metrics)))
    ///     .exclude::<Metrics>()
    ///     .build()
    ///     .await?;
    /// assert!(matches!(app.get_object::<Metrics>(), Err(DiError::NotFound { .. })));
    /// # Ok(()) }
    /// ```
    pub fn exclude<T: ?Sized + 'static>(mut self) -> Self {
        self.excluded.push((TypeId::of::<T>(), core::any::type_name::<T>()));
        self
    }

    /// Registers a proto by hand.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn register(mut self, def: ProtoDef) -> Self {
        self.defs.push(def.0.taken());
        self
    }

    /// Registers lineage type `T`: [`ProtoDef::lineage`], once however often it is asked for or
    /// registered otherwise (the inventory registers tegu's own, and those of
    /// [`lineage_type!`](crate::lineage_type)). Its values follow a request's work: see
    /// [`lineage`](crate::lineage).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ContextRef, lineage::{Lineage, Tenant}};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// // A tenant that services read through `ContextRef<Tenant>`, with no tenant objects.
    /// let app = App::builder().without_inventory().lineage::<Tenant>().lineage::<Tenant>().build().await?;
    /// let tenant = app.scope().tenant("acme")?.run(async { app.get_object::<Tenant>().map(|t| t.key().to_owned()) }).await?;
    /// assert_eq!(tenant, "acme");
    /// # Ok(()) }
    /// ```
    pub fn lineage<T: crate::lineage::Travels>(mut self) -> Self {
        // Linked: one proto per type and name, however many times it is asked for or registered.
        self.linked.push(const { &crate::proto::descriptor::ProtoDescriptor::lineage::<T>("").unsited() });
        self
    }

    /// Registers many protos by hand.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Shard(usize);
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let shards = (0..4).map(|i| ProtoDef::singleton::<Shard>(move |_| Ok(Shard(i))).name(format!("shard{i}")));
    /// let app = App::builder().without_inventory().register_all(shards).build().await?;
    /// assert_eq!(app.get_object_named::<Shard>("shard3")?.0, 3);
    /// # Ok(()) }
    /// ```
    pub fn register_all(mut self, defs: impl IntoIterator<Item = ProtoDef>) -> Self {
        self.defs.extend(defs.into_iter().map(|def| def.0.taken()));
        self
    }

    /// Registers the annotated proto `T` even if the linker dropped its registration.
    ///
    /// The macros register protos where the linker gathers them (a `static` in a link section
    /// on Linux and Android, an `inventory` static constructor elsewhere). A linker may leave
    /// out an object file that nothing references, and with it the registrations of a crate the
    /// program links but never names, typically a plugin that only provides a `dyn Trait`
    /// implementation (dtolnay/inventory#7, rust-lang/rust#133491). Naming one of its protos here references it:
    /// `T` is registered for sure, and so, in practice, are the other protos of its module.
    /// Registering a proto both ways is harmless; the duplicate is dropped.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use tegu_core::{singleton_proto, App};
    ///
    /// #[singleton_proto]
    /// pub struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// // Named here, `Clock` is registered even in an App that ignores the registrations.
    /// let app = App::builder().without_inventory().link::<Clock>().build().await?;
    /// assert!(app.get_object::<Clock>().is_ok());
    /// # Ok(()) }
    /// ```
    pub fn link<T: crate::proto::traits::Proto>(mut self) -> Self {
        self.linked.push(T::descriptor());
        self
    }

    /// Ignores the protos the macros registered (in the link section or through `inventory`,
    /// and descriptors submitted to `inventory` by hand): the App holds only what was added on
    /// this builder. For tests and generated graphs.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Clock;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// // Only what is registered here: an isolated App for a test.
    /// let app = App::builder().without_inventory().register(ProtoDef::singleton::<Clock>(|_| Ok(Clock))).build().await?;
    /// assert_eq!(app.proto_count(), 1);
    /// # Ok(()) }
    /// ```
    pub fn without_inventory(mut self) -> Self {
        self.inventory = false;
        self
    }

    /// Replaces every proto of type `T` with `value`, shared by all who inject it (in every
    /// scope, for a context proto). The fake keeps the proto's name and what it provides, and
    /// drops its dependencies and hooks.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Clock { now: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Clock>(|_| Ok(Clock { now: 1 })))
    ///     .override_with(Clock { now: 42 }) // a fixed clock for the test
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object::<Clock>()?.now, 42);
    /// # Ok(()) }
    /// ```
    pub fn override_with<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.overrides.push(Override {
            type_id: TypeId::of::<T>(),
            type_name: core::any::type_name::<T>(),
            name: None,
            value: Arc::new(value),
        });
        self
    }

    /// Replaces whichever proto provides `U` (usually a `dyn Trait`) with `value`: every
    /// consumer of `Arc<U>`, `Option<Arc<U>>`, `Vec<Arc<U>>` or `Keyed<U>` gets the fake. The
    /// replaced proto is gone (it is not built, and injecting its own type fails `build()`),
    /// unless it provides other traits too: then it stays for those. The fake takes its name,
    /// so qualifiers still find it, and its scope when it was a context proto, so that a
    /// `ContextRef<dyn U>` still reaches it (the same `value` in every scope). With several
    /// providers, each is replaced by the same fake;
    /// [`override_provider_named`](Self::override_provider_named) picks one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tegu_core::{App, registry::{Dependency, InjectKind}, ProtoDef};
    ///
    /// trait Mailer: Send + Sync { fn send(&self, to: &str); }
    /// struct Smtp;
    /// impl Mailer for Smtp { fn send(&self, _: &str) { unreachable!("no mail from tests") } }
    /// #[derive(Default)]
    /// struct FakeMailer { sent: Mutex<Vec<String>> }
    /// impl Mailer for FakeMailer { fn send(&self, to: &str) { self.sent.lock().unwrap().push(to.into()) } }
    /// struct Signup { mailer: Arc<dyn Mailer> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let fake = Arc::new(FakeMailer::default());
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Smtp>(|_| Ok(Smtp)).provides::<Smtp, dyn Mailer>(|s| s))
    ///     .register(ProtoDef::singleton::<Signup>(|r| Ok(Signup { mailer: r.arc(0)? }))
    ///         .dep(Dependency::new::<dyn Mailer>(InjectKind::Arc, None)))
    ///     .override_provider::<dyn Mailer>(fake.clone())
    ///     .build()
    ///     .await?;
    /// app.get_object::<Signup>()?.mailer.send("ada");
    /// assert_eq!(*fake.sent.lock().unwrap(), ["ada"]);
    /// # Ok(()) }
    /// ```
    pub fn override_provider<U: ?Sized + Send + Sync + 'static>(mut self, value: Arc<U>) -> Self {
        self.provider_overrides.push(ProviderOverride {
            type_id: TypeId::of::<U>(),
            type_name: core::any::type_name::<U>(),
            name: None,
            fake: Box::new(move |name, scope| fake_def(value.clone(), name, scope)),
        });
        self
    }

    /// Replaces the provider of `U` named `name` with `value`; the others stay.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tegu_core::{App, Keyed, ProtoDef, registry::{Dependency, InjectKind}};
    ///
    /// trait Store: Send + Sync { fn kind(&self) -> &str; }
    /// struct Pg;
    /// impl Store for Pg { fn kind(&self) -> &str { "postgres" } }
    /// struct Redis;
    /// impl Store for Redis { fn kind(&self) -> &str { "redis" } }
    /// struct Fake;
    /// impl Store for Fake { fn kind(&self) -> &str { "fake" } }
    /// struct Report { stores: Keyed<dyn Store> }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pg>(|_| Ok(Pg)).name("primary").provides::<Pg, dyn Store>(|s| s))
    ///     .register(ProtoDef::singleton::<Redis>(|_| Ok(Redis)).name("cache").provides::<Redis, dyn Store>(|s| s))
    ///     .register(ProtoDef::singleton::<Report>(|r| Ok(Report { stores: r.keyed(0)? }))
    ///         .dep(Dependency::new::<dyn Store>(InjectKind::Keyed, None)))
    ///     .override_provider_named::<dyn Store>("cache", Arc::new(Fake))
    ///     .build()
    ///     .await?;
    /// let report = app.get_object::<Report>()?;
    /// assert_eq!(report.stores.get("cache")?.kind(), "fake");
    /// assert_eq!(report.stores.get("primary")?.kind(), "postgres");
    /// # Ok(()) }
    /// ```
    pub fn override_provider_named<U: ?Sized + Send + Sync + 'static>(
        mut self,
        name: impl Into<String>,
        value: Arc<U>,
    ) -> Self {
        self.provider_overrides.push(ProviderOverride {
            type_id: TypeId::of::<U>(),
            type_name: core::any::type_name::<U>(),
            name: Some(name.into()),
            fake: Box::new(move |name, scope| fake_def(value.clone(), name, scope)),
        });
        self
    }

    /// Replaces the instance of `T` named `name` with `value`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::{App, ProtoDef};
    ///
    /// struct Pool { url: &'static str }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder()
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool { url: "db://primary" })).name("primary"))
    ///     .register(ProtoDef::singleton::<Pool>(|_| Ok(Pool { url: "db://replica" })).name("replica"))
    ///     .override_named("replica", Pool { url: "memory://" })
    ///     .build()
    ///     .await?;
    /// assert_eq!(app.get_object_named::<Pool>("replica")?.url, "memory://");
    /// assert_eq!(app.get_object_named::<Pool>("primary")?.url, "db://primary");
    /// # Ok(()) }
    /// ```
    pub fn override_named<T: Send + Sync + 'static>(mut self, name: impl Into<String>, value: T) -> Self {
        self.overrides.push(Override {
            type_id: TypeId::of::<T>(),
            type_name: core::any::type_name::<T>(),
            name: Some(name.into()),
            value: Arc::new(value),
        });
        self
    }

    /// How long a context scope waits for the tasks it [`spawn`](crate::spawn)ed before
    /// destroying its objects anyway. Default: 5 seconds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().background_task_timeout(Duration::from_secs(1)).build().await?;
    /// # let _ = app;
    /// # Ok(()) }
    /// ```
    pub fn background_task_timeout(mut self, timeout: Duration) -> Self {
        self.background_timeout = timeout;
        self
    }

    /// How long [`App::shutdown`](crate::App::shutdown) waits for context scopes that are still ending before it
    /// destroys the singletons anyway. Default: 10 seconds (twice the background-task timeout,
    /// so that a scope waiting for its tasks still has time for its destroy hooks).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().drain_scopes_timeout(Duration::from_secs(20)).build().await?;
    /// app.shutdown().await?; // waits at most 20 s for scopes still ending
    /// # Ok(()) }
    /// ```
    pub fn drain_scopes_timeout(mut self, timeout: Duration) -> Self {
        self.drain_scopes_timeout = timeout;
        self
    }
}

impl fmt::Debug for AppBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppBuilder")
            .field("added", &self.defs.len())
            .field("inventory", &self.inventory)
            .field("overrides", &(self.overrides.len() + self.provider_overrides.len()))
            .field("excluded", &self.excluded.len())
            .field("roots", &self.roots.len())
            .field("profile", &self.config.profile)
            .field("background_timeout", &self.background_timeout)
            .field("drain_scopes_timeout", &self.drain_scopes_timeout)
            .finish()
    }
}

pub(super) struct Override {
    pub(super) type_id: TypeId,
    pub(super) type_name: &'static str,
    pub(super) name: Option<String>,
    pub(super) value: AnyArc,
}

/// A fake for whichever proto provides a type: how to make its def under a given name.
pub(super) struct ProviderOverride {
    pub(super) type_id: TypeId,
    pub(super) type_name: &'static str,
    pub(super) name: Option<String>,
    pub(super) fake: Box<dyn Fn(Cow<'static, str>, Lifetime) -> ProtoDescriptor + Send + Sync>,
}

/// A proto holding `value`, providing `U`, named `name`: a context proto where it replaces one
/// (so that `ContextRef<U>` still finds it; every scope gets the same `value`), else a
/// singleton.
pub(super) fn fake_def<U: ?Sized + Send + Sync + 'static>(
    value: Arc<U>,
    name: Cow<'static, str>,
    scope: Lifetime,
) -> ProtoDescriptor {
    let factory = move |_: &Resolver<'_>| Ok(value.clone());
    let def = match scope {
        Lifetime::Context => ProtoDef::context::<Arc<U>>(factory),
        Lifetime::Singleton | Lifetime::Transient => ProtoDef::singleton::<Arc<U>>(factory),
    };
    // Declared by no source line of the user's: the override is.
    def.name(name).provides::<Arc<U>, U>(|fake| (*fake).clone()).0.unsited().taken()
}
