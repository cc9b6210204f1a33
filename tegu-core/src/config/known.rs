//! What reads the configuration, and the keys nothing reads: the sections read while
//! `prepare()` records them, the readers protos declare ([`ConfigReader`]), and the check that
//! refuses a key set in a file or with `config_value` that none of them takes.

use std::cell::RefCell;
use std::fmt;
use std::path::Path;

use figment::value::{Dict, Value};
use serde::de::DeserializeOwned;

use super::{Config, Layer, find, probe, segments, taken};
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
    prefix: Vec<String>,
    section: &'static str,
    ignored: Vec<(Vec<String>, &'static [&'static str])>,
}

std::thread_local! {
    /// The sections read on this thread since [`recording`] began: `prepare()` (sync) reads
    /// every section and declared reader while it is on.
    static READS: RefCell<Option<Vec<Read>>> = const { RefCell::new(None) };
}

/// Runs `f` with the record of sections read on, and returns what was read. The record before
/// it is put back when `f` returns or unwinds (a `Deserialize` impl may panic), so that no read
/// of this thread is recorded after it.
pub(crate) fn recording(f: impl FnOnce()) -> Vec<Read> {
    struct Restore(Option<Vec<Read>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            READS.with(|r| *r.borrow_mut() = self.0.take());
        }
    }
    let restore = Restore(READS.with(|r| r.borrow_mut().replace(Vec::new())));
    f();
    let reads = READS.with(|r| r.borrow_mut().take()).unwrap_or_default();
    drop(restore);
    reads
}

/// Notes, if the record is on, that `value` at `key` was read as `T`, and which keys `T` left:
/// not a key it ignores on purpose (a field of type `serde::de::IgnoredAny`, which serde's
/// idiom for a retired key is), nor the whole value (a reader of `IgnoredAny` takes anything).
pub(super) fn record<T: DeserializeOwned>(key: &str, value: &Value, section: &'static str) {
    if READS.with(|r| r.borrow().is_none()) {
        return;
    }
    let mut skipped = Vec::new();
    let _ = serde_ignored::deserialize::<_, _, T>(value, |path| skipped.push(segments(&path)));
    let mut ignored: Vec<(Vec<String>, &'static [&'static str])> = skipped
        .iter()
        .filter_map(|path: &Vec<String>| {
            let (last, parent) = path.split_last()?;
            let parent: Vec<&str> = parent.iter().map(String::as_str).collect();
            let fields = probe::fields_at::<T>(&parent).unwrap_or_default();
            (!fields.contains(&last.as_str())).then_some((path.clone(), fields))
        })
        .collect();
    // A table whose type shows no fields (a struct with a flattened part, a map, an untagged
    // enum) may drop a key without skipping it: each of its keys is asked (`taken`).
    let unseen = |leaf: &[String]| !skipped.iter().any(|path| leaf.starts_with(path)) && no_fields::<T>(leaf);
    ignored.extend(taken::untaken::<T>(value, false, unseen).into_iter().map(|path| (path, &[][..])));
    let prefix = key.split('.').filter(|k| !k.is_empty()).map(str::to_owned).collect();
    let read = Read { prefix, section, ignored };
    READS.with(|r| {
        if let Some(reads) = r.borrow_mut().as_mut() {
            reads.push(read);
        }
    });
}

/// Whether the table that holds `leaf` in `T` is no struct whose fields the probe finds.
pub(super) fn no_fields<T: DeserializeOwned>(leaf: &[String]) -> bool {
    let parent: Vec<&str> = leaf[..leaf.len().saturating_sub(1)].iter().map(String::as_str).collect();
    probe::fields_at::<T>(&parent).is_none()
}

impl Read {
    /// Whether this read takes `leaf` (a key under its prefix it does not ignore); `None` if the
    /// key is not under its prefix.
    fn takes(&self, leaf: &[String]) -> Option<bool> {
        let rel = leaf.strip_prefix(self.prefix.as_slice())?;
        Some(!self.ignored.iter().any(|(path, _)| rel.starts_with(path)))
    }

    /// The error for `leaf`, which this read ignores: the key its type does not take, with the
    /// fields there that are close.
    fn refuse(&self, leaf: &[String]) -> Option<(String, Option<&'static str>, Vec<String>)> {
        let rel = leaf.strip_prefix(self.prefix.as_slice())?;
        let (path, fields) = self.ignored.iter().find(|(path, _)| rel.starts_with(path))?;
        let (last, within) = path.split_last()?;
        let mut parent = self.prefix.clone();
        parent.extend(within.iter().cloned());
        let near = crate::error::closest(last, fields.iter().copied())
            .into_iter()
            .map(|f| parent.iter().map(String::as_str).chain([f]).collect::<Vec<_>>().join("."))
            .collect();
        parent.push(last.clone());
        Some((parent.join("."), Some(self.section), near))
    }
}

impl Config {
    /// The keys set in a file or with `config_value` that nothing reads. A key is read if a
    /// section or reader whose table holds it takes it, or if it is under a prefix read
    /// elsewhere (`known`: a section overridden or of another profile, a job's key,
    /// `config_known`). Else it is refused: as not a field of the section whose table holds it
    /// (the innermost), or as under no section at all. Of the environment, only a variable of the
    /// nested shape (`APP_SECTION__KEY`) whose section nothing reads is refused here: one under a
    /// section is checked as the section is read, and one without the separator
    /// (`APP_SERVICE_HOST`, as Kubernetes sets for a Service) is the process's, left alone.
    ///
    /// Under a multi-instance section's prefix (`templates`), each table is an instance: one
    /// that was not read (overridden) is not checked, nor a value there that is no table (the
    /// section's own error says so).
    pub(crate) fn unknown_keys(&self, reads: &[Read], known: &[String], templates: &[String]) -> Vec<DiError> {
        let split =
            |key: &str| -> Vec<String> { key.split('.').filter(|k| !k.is_empty()).map(str::to_owned).collect() };
        let unread: Vec<Vec<String>> = known.iter().map(|k| split(k)).collect();
        let templates: Vec<Vec<String>> = templates.iter().map(|t| split(t)).collect();
        let mut errors = Vec::new();
        let mut seen = std::collections::HashSet::new();
        // The merged tree, walked once: the files are read again only to say where an unknown
        // key is set. What the environment set is skipped (see above).
        let mut leaves = Vec::new();
        if let Value::Dict(_, merged) = &self.inner.merged {
            leaves_of(merged, &mut Vec::new(), &mut leaves);
        }
        for leaf in leaves {
            let from_env = find(&self.inner.env, &leaf).is_some();
            // A variable without the separator, or one under a section (checked as it is read).
            if from_env && (leaf.len() < 2 || reads.iter().any(|r| leaf.starts_with(&r.prefix))) {
                continue;
            }
            if let Some(template) = templates.iter().find(|t| leaf.starts_with(t)) {
                let instance: Vec<String> = leaf.iter().take(template.len() + 1).cloned().collect();
                if leaf.len() == template.len() || !reads.iter().any(|r| r.prefix == instance) {
                    continue;
                }
            }
            let covered = |k: &Vec<String>| leaf.starts_with(k) || k.starts_with(&leaf);
            if reads.iter().any(|r| r.takes(&leaf) == Some(true)) || unread.iter().any(covered) {
                continue;
            }
            // A table that holds a section's, with nothing else in it, is no key.
            if reads.iter().any(|r| r.prefix.starts_with(&leaf)) {
                continue;
            }
            let innermost = reads.iter().filter(|r| leaf.starts_with(&r.prefix)).max_by_key(|r| r.prefix.len());
            let unknown = match innermost.and_then(|read| read.refuse(&leaf)) {
                Some(found) => found,
                None => {
                    let candidates: Vec<String> =
                        known.iter().cloned().chain(reads.iter().map(|r| r.prefix.join("."))).collect();
                    let near = crate::error::closest(&leaf[0], candidates.iter().map(String::as_str))
                        .into_iter()
                        .map(|k| {
                            [k].into_iter().chain(leaf[1..].iter().map(String::as_str)).collect::<Vec<_>>().join(".")
                        })
                        .collect();
                    (leaf.join("."), None, near)
                }
            };
            let (key, section, near) = unknown;
            // The highest layer that sets it: the environment only where it set it.
            let layer = self.inner.layers.iter().rev().filter(|l| from_env || !matches!(l, Layer::Env(_))).find(|l| {
                l.data().is_ok_and(|data| find(&Value::Dict(figment::value::Tag::Default, data), &leaf).is_some())
            });
            let source = layer.map_or_else(|| "the configuration".to_owned(), |l| l.locate(&leaf));
            if seen.insert(key.clone()) {
                errors.push(DiError::ConfigUnknownKey { key, source_name: source, section, near });
            }
        }
        errors
    }
}

/// The paths of the values under `dict` that are not tables (an empty table counts as one),
/// through arrays of tables by index (`jobs.0.name`), as `serde_ignored` names them.
pub(super) fn leaves_of(dict: &Dict, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (key, value) in dict {
        path.push(key.clone());
        leaves_of_value(value, path, out);
        path.pop();
    }
}

fn leaves_of_value(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Dict(_, inner) if !inner.is_empty() => leaves_of(inner, path, out),
        Value::Array(_, items) if items.iter().any(|i| matches!(i, Value::Dict(..))) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                leaves_of_value(item, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
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
