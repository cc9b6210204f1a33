//! The App's configuration: layered sources merged into one tree, typed sections read from it
//! at build ([`Config`]), and live configuration: sections read again while the App serves,
//! reached through [`ConfigRef`] and reloaded with [`App::reload_config`](crate::App::reload_config)
//! ([`ConfigReload`] says what changed).
//!
//! Sources, lowest precedence first: TOML files (each followed by its profile variant,
//! `app.prod.toml` after `app.toml`), environment variables (`APP_DB__URL` is `db.url`), and
//! values set in code. An error names the file, the variable or the call that set the value.
//! A section is a `#[config_proto(prefix = "db")]` struct.

// figment provides the value model (its `Value`, its serde deserializer with key paths in
// errors) and the environment provider; the layers are merged here, by moving each source's
// tree into the result, since `Figment` keeps every layer and clones the merged tree to hand it
// out (measured in `benches/RESULTS.md`). Where a value came from is asked of the sources again,
// from the highest layer down, only when an error or `Config::origin` needs it.

mod describe;
mod env;
mod known;
mod probe;
mod record;
pub(crate) mod section;
mod taken;
mod tree;

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use figment::value::{Dict, Empty, Tag, Value};
use serde::de::DeserializeOwned;

use crate::error::DiError;

// Live configuration: the sections read again while the App serves.
pub use crate::reload::{ConfigRef, ConfigReload};

pub use known::ConfigReader;
use record::record;
pub(crate) use record::recording;
use tree::{find, merge, nest, segments};

/// One source, as the builder collected it.
#[derive(Clone)]
enum Source {
    File { path: PathBuf, required: bool },
    Env { prefix: String },
    Value { key: String, value: Result<Value, String>, at: &'static Location<'static> },
}

/// The configuration sources of an [`AppBuilder`](crate::AppBuilder), merged at build (and
/// again at each reload of a live configuration).
#[derive(Default, Clone)]
pub(crate) struct Sources {
    sources: Vec<Source>,
    pub(crate) profile: Option<String>,
    /// Prefixes whose keys code reads outside the container (`AppBuilder::config_known`).
    pub(crate) known: Vec<String>,
}

/// A source that was read: what to ask again where a value came from.
enum Layer {
    File(PathBuf),
    Env(String),
    /// The key, the value set there (as a tree from the root), and the caller.
    Value(String, Dict, &'static Location<'static>),
}

impl Layer {
    /// The layer's values. A file is read again (only errors and `origin` ask).
    fn data(&self) -> Result<Dict, String> {
        match self {
            Layer::File(path) => read_toml(path),
            Layer::Env(prefix) => Ok(env::data(prefix)),
            Layer::Value(_, dict, _) => Ok(dict.clone()),
        }
    }

    /// Where the key at `keys` is set in this layer: a file with its line, or the call.
    fn locate(&self, keys: &[String]) -> String {
        match self {
            Layer::File(path) => match tree::toml_line(path, keys) {
                Some(line) => format!("file {}, line {line}", path.display()),
                None => format!("file {}", path.display()),
            },
            Layer::Env(prefix) => {
                format!("env {}", env::name(prefix, &keys.iter().map(String::as_str).collect::<Vec<_>>()))
            }
            Layer::Value(key, _, at) => format!("config_value(\"{key}\") at {at}"),
        }
    }

    fn describe(&self, keys: &[&str]) -> String {
        match self {
            Layer::File(path) => format!("file {}", path.display()),
            Layer::Env(prefix) => format!("env {}", env::name(prefix, keys)),
            Layer::Value(key, _, at) => format!("config_value(\"{key}\") at {at}"),
        }
    }
}

impl Sources {
    pub(crate) fn file(&mut self, path: PathBuf, required: bool) {
        self.sources.push(Source::File { path, required });
    }

    pub(crate) fn env(&mut self, prefix: String) {
        self.sources.push(Source::Env { prefix });
    }

    pub(crate) fn value(&mut self, key: String, value: Result<Value, String>, at: &'static Location<'static>) {
        self.sources.push(Source::Value { key, value, at });
    }

    /// The folders a watch of the configuration files watches, each once, in the order
    /// found: each file's folder as written (a profile variant is in its file's), and, for
    /// every symbolic link on the way to a file (the file itself, or a folder above it: a
    /// release's `current`, a Kubernetes ConfigMap's `..data`), the folder that holds the link
    /// (where swapping it shows) and the folders on the way to its target. Read again after
    /// each change: a swapped link leads elsewhere.
    #[cfg_attr(not(feature = "watch"), allow(dead_code))]
    pub(crate) fn folders(&self) -> Vec<PathBuf> {
        let mut folders: Vec<PathBuf> = Vec::new();
        let mut add = |folder: &Path| {
            let folder = if folder.as_os_str().is_empty() { PathBuf::from(".") } else { folder.to_path_buf() };
            if !folders.contains(&folder) {
                folders.push(folder);
            }
        };
        for source in &self.sources {
            let Source::File { path, .. } = source else { continue };
            let mut next = Some(path.clone());
            // At most 40 links, as the kernel follows.
            for _ in 0..40 {
                let Some(path) = next.take() else { break };
                add(path.parent().unwrap_or(Path::new(".")));
                // The first link on the way, from the root down: its folder, then its target.
                let mut prefix = PathBuf::new();
                for component in path.components() {
                    prefix.push(component);
                    let is_link = prefix.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink());
                    if let (true, Ok(target)) = (is_link, std::fs::read_link(&prefix)) {
                        let holder = prefix.parent().unwrap_or(Path::new("."));
                        add(holder);
                        let rest = path.strip_prefix(&prefix).unwrap_or(Path::new(""));
                        next = Some(holder.join(target).join(rest));
                        break;
                    }
                }
            }
        }
        folders
    }

    /// Merges the sources, files first, then environment variables, then values. The errors
    /// are those of the sources themselves: a malformed file, a missing required one, a value
    /// that is not serializable.
    pub(crate) fn load(self) -> Result<Config, Vec<DiError>> {
        let mut merged = Dict::new();
        let mut env = Dict::new();
        let mut layers = Vec::new();
        let mut errors = Vec::new();
        let mut hints = Hints::default();
        let rank = |s: &Source| match s {
            Source::File { .. } => 0,
            Source::Env { .. } => 1,
            Source::Value { .. } => 2,
        };
        let mut sources = self.sources;
        sources.sort_by_key(rank); // stable: files keep their order among themselves
        let profile = match self.profile.as_deref() {
            Some(profile) if !is_profile_name(profile) => {
                errors.push(DiError::InvalidProfile { profile: profile.to_owned() });
                None // no variant file is read for it
            }
            profile => profile,
        };
        for source in sources {
            match source {
                Source::File { path, required } => {
                    let variant = profile.and_then(|p| profile_variant(&path, p));
                    for (path, required) in std::iter::once((path, required)).chain(variant.map(|v| (v, false))) {
                        let source_name = format!("file {}", path.display());
                        if !path.is_file() {
                            if required {
                                errors.push(DiError::ConfigSource { source_name, message: "not found".to_owned() });
                            }
                            continue;
                        }
                        match read_toml(&path) {
                            Ok(dict) => merge(&mut merged, dict),
                            Err(message) => errors.push(DiError::ConfigSource { source_name, message }),
                        }
                        hints.files.push(path.display().to_string());
                        layers.push(Layer::File(path));
                    }
                }
                Source::Env { prefix } => {
                    let upper = prefix.to_ascii_uppercase();
                    match env::fit(env::data(&prefix), Some(&merged), &prefix, &mut Vec::new()) {
                        Ok(dict) => {
                            merge(&mut env, dict.clone());
                            merge(&mut merged, dict);
                        }
                        Err(message) => {
                            errors.push(DiError::ConfigSource { source_name: format!("env {upper}*"), message });
                        }
                    }
                    hints.env.push(upper);
                    layers.push(Layer::Env(prefix));
                }
                Source::Value { key, value, at } => match value.map(|v| nest(&key, v)) {
                    Ok(dict) => {
                        merge(&mut merged, dict.clone());
                        layers.push(Layer::Value(key, dict, at));
                    }
                    Err(message) => errors.push(DiError::ConfigSource {
                        source_name: format!("config_value(\"{key}\") at {at}"),
                        message,
                    }),
                },
            }
        }
        if errors.is_empty() {
            let merged = Value::Dict(Tag::Default, merged);
            let env = Value::Dict(Tag::Default, env);
            Ok(Config { inner: Arc::new(Inner { merged, layers, env, hints, profile: self.profile }) })
        } else {
            Err(errors)
        }
    }
}

/// `app.toml` with profile `prod`: `app.prod.toml`, in the same folder.
fn profile_variant(path: &Path, profile: &str) -> Option<PathBuf> {
    let stem = path.file_stem()?.to_str()?;
    let name = match path.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}.{profile}.{ext}"),
        None => format!("{stem}.{profile}"),
    };
    Some(path.with_file_name(name))
}

/// Whether `profile` can name a profile: 1 to 64 ASCII letters, digits, `-` and `_`. It is
/// joined into file names (`app.{profile}.toml`), so nothing that reads as a path (`a/../../x`).
fn is_profile_name(profile: &str) -> bool {
    (1..=64).contains(&profile.len()) && profile.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A TOML file, parsed with `toml` 1's parser and converted to figment's values directly:
/// figment's own TOML provider (`toml` 0.8 through serde) spent about twice the instructions on
/// a file of many sections (callgrind, 1000 sections; `benches/RESULTS.md`).
///
/// Errors show no text of the file (a line may hold a secret): a syntax error gives its line,
/// column and what was expected.
fn read_toml(path: &Path) -> Result<Dict, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let table = toml::de::DeTable::parse(&text).map_err(|e| {
        let at = match e.span() {
            Some(span) => {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                format!("line {line}, column {column}: ")
            }
            None => String::new(),
        };
        format!("{at}{}", e.message().trim_end())
    })?;
    from_toml_table(table.get_ref(), &mut Vec::new())
}

fn from_toml_table<'a>(table: &'a toml::de::DeTable<'_>, path: &mut Vec<&'a str>) -> Result<Dict, String> {
    let mut dict = Dict::new();
    for (key, value) in table.iter() {
        path.push(key.get_ref());
        let value = from_toml(value.get_ref(), path)?;
        path.pop();
        dict.insert(key.get_ref().to_string(), value);
    }
    Ok(dict)
}

/// A TOML value as figment's; a number out of range is an error naming the key, not the value.
fn from_toml<'a>(value: &'a toml::de::DeValue<'_>, path: &mut Vec<&'a str>) -> Result<Value, String> {
    use toml::de::DeValue;
    let out_of_range = |what: &str, path: &[&str]| format!("key {}: {what}", path.join("."));
    Ok(match value {
        DeValue::String(s) => Value::from(s.to_string()),
        DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Value::from(n),
            Err(_) => Value::from(
                u64::from_str_radix(i.as_str(), i.radix())
                    .map_err(|_| out_of_range("an integer out of the range of 64 bits", path))?,
            ),
        },
        DeValue::Float(f) => {
            Value::from(f.as_str().parse::<f64>().map_err(|_| out_of_range("a float that does not parse", path))?)
        }
        DeValue::Boolean(b) => Value::from(*b),
        DeValue::Datetime(d) => Value::from(d.to_string()),
        DeValue::Array(a) => {
            let mut items = Vec::with_capacity(a.len());
            for item in a.iter() {
                items.push(from_toml(item.get_ref(), path)?);
            }
            Value::from(items)
        }
        DeValue::Table(t) => Value::from(from_toml_table(t, path)?),
    })
}

/// Where a missing key could be set, for the error's hint.
#[derive(Default)]
struct Hints {
    files: Vec<String>,
    env: Vec<String>,
}

struct Inner {
    /// The merged values: each section reads its part of it.
    merged: Value,
    /// The sources read, lowest first: asked again where a value came from.
    layers: Vec<Layer>,
    /// What the environment set (strings, read leniently).
    env: Value,
    hints: Hints,
    profile: Option<String>,
}

/// The merged configuration of an [`App`](crate::App): read by `#[config_proto]` sections at
/// build, and by code that needs a key at run time ([`App::config`](crate::App::config)).
///
/// Cheap to clone (one `Arc`).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = tegu_core::App::builder()
///     .config_known("db") // read with `config().get` below, by no section
///     .config_value("db.pool", 4)
///     .config_value("db.url", "sqlite::memory:")
///     .build()
///     .await?;
/// let config = app.config();
/// assert_eq!(config.get::<u32>("db.pool")?, 4);
/// assert!(config.contains("db.url"));
/// assert!(!config.contains("db.user"));
/// assert!(config.origin("db.pool").unwrap().starts_with("config_value(\"db.pool\")"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Config {
    inner: Arc<Inner>,
}

impl Default for Config {
    fn default() -> Self {
        Sources::default().load().unwrap_or_else(|_| unreachable!("no source, no error"))
    }
}

impl Config {
    /// The value at `key` (a dotted path such as `db.pool`), deserialized as `T`.
    ///
    /// # Errors
    ///
    /// [`DiError::ConfigMissing`] if no source sets `key` (and `T` has no value for absence,
    /// as `Option` has), [`DiError::ConfigInvalid`] if the value does not fit `T`, naming where
    /// it came from.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().config_known("http").config_value("http.port", 8080).build().await?;
    /// assert_eq!(app.config().get::<u16>("http.port")?, 8080);
    /// assert!(app.config().get::<u16>("http.host").is_err()); // missing
    /// # Ok(()) }
    /// ```
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<T, DiError> {
        match self.inner.merged.find_ref(key) {
            Some(value) => self.read(key, value, std::any::type_name::<T>()),
            None => T::deserialize(&Value::Empty(Tag::Default, Empty::None))
                .map_err(|_| self.missing(key, std::any::type_name::<T>())),
        }
    }

    /// Whether some source sets `key`.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().config_known("http").config_value("http.port", 8080).build().await?;
    /// assert!(app.config().contains("http.port") && !app.config().contains("http.host"));
    /// # Ok(()) }
    /// ```
    pub fn contains(&self, key: &str) -> bool {
        self.inner.merged.find_ref(key).is_some()
    }

    /// Where the value at `key` came from: `file config/app.toml`, `env APP_DB__URL`,
    /// `config_value("db.url") at src/main.rs:12:5`.
    ///
    /// Asks the sources again, from the highest down (a file is read again): meant for errors
    /// and diagnostics, not for a hot path.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().config_known("http").config_value("http.port", 8080).build().await?;
    /// let origin = app.config().origin("http.port").unwrap_or_default();
    /// assert!(origin.contains("config_value"), "{origin}");
    /// # Ok(()) }
    /// ```
    pub fn origin(&self, key: &str) -> Option<String> {
        if !self.contains(key) {
            return None;
        }
        let keys: Vec<&str> = key.split('.').collect();
        let lower = key.to_ascii_lowercase();
        let layer = self.inner.layers.iter().rev().find(|layer| {
            // The environment's keys are lowercase until fitted to the files' spelling.
            let key = if matches!(layer, Layer::Env(_)) { lower.as_str() } else { key };
            layer.data().is_ok_and(|dict| Value::Dict(Tag::Default, dict).find_ref(key).is_some())
        })?;
        Some(layer.describe(&keys))
    }

    /// The active profile, if one was set with [`AppBuilder::profile`](crate::AppBuilder::profile).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().profile("test").build().await?;
    /// assert_eq!(app.config().profile(), Some("test"));
    /// # Ok(()) }
    /// ```
    pub fn profile(&self) -> Option<&str> {
        self.inner.profile.as_deref()
    }

    /// The merged value at `prefix`, as read (a live configuration compares it across reloads).
    pub(crate) fn raw(&self, prefix: &str) -> Option<Value> {
        self.inner.merged.find_ref(prefix).cloned()
    }

    /// Deserializes the section at `prefix` as `T`, for the config proto `section`: an absent
    /// section reads as an empty table, so that a struct whose fields all have serde defaults
    /// needs no configuration.
    pub(crate) fn section<T: DeserializeOwned>(&self, prefix: &str, section: &'static str) -> Result<T, DiError> {
        let empty = Value::from(Dict::new());
        let value = self.inner.merged.find_ref(prefix).unwrap_or(&empty);
        self.read(prefix, value, section)
    }

    /// Deserializes `value`, found at `key`. Values from the environment are strings; where
    /// the environment set something under `key`, strings are read leniently, as numbers or
    /// booleans where the type asks for them (figment's lossy reading, through a small figment
    /// of this value only), and every key the environment set must be one that `T` takes: a
    /// lowercased key is matched to the field it names whatever its case (`maxconn` to
    /// `maxConn`), one that names no field is refused ([`DiError::ConfigUnknownEnv`]).
    /// Elsewhere, the values are read as typed, straight from the tree.
    fn read<T: DeserializeOwned>(&self, key: &str, value: &Value, section: &'static str) -> Result<T, DiError> {
        record::<T>(key, value, section);
        let Some(env) = self.inner.env.find_ref(key) else {
            return T::deserialize(value).map_err(|e| self.error(e, key, section));
        };
        let mut value = value.clone();
        loop {
            let (read, ignored) = read_lossy::<T>(&value);
            let read = read.map_err(|e| self.error(e, key, section))?;
            // A key under a table whose type shows no fields (a flattened part) is asked.
            let set_under = |leaf: &[String]| find(env, leaf).is_some() && record::no_fields::<T>(leaf);
            let skipped = ignored.into_iter().find(|path| find(env, path).is_some());
            let Some(path) = skipped.or_else(|| taken::untaken::<T>(&value, true, set_under).into_iter().next()) else {
                return Ok(read);
            };
            let (last, parent) = path.split_last().expect("an ignored key has a path");
            let parent: Vec<&str> = parent.iter().map(String::as_str).collect();
            let fields = probe::fields_at::<T>(&parent).unwrap_or_default();
            match fields.iter().find(|f| f.eq_ignore_ascii_case(last) && *f != last) {
                Some(field) => rename(&mut value, &parent, last, field),
                None => {
                    let mut keys: Vec<&str> = key.split('.').filter(|k| !k.is_empty()).collect();
                    keys.extend(path.iter().map(String::as_str));
                    let variable = self.env_variable(&keys);
                    let fields = fields.iter().map(|f| (*f).to_owned()).collect();
                    return Err(DiError::ConfigUnknownEnv { variable, key: keys.join("."), section, fields });
                }
            }
        }
    }

    /// The environment variable that set `keys`: of the highest environment layer that has
    /// them (their lowercase form, as variables give them).
    fn env_variable(&self, keys: &[&str]) -> String {
        let lower = keys.join(".").to_ascii_lowercase();
        let mut prefixes = self.inner.layers.iter().rev().filter_map(|layer| match layer {
            Layer::Env(prefix) => Some(prefix),
            _ => None,
        });
        let set = prefixes.find(|prefix| Value::Dict(Tag::Default, env::data(prefix)).find_ref(&lower).is_some());
        set.map(|prefix| env::name(prefix, keys)).unwrap_or_else(|| keys.join("__").to_ascii_uppercase())
    }

    /// The names of the tables under `prefix`, in order: the instances of a multi-instance
    /// section.
    pub(crate) fn instance_names(&self, prefix: &str, section: &'static str) -> Result<Vec<String>, DiError> {
        match self.inner.merged.find_ref(prefix) {
            None => Ok(Vec::new()),
            Some(Value::Dict(_, dict)) => Ok(dict.keys().cloned().collect()),
            Some(_) => Err(DiError::ConfigInvalid {
                key: prefix.to_owned(),
                section,
                message: "expected a table of instances, one table per instance name".to_owned(),
                origin: self.origin(prefix),
            }),
        }
    }

    fn error(&self, e: figment::Error, prefix: &str, section: &'static str) -> DiError {
        let mut path: Vec<&str> = prefix.split('.').filter(|s| !s.is_empty()).collect();
        path.extend(e.path.iter().map(String::as_str));
        if let figment::error::Kind::MissingField(field) = &e.kind {
            path.push(field);
            return self.missing(&path.join("."), section);
        }
        let key = path.join(".");
        let message = describe::kind(&e.kind, self.inner.merged.find_ref(&key));
        DiError::ConfigInvalid { origin: self.origin(&key), key, section, message }
    }

    fn missing(&self, key: &str, section: &'static str) -> DiError {
        let keys: Vec<&str> = key.split('.').collect();
        let mut places: Vec<String> = self.inner.hints.files.clone();
        places.extend(self.inner.hints.env.iter().map(|prefix| env::name(prefix, &keys)));
        let hint = match places.as_slice() {
            [] => "set it with `config_file`, `config_env` or `config_value` on the AppBuilder".to_owned(),
            [one] => format!("set it in {one}"),
            [rest @ .., last] => format!("set it in {} or {last}", rest.join(", ")),
        };
        DiError::ConfigMissing { key: key.to_owned(), section, hint }
    }
}

std::thread_local! {
    /// The keys the current [`read_lossy`] left unread, each as its path from the value read.
    static IGNORED: RefCell<Vec<Vec<String>>> = const { RefCell::new(Vec::new()) };
}

/// `T` as `serde_ignored` sees it: deserialized through a wrapper that records the keys `T`
/// does not take (into [`IGNORED`]: a `Deserialize` impl has no state of its own), whatever
/// deserializer figment hands it.
struct Watched<T>(T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Watched<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_ignored::deserialize(deserializer, |path| IGNORED.with(|i| i.borrow_mut().push(segments(&path))))
            .map(Watched)
    }
}

/// `value` read leniently as `T`, and the keys it left unread.
fn read_lossy<T: DeserializeOwned>(value: &Value) -> (Result<T, figment::Error>, Vec<Vec<String>>) {
    const AT: &str = "value";
    let figment = figment::Figment::from(figment::providers::Serialized::default(AT, value));
    IGNORED.with(|i| i.borrow_mut().clear());
    let read = figment.extract_inner_lossy::<Watched<T>>(AT).map(|w| w.0).map_err(|mut e| {
        if e.path.last().is_some_and(|p| p == AT) {
            e.path.pop();
        }
        e
    });
    (read, IGNORED.with(|i| std::mem::take(&mut *i.borrow_mut())))
}

/// Renames key `from` of the table at `parent` under `value` to `to`.
fn rename(value: &mut Value, parent: &[&str], from: &str, to: &str) {
    let mut at = value;
    for key in parent {
        at = match at {
            Value::Dict(_, dict) => match dict.get_mut(*key) {
                Some(next) => next,
                None => return,
            },
            Value::Array(_, items) => match key.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(next) => next,
                None => return,
            },
            _ => return,
        };
    }
    if let Value::Dict(_, dict) = at
        && let Some(moved) = dict.remove(from)
    {
        dict.insert(to.to_owned(), moved);
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("files", &self.inner.hints.files)
            .field("env", &self.inner.hints.env)
            .field("profile", &self.inner.profile)
            .finish_non_exhaustive()
    }
}
