//! Configuration errors that say what kind of value was found without showing it: the value at
//! a key may be a password or a connection string, and errors go to start-up logs and
//! orchestrator dashboards.

use figment::error::{Actual, Kind};
use figment::value::Value;

/// `kind`, worded with no value in it. `value`, what the key holds, is cut out of a custom
/// message (a `Deserialize` impl's own) that quotes it.
pub(super) fn kind(kind: &Kind, value: Option<&Value>) -> String {
    match kind {
        Kind::Message(message) => without(message, value),
        Kind::InvalidType(found, expected) => format!("invalid type: expected {expected}, found {}", actual(found)),
        Kind::InvalidValue(found, expected) => format!("invalid value: expected {expected}, found {}", actual(found)),
        Kind::InvalidLength(len, expected) => format!("invalid length {len}, expected {expected}"),
        Kind::UnknownVariant(found, expected) => {
            format!("unknown variant ({}), expected {}", string(found), one_of(expected))
        }
        Kind::UnknownField(field, expected) => format!("unknown field `{field}`, expected {}", one_of(expected)),
        Kind::MissingField(field) => format!("missing field `{field}`"),
        Kind::DuplicateField(field) => format!("duplicate field `{field}`"),
        Kind::ISizeOutOfRange(_) | Kind::USizeOutOfRange(_) => "an integer out of range".to_owned(),
        Kind::Unsupported(found) => format!("unsupported: {}", actual(found)),
        Kind::UnsupportedKey(found, need) => format!("a key of {} is not supported, need {need}", actual(found)),
    }
}

/// What was found, by kind: `a string of 29 characters`, `a negative integer`.
fn actual(found: &Actual) -> String {
    match found {
        Actual::Bool(_) => "a boolean".to_owned(),
        Actual::Unsigned(_) => "an integer".to_owned(),
        Actual::Signed(n) if *n < 0 => "a negative integer".to_owned(),
        Actual::Signed(_) => "an integer".to_owned(),
        Actual::Float(_) => "a floating-point number".to_owned(),
        Actual::Char(_) => "a character".to_owned(),
        Actual::Str(s) => string(s),
        Actual::Bytes(b) => format!("{} bytes", b.len()),
        Actual::Unit => "a unit value".to_owned(),
        Actual::Option => "an optional value".to_owned(),
        Actual::NewtypeStruct => "a newtype struct".to_owned(),
        Actual::Seq => "a list".to_owned(),
        Actual::Map => "a table".to_owned(),
        Actual::Enum | Actual::UnitVariant | Actual::NewtypeVariant | Actual::TupleVariant | Actual::StructVariant => {
            "an enum".to_owned()
        }
        Actual::Other(_) => "a value of another kind".to_owned(),
    }
}

/// A string, by its length.
pub(super) fn string(s: &str) -> String {
    match s.chars().count() {
        0 => "an empty string".to_owned(),
        1 => "a string of 1 character".to_owned(),
        n => format!("a string of {n} characters"),
    }
}

/// The kind of a value of the tree: what a TOML syntax or range error, which has no `Actual`,
/// reports.
pub(super) fn value(value: &Value) -> String {
    match value {
        Value::String(_, s) => string(s),
        Value::Char(..) => "a character".to_owned(),
        Value::Bool(..) => "a boolean".to_owned(),
        Value::Num(..) => "a number".to_owned(),
        Value::Empty(..) => "an empty value".to_owned(),
        Value::Dict(..) => "a table".to_owned(),
        Value::Array(..) => "a list".to_owned(),
    }
}

fn one_of(expected: &[&str]) -> String {
    match expected {
        [] => "none".to_owned(),
        [one] => format!("`{one}`"),
        many => format!("one of {}", many.iter().map(|e| format!("`{e}`")).collect::<Vec<_>>().join(", ")),
    }
}

/// `message` with the text of `value` (a string, or a number as written) replaced by its kind.
fn without(message: &str, value: Option<&Value>) -> String {
    let text = match value {
        Some(Value::String(_, s)) if !s.is_empty() => s.clone(),
        Some(Value::Num(_, n)) => match (n.to_u128(), n.to_i128(), n.to_f64()) {
            (Some(u), ..) => u.to_string(),
            (_, Some(i), _) => i.to_string(),
            (.., Some(f)) => f.to_string(),
            _ => return message.to_owned(),
        },
        _ => return message.to_owned(),
    };
    let kind = self::value(value.expect("matched above"));
    message.replace(&text, &format!("<{kind}>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_value_is_shown() {
        let secret = "postgres://app:S3cr3t@db/app";
        let invalid = Kind::InvalidType(Actual::Str(secret.into()), "struct DbConfig".into());
        assert_eq!(kind(&invalid, None), "invalid type: expected struct DbConfig, found a string of 28 characters");
        let number = Kind::InvalidType(Actual::Signed(48151623), "a string".into());
        assert_eq!(kind(&number, None), "invalid type: expected a string, found an integer");
        let negative = Kind::InvalidValue(Actual::Signed(-3), "u32".into());
        assert_eq!(kind(&negative, None), "invalid value: expected u32, found a negative integer");
        let variant = Kind::UnknownVariant("hunter2".into(), &["debug", "info"]);
        assert_eq!(kind(&variant, None), "unknown variant (a string of 7 characters), expected one of `debug`, `info`");
        let custom = Kind::Message(format!("{secret} is not a valid url"));
        let value = Value::from(secret.to_owned());
        assert_eq!(kind(&custom, Some(&value)), "<a string of 28 characters> is not a valid url");
        let port = Kind::Message("port 99999 is out of range".into());
        assert_eq!(kind(&port, Some(&Value::from(99999u32))), "port <a number> is out of range");
    }
}
