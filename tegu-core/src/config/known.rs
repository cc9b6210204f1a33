//! What reads the configuration, and the keys nothing reads: the sections read while
//! `prepare()` records them, the readers protos declare ([`ConfigReader`]), and the check that
//! refuses a key set in a file or with `config_value` that none of them takes.

use std::cell::RefCell;
use std::fmt;
use std::path::Path;

use figment::value::{Dict, Value};
use serde::de::DeserializeOwned;

use super::{Config, Layer, probe, segments};
use crate::error::DiError;

/// A section that a proto's factory reads with [`Config::get`], declared with
/// [`ProtoDef::reads_config`](crate::ProtoDef::reads_config) or
/// [`ProtoDescriptor::reads_config`](crate::registry::ProtoDescriptor::reads_config): read
/// once more by `build()` and `check()`, for the keys it does not take, and its prefix known.
///
/// # Examples
///
/// ```
/// use tegu_core::registry::ConfigReader;
///
/// #[derive(serde::Deserialize)]
/// struct Settings { url: String }
///
/// const READS: &[ConfigReader] = &[ConfigReader::new::<Settings>("database")];
/// assert_eq!(READS[0].prefix(), "database");
/// ```
#[derive(Clone)]
pub struct ConfigReader {
    pub(crate) prefix: std::borrow::Cow<'static, str>,
    read: fn(&Config, &str),
}

impl ConfigReader {
    /// A reader of the section at `prefix` as a `T`.
    pub const fn new<T: DeserializeOwned>(prefix: &'static str) -> ConfigReader {
        ConfigReader { prefix: std::borrow::Cow::Borrowed(prefix), read: read_as::<T> }
    }

    /// A reader of the section at a prefix computed at run time.
    pub fn named<T: DeserializeOwned>(prefix: impl Into<std::borrow::Cow<'static, str>>) -> ConfigReader {
        ConfigReader { prefix: prefix.into(), read: read_as::<T> }
    }

    /// The section's key.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Reads the section, for the record of the keys it takes.
    pub(crate) fn read(&self, config: &Config) {
        (self.read)(config, &self.prefix);
    }
}

impl fmt::Debug for ConfigReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigReader").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

/// Reads `prefix` as a `T`, for its keys only: a value that does not fit is the factory's
/// error, at build.
fn read_as<T: DeserializeOwned>(config: &Config, prefix: &str) {
    let _ = config.get::<T>(prefix);
}

/// A section as read while the record is on: where, by which type, and the keys under it that
/// the type does not take, each with the fields it has there (for a "did you mean").
pub(crate) struct Read {
    prefix: String,
    section: &'static str,
    ignored: Vec<(Vec<String>, &'static [&'static str])>,
}

std::thread_local! {
    /// The sections read on this thread since [`recording`] began: `prepare()` (sync) reads
    /// every section and declared reader while it is on.
    static READS: RefCell<Option<Vec<Read>>> = const { RefCell::new(None) };
}

/// Runs `f` with the record of sections read on, and returns what was read.
pub(crate) fn recording(f: impl FnOnce()) -> Vec<Read> {
    READS.with(|r| *r.borrow_mut() = Some(Vec::new()));
    f();
    READS.with(|r| r.borrow_mut().take()).unwrap_or_default()
}

/// Notes, if the record is on, that `value` at `key` was read as `T`, and which keys `T` left.
pub(super) fn record<T: DeserializeOwned>(key: &str, value: &Value, section: &'static str) {
    if READS.with(|r| r.borrow().is_none()) {
        return;
    }
    let mut ignored = Vec::new();
    let _ = serde_ignored::deserialize::<_, _, T>(value, |path| ignored.push(segments(&path)));
    let ignored = ignored
        .into_iter()
        .map(|path| {
            let parent: Vec<&str> = path[..path.len().saturating_sub(1)].iter().map(String::as_str).collect();
            let fields = probe::fields_at::<T>(&parent).unwrap_or_default();
            (path, fields)
        })
        .collect();
    let read = Read { prefix: key.to_owned(), section, ignored };
    READS.with(|r| {
        if let Some(reads) = r.borrow_mut().as_mut() {
            reads.push(read);
        }
    });
}

impl Config {
    /// The keys set in a file or with `config_value` that nothing reads: under a section's
    /// table, one its type does not take; elsewhere, one under no section's, reader's or
    /// declared prefix (`known`). The environment is not checked here: its variables share a
    /// namespace with the process's, and those under a section are checked as it is read.
    pub(crate) fn unknown_keys(&self, reads: &[Read], known: &[String]) -> Vec<DiError> {
        let split =
            |key: &str| -> Vec<String> { key.split('.').filter(|k| !k.is_empty()).map(str::to_owned).collect() };
        let known: Vec<Vec<String>> =
            known.iter().map(|k| split(k)).chain(reads.iter().map(|r| split(&r.prefix))).collect();
        let mut errors = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for layer in &self.inner.layers {
            if matches!(layer, Layer::Env(_)) {
                continue;
            }
            let Ok(data) = layer.data() else { continue };
            let mut leaves = Vec::new();
            leaves_of(&data, &mut Vec::new(), &mut leaves);
            for leaf in leaves {
                let in_section = reads.iter().find_map(|read| {
                    let prefix = split(&read.prefix);
                    let rel = leaf.strip_prefix(prefix.as_slice())?;
                    let (path, fields) = read.ignored.iter().find(|(path, _)| rel.starts_with(path))?;
                    let mut parent = prefix.clone();
                    parent.extend(path[..path.len() - 1].iter().cloned());
                    let near = crate::error::closest(path.last()?, fields.iter().copied())
                        .into_iter()
                        .map(|f| {
                            [parent.join("."), f.to_owned()]
                                .iter()
                                .filter(|p| !p.is_empty())
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(".")
                        })
                        .collect::<Vec<_>>();
                    let mut key = parent;
                    key.push(path.last()?.clone());
                    Some((key.join("."), Some(read.section), near))
                });
                let unknown = match in_section {
                    Some(found) => Some(found),
                    None if known.iter().any(|k| leaf.starts_with(k) || k.starts_with(&leaf)) => None,
                    None => {
                        let key = leaf.join(".");
                        let candidates: Vec<String> = known.iter().map(|k| k.join(".")).collect();
                        let top = leaf[..1.min(leaf.len())].join(".");
                        let near = crate::error::closest(&top, candidates.iter().map(String::as_str))
                            .into_iter()
                            .map(|k| {
                                [k.to_owned()]
                                    .into_iter()
                                    .chain(leaf[1..].iter().cloned())
                                    .collect::<Vec<_>>()
                                    .join(".")
                            })
                            .collect();
                        Some((key, None, near))
                    }
                };
                if let Some((key, section, near)) = unknown {
                    let source = layer.locate(&leaf);
                    if seen.insert((key.clone(), source.clone())) {
                        errors.push(DiError::ConfigUnknownKey { key, source_name: source, section, near });
                    }
                }
            }
        }
        errors
    }
}

/// The paths of the values under `dict` that are not tables (an empty table counts as one).
fn leaves_of(dict: &Dict, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (key, value) in dict {
        path.push(key.clone());
        match value {
            Value::Dict(_, inner) if !inner.is_empty() => leaves_of(inner, path, out),
            _ => out.push(path.clone()),
        }
        path.pop();
    }
}

/// The line of `keys` in the TOML file at `path`, if it is there.
pub(super) fn toml_line(path: &Path, keys: &[String]) -> Option<usize> {
    let text = std::fs::read_to_string(path).ok()?;
    let table = toml::de::DeTable::parse(&text).ok()?;
    let mut at = table.get_ref();
    let mut start = None;
    for (i, key) in keys.iter().enumerate() {
        let (k, value) = at.iter().find(|(k, _)| k.get_ref() == key)?;
        start = Some(k.span().start);
        if i + 1 < keys.len() {
            match value.get_ref() {
                toml::de::DeValue::Table(t) => at = t,
                _ => return None,
            }
        }
    }
    let start = start?;
    Some(text[..start.min(text.len())].matches('\n').count() + 1)
}
