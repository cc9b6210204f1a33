//! What reads the configuration, and the keys nothing reads: the sections read while
//! `prepare()` records them, the readers protos declare ([`ConfigReader`]), and the check that
//! refuses a key set in a file or with `config_value` that none of them takes.

use std::fmt;

use figment::value::Value;
use serde::de::DeserializeOwned;

use super::record::Read;
use super::tree::leaves_of;
use super::{Config, Layer, find};
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
    ///
    /// A key under no section read, but under the prefix of a section the App leaves out
    /// (`left_out`: its prefix and type), is refused naming that section (the innermost), with
    /// no "did you mean": the fix is to build the section, not to change the key.
    pub(crate) fn unknown_keys(
        &self,
        reads: &[Read],
        known: &[String],
        templates: &[String],
        left_out: &[(String, &'static str)],
    ) -> Vec<DiError> {
        let split =
            |key: &str| -> Vec<String> { key.split('.').filter(|k| !k.is_empty()).map(str::to_owned).collect() };
        let unread: Vec<Vec<String>> = known.iter().map(|k| split(k)).collect();
        let templates: Vec<Vec<String>> = templates.iter().map(|t| split(t)).collect();
        let left_out: Vec<(Vec<String>, &'static str)> = left_out.iter().map(|(p, t)| (split(p), *t)).collect();
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
            let left = left_out.iter().filter(|(p, _)| leaf.starts_with(p)).max_by_key(|(p, _)| p.len());
            let (unknown, left_out) = match (innermost.and_then(|read| read.refuse(&leaf)), left) {
                (Some(found), _) => (found, false),
                (None, Some(&(_, reader))) => ((leaf.join("."), Some(reader), Vec::new()), true),
                (None, None) => {
                    let candidates: Vec<String> =
                        known.iter().cloned().chain(reads.iter().map(|r| r.prefix.join("."))).collect();
                    let near = crate::error::closest(&leaf[0], candidates.iter().map(String::as_str))
                        .into_iter()
                        .map(|k| {
                            [k].into_iter().chain(leaf[1..].iter().map(String::as_str)).collect::<Vec<_>>().join(".")
                        })
                        .collect();
                    ((leaf.join("."), None, near), false)
                }
            };
            let (key, section, near) = unknown;
            // The highest layer that sets it: the environment only where it set it.
            let layer = self.inner.layers.iter().rev().filter(|l| from_env || !matches!(l, Layer::Env(_))).find(|l| {
                l.data().is_ok_and(|data| find(&Value::Dict(figment::value::Tag::Default, data), &leaf).is_some())
            });
            let source = layer.map_or_else(|| "the configuration".to_owned(), |l| l.locate(&leaf));
            if seen.insert(key.clone()) {
                errors.push(DiError::ConfigUnknownKey { key, source_name: source, section, near, left_out });
            }
        }
        errors
    }
}
