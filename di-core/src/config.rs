//! The App's configuration: layered sources merged with figment, typed sections read at build.
//!
//! Sources, lowest precedence first: TOML files (each followed by its profile variant,
//! `app.prod.toml` after `app.toml`), environment variables (`APP_DB__URL` is `db.url`), and
//! values set in code. Every value keeps where it came from, so an error names the file, the
//! variable or the call that set it.

use std::fmt;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use figment::providers::{Env, Serialized};
use figment::value::{Dict, Empty, Map, Tag, Value};
use figment::{Figment, Metadata, Profile, Provider};
use serde::de::DeserializeOwned;

use crate::error::DiError;
use crate::proto::AnyArc;

/// One source, as the builder collected it.
enum Source {
    File { path: PathBuf, required: bool },
    Env { prefix: String },
    Value { key: String, value: Result<Value, String>, at: &'static Location<'static> },
}

/// The configuration sources of an [`AppBuilder`](crate::AppBuilder), merged at build.
#[derive(Default)]
pub(crate) struct Sources {
    sources: Vec<Source>,
    pub(crate) profile: Option<String>,
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

    /// Merges the sources, files first, then environment variables, then values. The errors
    /// are those of the sources themselves: a malformed file, a missing required one, a value
    /// that is not serializable.
    pub(crate) fn load(self) -> Result<Config, Vec<DiError>> {
        let mut figment = Figment::new();
        let mut errors = Vec::new();
        let mut hints = Hints::default();
        let rank = |s: &Source| match s {
            Source::File { .. } => 0,
            Source::Env { .. } => 1,
            Source::Value { .. } => 2,
        };
        let mut sources = self.sources;
        sources.sort_by_key(rank); // stable: files keep their order among themselves
        for source in sources {
            match source {
                Source::File { path, required } => {
                    let variant = self.profile.as_deref().and_then(|p| profile_variant(&path, p));
                    for (path, required) in std::iter::once((path, required)).chain(variant.map(|v| (v, false))) {
                        if !path.is_file() {
                            if required {
                                errors.push(DiError::ConfigSource {
                                    source_name: format!("file {}", path.display()),
                                    message: "not found".to_owned(),
                                });
                            }
                            continue;
                        }
                        let name = format!("file {}", path.display());
                        hints.files.push(path.display().to_string());
                        figment = figment.merge(Named::new(TomlFile(path.clone()), Metadata::from(name, &*path)));
                    }
                }
                Source::Env { prefix } => {
                    let upper = prefix.to_ascii_uppercase();
                    let interpolate = upper.clone();
                    let metadata = Metadata::named(format!("env {upper}"))
                        .interpolater(move |_: &Profile, keys: &[&str]| env_name(&interpolate, keys));
                    hints.env.push(upper);
                    figment = figment.merge(Named::new(Env::prefixed(&prefix).split("__"), metadata));
                }
                Source::Value { key, value, at } => match value {
                    Ok(value) => {
                        let metadata = Metadata::named(format!("config_value(\"{key}\")")).source(at);
                        figment = figment.merge(Named::new(Serialized::default(&key, value), metadata));
                    }
                    Err(message) => errors.push(DiError::ConfigSource {
                        source_name: format!("config_value(\"{key}\") at {at}"),
                        message,
                    }),
                },
            }
        }
        // The merged tree with each value's tag, by a clone rather than a serde round trip.
        let merged = match figment.find_value("") {
            Ok(value) => value,
            Err(e) => {
                let source_name =
                    e.metadata.as_ref().map_or_else(|| "configuration".to_owned(), |m| m.name.to_string());
                errors.push(DiError::ConfigSource { source_name, message: e.kind.to_string() });
                Value::from(Dict::new())
            }
        };
        if errors.is_empty() {
            Ok(Config { inner: Arc::new(Inner { figment, merged, hints, profile: self.profile }) })
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

/// The variable that sets `keys` under `prefix`: `APP_` and `db.url` give `APP_DB__URL`.
fn env_name(prefix: &str, keys: &[&str]) -> String {
    format!("{prefix}{}", keys.join("__").to_ascii_uppercase())
}

/// A provider with the metadata we name it by, so that errors say `env APP_DB__URL` or
/// `file config/app.toml` rather than figment's provider names.
struct Named<P> {
    inner: P,
    metadata: Metadata,
}

impl<P: Provider> Named<P> {
    fn new(inner: P, metadata: Metadata) -> Self {
        Named { inner, metadata }
    }
}

impl<P: Provider> Provider for Named<P> {
    fn metadata(&self) -> Metadata {
        self.metadata.clone()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        self.inner.data()
    }
}

/// A TOML file, parsed with `toml` 1's parser and converted to figment's values directly:
/// figment's own TOML provider (`toml` 0.8 through serde) spent about twice the instructions on
/// a file of many sections (callgrind, 1000 sections; `benches/RESULTS.md`).
struct TomlFile(PathBuf);

impl Provider for TomlFile {
    fn metadata(&self) -> Metadata {
        Metadata::from("TOML file", &*self.0)
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let text = std::fs::read_to_string(&self.0).map_err(|e| figment::Error::from(e.to_string()))?;
        let table = toml::de::DeTable::parse(&text).map_err(|mut e| {
            e.set_input(Some(&text)); // so that the message shows the line
            figment::Error::from(e.to_string())
        })?;
        Ok(Profile::Default.collect(from_toml_table(table.get_ref()).map_err(figment::Error::from)?))
    }
}

fn from_toml_table(table: &toml::de::DeTable<'_>) -> Result<Dict, String> {
    table.iter().map(|(k, v)| Ok((k.get_ref().to_string(), from_toml(v.get_ref())?))).collect()
}

fn from_toml(value: &toml::de::DeValue<'_>) -> Result<Value, String> {
    use toml::de::DeValue;
    Ok(match value {
        DeValue::String(s) => Value::from(s.to_string()),
        DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Value::from(n),
            Err(_) => Value::from(
                u64::from_str_radix(i.as_str(), i.radix()).map_err(|_| format!("integer `{i}` is out of range"))?,
            ),
        },
        DeValue::Float(f) => Value::from(f.as_str().parse::<f64>().map_err(|_| format!("invalid float `{f}`"))?),
        DeValue::Boolean(b) => Value::from(*b),
        DeValue::Datetime(d) => Value::from(d.to_string()),
        DeValue::Array(a) => Value::from(a.iter().map(|v| from_toml(v.get_ref())).collect::<Result<Vec<Value>, _>>()?),
        DeValue::Table(t) => Value::from(from_toml_table(t)?),
    })
}

/// Where a missing key could be set, for the error's hint.
#[derive(Default)]
struct Hints {
    files: Vec<String>,
    env: Vec<String>,
}

struct Inner {
    figment: Figment,
    /// The merged values, computed once: each section reads its part of it.
    merged: Value,
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
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), di_core::DiError> {
/// let app = di_core::App::builder()
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
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<T, DiError> {
        match self.inner.merged.find_ref(key) {
            Some(value) => T::deserialize(value).map_err(|e| self.error(e, key, "App::config().get")),
            None => T::deserialize(&Value::Empty(Tag::Default, Empty::None))
                .map_err(|_| self.missing(key, "App::config().get")),
        }
    }

    /// Whether some source sets `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.inner.merged.find_ref(key).is_some()
    }

    /// Where the value at `key` came from: `file config/app.toml`, `env APP_DB__URL`,
    /// `config_value("db.url") at src/main.rs:12:5`.
    pub fn origin(&self, key: &str) -> Option<String> {
        let metadata = self.inner.figment.find_metadata(key)?;
        let keys: Vec<&str> = key.split('.').collect();
        Some(describe(metadata, &keys))
    }

    /// The active profile, if one was set with [`AppBuilder::profile`](crate::AppBuilder::profile).
    pub fn profile(&self) -> Option<&str> {
        self.inner.profile.as_deref()
    }

    /// Deserializes the section at `prefix` as `T`, for the config proto `section`: an absent
    /// section reads as an empty table, so that a struct whose fields all have serde defaults
    /// needs no configuration.
    pub(crate) fn section<T: DeserializeOwned>(&self, prefix: &str, section: &'static str) -> Result<T, DiError> {
        let empty = Value::from(Dict::new());
        let value = self.inner.merged.find_ref(prefix).unwrap_or(&empty);
        T::deserialize(value).map_err(|e| self.error(e, prefix, section))
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
        DiError::ConfigInvalid { origin: self.origin(&key), key, section, message: e.kind.to_string() }
    }

    fn missing(&self, key: &str, section: &'static str) -> DiError {
        let keys: Vec<&str> = key.split('.').collect();
        let mut places: Vec<String> = self.inner.hints.files.clone();
        places.extend(self.inner.hints.env.iter().map(|prefix| env_name(prefix, &keys)));
        let hint = match places.as_slice() {
            [] => "set it with `config_file`, `config_env` or `config_value` on the AppBuilder".to_owned(),
            [one] => format!("set it in {one}"),
            [rest @ .., last] => format!("set it in {} or {last}", rest.join(", ")),
        };
        DiError::ConfigMissing { key: key.to_owned(), section, hint }
    }
}

/// A value's provider, as errors name it.
fn describe(metadata: &Metadata, keys: &[&str]) -> String {
    if metadata.name.starts_with("env ") {
        format!("env {}", metadata.interpolate(&Profile::Default, keys))
    } else {
        match metadata.source.as_ref() {
            Some(figment::Source::Code(at)) => format!("{} at {at}", metadata.name),
            _ => metadata.name.to_string(),
        }
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

/// Reads a config section as `T`, erased: the loader a config proto's descriptor holds.
pub type LoadFn = fn(&Config, &str, &'static str) -> Result<AnyArc, DiError>;

/// The [`LoadFn`] of a section of type `T`.
pub fn load_section<T: for<'de> serde::Deserialize<'de> + Send + Sync + 'static>(
    config: &Config,
    prefix: &str,
    section: &'static str,
) -> Result<AnyArc, DiError> {
    config.section::<T>(prefix, section).map(|t| Arc::new(t) as AnyArc)
}
