//! Environment variables as a configuration layer: `APP_DB__POOL` is `db.pool`, keys matched to
//! the keys the files set whatever their case, `APP_HOSTS__0` an item of a list.

use figment::providers::Env;
use figment::value::{Dict, Value};

use super::tree::{merge, nest};

/// The variables under `prefix`, `__` separating levels, names lowercased (figment's `Env`),
/// their values kept as strings: the type they are read as decides (`"1234"` is a fine
/// password, and a fine port), see [`Config::read`](super::Config::read).
pub(super) fn data(prefix: &str) -> Dict {
    let mut dict = Dict::new();
    for (key, value) in Env::prefixed(prefix).split("__").iter() {
        merge(&mut dict, nest(key.as_str(), Value::from(value)));
    }
    dict
}

/// The variable that sets `keys` under `prefix`: `APP_` and `db.url` give `APP_DB__URL`.
pub(super) fn name(prefix: &str, keys: &[&str]) -> String {
    format!("{}{}", prefix.to_ascii_uppercase(), keys.join("__").to_ascii_uppercase())
}

/// `env` (lowercased keys) fitted to `below`, the layers under it: a key that `below` spells
/// with capitals (`maxConn` from `rename_all = "camelCase"`) takes that spelling; a level whose
/// keys are all numbers sets items of a list (the list `below` has there, replaced item by item
/// and appended to at its end; a new list if `below` has nothing there). Errors name the
/// variable: a key that two keys of `below` spell differently (`maxConn` and `MaxConn`), a list
/// item past the end.
pub(super) fn fit(env: Dict, below: Option<&Dict>, prefix: &str, path: &mut Vec<String>) -> Result<Dict, String> {
    let mut out = Dict::new();
    for (key, value) in env {
        let spelled = spelling(&key, below, prefix, path)?;
        path.push(spelled.clone());
        let under = below.and_then(|b| b.get(&spelled));
        let value = fit_value(value, under, prefix, path)?;
        path.pop();
        out.insert(spelled, value);
    }
    Ok(out)
}

fn fit_value(value: Value, below: Option<&Value>, prefix: &str, path: &mut Vec<String>) -> Result<Value, String> {
    let Value::Dict(tag, dict) = value else { return Ok(value) };
    let numbered = !dict.is_empty() && dict.keys().all(|k| k.bytes().all(|b| b.is_ascii_digit()));
    match below {
        Some(Value::Array(_, items)) if numbered => list(dict, items.clone(), prefix, path),
        Some(Value::Dict(_, below)) => Ok(Value::Dict(tag, fit(dict, Some(below), prefix, path)?)),
        None if numbered => list(dict, Vec::new(), prefix, path),
        _ => Ok(Value::Dict(tag, fit(dict, None, prefix, path)?)),
    }
}

/// Sets the items `dict` numbers in `items`, in order of their numbers.
fn list(dict: Dict, mut items: Vec<Value>, prefix: &str, path: &mut Vec<String>) -> Result<Value, String> {
    let mut numbered: Vec<(usize, String, Value)> = Vec::new();
    for (key, value) in dict {
        let index = key.parse::<usize>().map_err(|_| format!("{} is no list index", var(prefix, path, &key)))?;
        numbered.push((index, key, value));
    }
    numbered.sort_by_key(|(index, ..)| *index);
    for (index, key, value) in numbered {
        path.push(key);
        let under = items.get(index);
        let value = fit_value(value, under, prefix, path)?;
        let at = path.pop().expect("pushed above");
        match index.cmp(&items.len()) {
            std::cmp::Ordering::Less => items[index] = value,
            std::cmp::Ordering::Equal => items.push(value),
            std::cmp::Ordering::Greater => {
                return Err(format!(
                    "{} sets item {index} of a list of {} item(s): items are numbered from 0, and one is added at the end only",
                    var(prefix, path, &at),
                    items.len()
                ));
            }
        }
    }
    Ok(Value::from(items))
}

/// How `below` spells `key` (lowercase): itself if `below` has it or nothing like it, else the
/// one key of `below` equal to it but for case.
fn spelling(key: &str, below: Option<&Dict>, prefix: &str, path: &[String]) -> Result<String, String> {
    let Some(below) = below else { return Ok(key.to_owned()) };
    if below.contains_key(key) {
        return Ok(key.to_owned());
    }
    let mut alike = below.keys().filter(|k| k.eq_ignore_ascii_case(key));
    match (alike.next(), alike.next()) {
        (None, _) => Ok(key.to_owned()),
        (Some(one), None) => Ok(one.clone()),
        (Some(a), Some(b)) => Err(format!(
            "{} could set `{a}` or `{b}`, which differ only in case; set that key in a file instead",
            var(prefix, path, key)
        )),
    }
}

/// The variable for `key` under `path`.
fn var(prefix: &str, path: &[String], key: &str) -> String {
    let keys: Vec<&str> = path.iter().map(String::as_str).chain([key]).collect();
    name(prefix, &keys)
}
