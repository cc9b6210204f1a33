//! Live configuration: sections read again while the App serves ([`App::reload_config`]), each
//! scope seeing one version of them all from its first read to its end.
//!
//! A reloadable section is no proto of its own type: the App holds its versions, and
//! singletons hold a [`ConfigRef<T>`]. A scope's first read of any reloadable section pins the
//! version current then, in a context proto of this module ([`Pinned`]); every later read in
//! that scope, of any reloadable section and from any task of the scope, sees the same version.
//! A new scope pins the newest. Outside a scope a read sees the newest.
//!
//! [`App::reload_config`]: crate::App::reload_config

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::config::section::LoadFn;
use crate::config::{Config, Sources};
use crate::context_ref::ContextRef;
use crate::erased::{AnyArc, downcast};
use crate::error::DiError;
use crate::proto::dependency::Dependency;
use crate::proto::descriptor::ProtoDef;
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::factory::{ConfigDef, Factory};
use crate::proto::kinds::InjectKind;
use crate::runtime::AppInner;

/// The live configuration of an App: the sources to read again, the reloadable sections, and
/// the version each new scope pins.
pub(crate) struct Live {
    sources: Sources,
    sections: Vec<Section>,
    current: RwLock<Arc<Version>>,
    /// One reload at a time: two would each build a version from the other's predecessor.
    reloading: Mutex<()>,
    /// Why the last reload failed, until one succeeds (the health report shows it).
    failed: Mutex<Option<String>>,
    hooks: Mutex<Vec<(usize, ChangeHook)>>,
    /// Stops the watch of the files, if any ([`stop`]); dropped with the App, which stops it too.
    stop: tokio::sync::watch::Sender<bool>,
}

/// A hook run with a section's new value after a reload that changed it.
type ChangeHook = Arc<dyn Fn(AnyArc) + Send + Sync>;

/// A reloadable section: where it is and how to read it.
struct Section {
    prefix: String,
    type_name: &'static str,
    load: LoadFn,
}

/// One version of every reloadable section.
pub(crate) struct Version {
    number: u64,
    values: Vec<AnyArc>,
    /// What each section was read from, to tell which sections a reload changed.
    raw: Vec<Option<figment::value::Value>>,
}

/// The version a scope pinned at its first read of a reloadable section: a context proto.
pub(crate) struct Pinned(Arc<Version>);

/// What [`App::reload_config`](crate::App::reload_config) did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigReload {
    /// The version scopes now pin: 1 at build, one more for each reload that changed a section.
    pub version: u64,
    /// The prefixes of the sections that changed, sorted (none: the version stayed).
    pub changed: Vec<String>,
}

impl Live {
    fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Reads the sources again. A source that does not parse, or a section that no longer
    /// reads as its type, fails the whole reload: the version stays, and the error (naming the
    /// key and where it came from, never the value) is logged and kept for the health report.
    pub(crate) fn reload(&self) -> Result<ConfigReload, DiError> {
        let _one = self.reloading.lock().unwrap_or_else(PoisonError::into_inner);
        if *self.stop.borrow() {
            return Err(DiError::ReloadAfterShutdown);
        }
        let old = self.current();
        match self.next(&old) {
            Ok(None) => {
                self.set_failed(None);
                Ok(ConfigReload { version: old.number, changed: Vec::new() })
            }
            Ok(Some((new, changed))) => {
                let new = Arc::new(new);
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&new);
                self.set_failed(None);
                let mut prefixes: Vec<String> = changed.iter().map(|&i| self.sections[i].prefix.clone()).collect();
                prefixes.sort();
                tracing::info!(version = new.number, changed = ?prefixes, "configuration reloaded");
                self.run_hooks(&new, &changed);
                Ok(ConfigReload { version: new.number, changed: prefixes })
            }
            Err(e) => {
                tracing::warn!(error = %e, version = old.number, "configuration reload failed: the App keeps the version it has");
                self.set_failed(Some(e.to_string()));
                Err(e)
            }
        }
    }

    /// The version after `old`, and which sections changed; `None` if none did.
    fn next(&self, old: &Version) -> Result<Option<(Version, Vec<usize>)>, DiError> {
        let config = self.sources.clone().load().map_err(|errors| DiError::collect(errors).unwrap_err())?;
        let (mut values, mut raw, mut changed, mut errors) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, section) in self.sections.iter().enumerate() {
            let now = config.raw(&section.prefix);
            if now == old.raw[i] {
                values.push(Arc::clone(&old.values[i]));
            } else {
                match (section.load)(&config, &section.prefix, section.type_name) {
                    Ok(value) => values.push(value),
                    Err(e) => errors.push(e),
                }
                changed.push(i);
            }
            raw.push(now);
        }
        DiError::collect(errors)?;
        if changed.is_empty() {
            return Ok(None);
        }
        Ok(Some((Version { number: old.number + 1, values, raw }, changed)))
    }

    fn set_failed(&self, why: Option<String>) {
        *self.failed.lock().unwrap_or_else(PoisonError::into_inner) = why;
    }

    /// Runs the change hooks of the `changed` sections, each isolated from the others' panics.
    fn run_hooks(&self, new: &Version, changed: &[usize]) {
        let hooks: Vec<(usize, ChangeHook)> = self.hooks.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for (section, hook) in hooks.iter().filter(|(s, _)| changed.contains(s)) {
            let value = Arc::clone(&new.values[*section]);
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(value))).is_err() {
                tracing::error!(section = %self.sections[*section].prefix, "a configuration change hook panicked");
            }
        }
    }
}

/// A proto's handle on a reloadable configuration section `T`
/// (`#[config_proto(prefix = "..", reloadable)]`, or [`ProtoDef::live_config`]), injected as
/// `#[inject] x: ConfigRef<T>` (by hand: `Arc<ConfigRef<T>>`).
///
/// [`get`](Self::get) returns the version the current scope pinned at its first read of any
/// reloadable section: one request sees one version of all of them, from its start to its end,
/// also across awaits and tasks, while a request that begins after a reload sees the new one.
/// Outside a scope, the newest; so too in a task that outlived its scope's end (past
/// [`AppBuilder::background_task_timeout`](crate::AppBuilder::background_task_timeout)), whose scope's
/// version is gone with its objects (logged once). Cheap to clone.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tegu_core::{App, config::ConfigRef, registry::{Dependency, InjectKind}, ProtoDef};
///
/// #[derive(serde::Deserialize)]
/// struct Limits { per_minute: u32 }
///
/// struct Api { limits: Arc<ConfigRef<Limits>> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let file = std::env::temp_dir().join(format!("di-live-doc-{}.toml", std::process::id()));
/// std::fs::write(&file, "[limits]\nper_minute = 60\n")?;
/// let app = App::builder()
///     .without_inventory()
///     .config_file_required(&file)
///     .register(ProtoDef::live_config::<Limits>("limits"))
///     .register(ProtoDef::singleton::<Api>(|r| Ok(Api { limits: r.arc(0)? }))
///         .dep(Dependency::new::<ConfigRef<Limits>>(InjectKind::Arc, None)))
///     .build()
///     .await?;
/// let api = app.get_object::<Api>()?;
///
/// let seen = app.run_in_context(async {
///     let before = api.limits.get().per_minute;
///     std::fs::write(&file, "[limits]\nper_minute = 120\n").unwrap();
///     app.reload_config().unwrap(); // in the middle of this request
///     (before, api.limits.get().per_minute)
/// }).await;
/// assert_eq!(seen, (60, 60)); // one request, one version
/// let after = app.run_in_context(async { api.limits.get().per_minute }).await;
/// assert_eq!(after, 120); // the next request sees the new one
/// # std::fs::remove_file(&file)?;
/// # Ok(()) }
/// ```
pub struct ConfigRef<T> {
    live: Arc<Live>,
    index: usize,
    pinned: ContextRef<Pinned>,
    _section: PhantomData<fn() -> T>,
}

impl<T> Clone for ConfigRef<T> {
    fn clone(&self) -> Self {
        ConfigRef { live: Arc::clone(&self.live), index: self.index, pinned: self.pinned, _section: PhantomData }
    }
}

impl<T> std::fmt::Debug for ConfigRef<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigRef").field("section", &self.live.sections[self.index].prefix).finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> ConfigRef<T> {
    /// The section in the version the current scope pinned (pinning the newest, if this is
    /// the scope's first read of a reloadable section); outside a scope, the newest.
    pub fn get(&self) -> Arc<T> {
        downcast::<T>(Arc::clone(&self.version().values[self.index]))
    }

    /// The number of the version [`get`](Self::get) reads: 1 at build, one more for each
    /// reload that changed a section.
    pub fn version_number(&self) -> u64 {
        self.version().number
    }

    fn version(&self) -> Arc<Version> {
        match self.pinned.try_get() {
            Ok(pinned) => Arc::clone(&pinned.0),
            // A task that outlived its scope (past the background-task timeout): the scope's
            // objects, its version among them, are gone; it reads the newest, said once.
            Err(DiError::ScopeClosed { .. }) => {
                static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
                if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!(
                        section = %self.live.sections[self.index].prefix,
                        "a task read a reloadable section after its scope ended (it outlived the background-task timeout): it reads the newest version, not its scope's (said once)"
                    );
                }
                self.live.current()
            }
            // No scope (or one of another App): the newest.
            Err(_) => self.live.current(),
        }
    }

    /// Runs `hook` with the section's new value after each reload that changes it, on the
    /// thread that reloads, after the new version is in place. A panicking hook is logged and
    /// harms neither the reload nor the other hooks.
    pub fn on_change(&self, hook: impl Fn(Arc<T>) + Send + Sync + 'static) {
        let hook: ChangeHook = Arc::new(move |value: AnyArc| hook(downcast::<T>(value)));
        self.live.hooks.lock().unwrap_or_else(PoisonError::into_inner).push((self.index, hook));
    }
}

impl ProtoDef {
    /// A reloadable configuration section: the section at `prefix`, read at build like
    /// [`ProtoDef::config`], then again at each
    /// [`App::reload_config`](crate::App::reload_config). Singletons inject it as
    /// `Arc<ConfigRef<T>>` ([`ConfigRef`] says what each read sees); `T` itself is no proto,
    /// so that nothing holds a version forever by mistake. What
    /// `#[config_proto(prefix = "..", reloadable)]` registers.
    ///
    /// See [`ConfigRef`] for an example.
    #[track_caller]
    pub fn live_config<T: serde::de::DeserializeOwned + Send + Sync + 'static>(
        prefix: impl Into<Cow<'static, str>>,
    ) -> ProtoDef {
        let mut def = ProtoDef::config::<T>(prefix);
        if let Factory::Config(section) = &mut def.0.factory {
            section.live = Some(config_ref_def::<T>);
        }
        def
    }
}

impl ProtoDescriptor {
    /// Makes a config section's descriptor ([`ProtoDescriptor::config`]) reloadable, as
    /// [`ProtoDef::live_config`] does: what `#[config_proto(prefix = "..", reloadable)]`
    /// generates. Does nothing to a descriptor of another kind.
    pub const fn reloadable<T: Send + Sync + 'static>(mut self) -> Self {
        if let Factory::Config(section) = &mut self.factory {
            section.live = Some(config_ref_def::<T>);
        }
        self
    }
}

/// The proto of `ConfigRef<T>` for section `index` of `live` (a `Live`, erased: the kernel
/// holds this function in the section's `ConfigDef`), named as the section was.
fn config_ref_def<T: Send + Sync + 'static>(live: AnyArc, index: usize, name: Cow<'static, str>) -> ProtoDescriptor {
    let live = downcast::<Live>(live);
    ProtoDef::singleton::<ConfigRef<T>>(move |r| {
        Ok(ConfigRef { live: Arc::clone(&live), index, pinned: r.context_ref(0)?, _section: PhantomData })
    })
    .name(name)
    .dep(Dependency::new::<Pinned>(InjectKind::ContextRef, None))
    .0
    .taken()
}

/// The live configuration of the reloadable sections `found` (each proto with the value
/// `build()` read from `config`, itself read from `sources`), and the protos it adds in place
/// of theirs: the pinned version (a context proto) and a `ConfigRef<T>` per section.
pub(crate) fn install(
    sources: Sources,
    config: &Config,
    found: Vec<(ProtoDescriptor, AnyArc)>,
) -> (Arc<Live>, Vec<ProtoDescriptor>) {
    let mut sections = Vec::with_capacity(found.len());
    let mut values = Vec::with_capacity(found.len());
    let mut makes = Vec::with_capacity(found.len());
    for (def, value) in found {
        let type_name = def.type_name();
        let Factory::Config(ConfigDef { prefix, load, live: Some(make), .. }) = def.factory else {
            unreachable!("`build()` hands over the reloadable sections only")
        };
        sections.push(Section { prefix: prefix.into_owned(), type_name, load });
        values.push(value);
        makes.push((make, def.name));
    }
    let raw = sections.iter().map(|s| config.raw(&s.prefix)).collect();
    let live = Arc::new(Live {
        sources,
        sections,
        current: RwLock::new(Arc::new(Version { number: 1, values, raw })),
        reloading: Mutex::new(()),
        failed: Mutex::new(None),
        hooks: Mutex::new(Vec::new()),
        stop: tokio::sync::watch::Sender::new(false),
    });
    let current = Arc::clone(&live);
    let pinned = ProtoDef::context::<Pinned>(move |_| Ok(Pinned(current.current()))).name("configVersion");
    let mut protos = vec![pinned.0.taken()];
    for (index, (make, name)) in makes.into_iter().enumerate() {
        protos.push(make(Arc::clone(&live) as AnyArc, index, name));
    }
    (live, protos)
}

/// The App's live configuration, if it has reloadable sections.
fn live_of(app: &AppInner) -> Option<&Arc<Live>> {
    app.handles.live.get::<Arc<Live>>()
}

/// `App::reload_config`: refused once shutdown has begun.
pub(crate) fn reload(app: &AppInner) -> Result<ConfigReload, DiError> {
    if app.lifecycle.reached(crate::runtime::phase::Phase::ShuttingDown) {
        return Err(DiError::ReloadAfterShutdown);
    }
    match live_of(app) {
        Some(live) => live.reload(),
        None => Ok(ConfigReload { version: 0, changed: Vec::new() }),
    }
}

/// Why the last reload failed, if it did and none succeeded since.
pub(crate) fn failed(app: &AppInner) -> Option<String> {
    live_of(app)?.failed.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Stops the watch of the configuration files and refuses reloads (`shutdown`); waits for a
/// reload under way, so that no change hook runs once it returns.
pub(crate) fn stop(app: &AppInner) {
    if let Some(live) = live_of(app) {
        live.stop.send_replace(true);
        drop(live.reloading.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// Watches the folders of `live`'s configuration files (`AppBuilder::watch_config`), those of
/// the symbolic links on the way to them included (`Sources::folders`): after a change
/// there, waits `every`, so that the changes within it are one reload, then reloads on a
/// blocking thread (a reload reads the files) and watches the folders the links lead to now.
/// Stops at [`stop`], or when the App is gone.
///
#[cfg(feature = "watch")]
pub(crate) fn watch(live: &Arc<Live>, every: std::time::Duration) -> Result<(), DiError> {
    use notify::Watcher as _;
    let folders = live.sources.folders();
    if folders.is_empty() {
        tracing::info!("watch_config: the App reads no configuration file; nothing is watched");
        return Ok(());
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("the App was built outside a tokio runtime: its configuration files are not watched");
        return Ok(());
    };
    let refused = |folder: &std::path::Path, e: notify::Error| DiError::ConfigSource {
        source_name: format!("folder {} (watch_config)", folder.display()),
        message: format!("cannot be watched: {e}"),
    };
    let changed = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&changed);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
        // Reading the files (each reload does) is no change.
        Ok(event) if event.kind.is_access() => {}
        Ok(_) => signal.notify_one(),
        Err(e) => tracing::warn!(error = %e, "watch_config: the file watcher reported an error"),
    })
    .map_err(|e| refused(&folders[0], e))?;
    let mut watched = Vec::new();
    for folder in folders {
        if !folder.is_dir() {
            tracing::warn!(folder = %folder.display(), "watch_config: a configuration file's folder does not exist; it is not watched");
            continue;
        }
        watcher.watch(&folder, notify::RecursiveMode::NonRecursive).map_err(|e| refused(&folder, e))?;
        watched.push(folder);
    }
    let weak = Arc::downgrade(live);
    let mut stop = live.stop.subscribe();
    drop(runtime.spawn(async move {
        loop {
            tokio::select! {
                () = changed.notified() => {}
                _ = stop.wait_for(|stopped| *stopped) => return,
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.wait_for(|stopped| *stopped) => return,
            }
            let Some(live) = weak.upgrade() else { return };
            // A failed reload is logged and kept for the health report by `reload` itself.
            let reloading = Arc::clone(&live);
            let _ = tokio::task::spawn_blocking(move || reloading.reload()).await;
            // A link swapped leads to other folders: watch those instead.
            let now = live.sources.folders();
            for gone in watched.iter().filter(|folder| !now.contains(folder)) {
                let _ = watcher.unwatch(gone);
            }
            watched.retain(|folder| now.contains(folder));
            let new: Vec<std::path::PathBuf> =
                now.into_iter().filter(|folder| !watched.contains(folder) && folder.is_dir()).collect();
            for folder in new {
                match watcher.watch(&folder, notify::RecursiveMode::NonRecursive) {
                    Ok(()) => watched.push(folder),
                    Err(e) => tracing::warn!(folder = %folder.display(), error = %e, "watch_config: a folder a link leads to cannot be watched"),
                }
            }
        }
    }));
    Ok(())
}
