//! The record of the sections read while `prepare()` runs: each read as which type, and the
//! keys under it that the type does not take.

use std::cell::RefCell;

use figment::value::Value;
use serde::de::DeserializeOwned;

use super::tree::segments;
use super::{probe, taken};

/// A section as read while the record is on: where, by which type, and the keys under it that
/// the type does not take, each with the fields it has there (for a "did you mean").
pub(crate) struct Read {
    pub(super) prefix: Vec<String>,
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
    pub(super) fn takes(&self, leaf: &[String]) -> Option<bool> {
        let rel = leaf.strip_prefix(self.prefix.as_slice())?;
        Some(!self.ignored.iter().any(|(path, _)| rel.starts_with(path)))
    }

    /// The error for `leaf`, which this read ignores: the key its type does not take, with the
    /// fields there that are close.
    pub(super) fn refuse(&self, leaf: &[String]) -> Option<(String, Option<&'static str>, Vec<String>)> {
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
