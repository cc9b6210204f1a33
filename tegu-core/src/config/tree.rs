//! The configuration's value tree: layers merged, a dotted key nested, a value found by its
//! path, the leaves of a table, the keys of a `serde_ignored` path, and a key's line in a TOML
//! file.

use std::path::Path;

use figment::value::{Dict, Value};

/// Merges `from` into `into`: tables key by key, anything else replaced.
pub(super) fn merge(into: &mut Dict, from: Dict) {
    if into.is_empty() {
        *into = from; // the first layer, usually the biggest: moved whole
        return;
    }
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(Value::Dict(_, old)), Value::Dict(_, new)) => merge(old, new),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// `value` at dotted `key`, as a tree from the root: `db.pool` and 4 give `{db: {pool: 4}}`.
pub(super) fn nest(key: &str, value: Value) -> Dict {
    let mut value = value;
    for part in key.rsplit('.').filter(|p| !p.is_empty()) {
        value = Value::from(Dict::from([(part.to_owned(), value)]));
    }
    match value {
        Value::Dict(_, dict) => dict,
        _ => Dict::new(), // an empty key sets nothing
    }
}

/// The keys of a `serde_ignored` path, from the value read.
pub(super) fn segments(path: &serde_ignored::Path<'_>) -> Vec<String> {
    use serde_ignored::Path;
    let mut keys = match path {
        Path::Root => return Vec::new(),
        Path::Seq { parent, .. }
        | Path::Map { parent, .. }
        | Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => segments(parent),
    };
    match path {
        Path::Seq { index, .. } => keys.push(index.to_string()),
        Path::Map { key, .. } => keys.push(key.clone()),
        _ => {}
    }
    keys
}

/// The value at `path` under `value`: tables by key, lists by index.
pub(super) fn find<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(value, |value, key| match value {
        Value::Dict(_, dict) => dict.get(key),
        Value::Array(_, items) => items.get(key.parse::<usize>().ok()?),
        _ => None,
    })
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
