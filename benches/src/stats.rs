//! Latency percentiles and JSON lines, written by hand (no serde in the measured binaries).

use std::fmt::Write;

/// The `p`th percentile (0-100) of sorted `ns` latencies, in microseconds.
pub fn percentile_us(sorted_ns: &[u64], p: f64) -> f64 {
    if sorted_ns.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted_ns.len() - 1) as f64).round() as usize;
    sorted_ns[rank.min(sorted_ns.len() - 1)] as f64 / 1000.0
}

/// A JSON value for [`json_line`].
#[derive(Debug, Clone)]
pub enum Value {
    /// A string.
    Str(String),
    /// A number; NaN or infinite is written `null`.
    Num(f64),
    /// An integer.
    Int(u64),
    /// A boolean.
    Bool(bool),
    /// `null`.
    Null,
}

/// One JSON object on one line, keys in the given order.
pub fn json_line(fields: &[(&str, Value)]) -> String {
    let mut s = String::from("{");
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "\"{key}\":");
        match value {
            Value::Str(v) => {
                let _ = write!(s, "\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
            }
            Value::Num(v) if v.is_finite() => {
                let _ = write!(s, "{}", (v * 100.0).round() / 100.0);
            }
            Value::Int(v) => {
                let _ = write!(s, "{v}");
            }
            Value::Bool(v) => {
                let _ = write!(s, "{v}");
            }
            Value::Num(_) | Value::Null => s.push_str("null"),
        }
    }
    s.push('}');
    s
}

/// The value of `key` in a line [`json_line`] wrote: a string's content or a number's text.
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &line[start..];
    if let Some(rest) = rest.strip_prefix('"') { rest.split('"').next() } else { rest.split([',', '}']).next() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_round_trip_through_field() {
        let line = json_line(&[
            ("flavour", Value::Str("singleton".into())),
            ("n", Value::Int(10)),
            ("touch", Value::Bool(true)),
            ("rps", Value::Num(1234.5678)),
            ("allocs_per_req", Value::Null),
            ("bad", Value::Num(f64::NAN)),
        ]);
        assert_eq!(
            line,
            r#"{"flavour":"singleton","n":10,"touch":true,"rps":1234.57,"allocs_per_req":null,"bad":null}"#
        );
        assert_eq!(field(&line, "flavour"), Some("singleton"));
        assert_eq!(field(&line, "rps"), Some("1234.57"));
        assert_eq!(field(&line, "touch"), Some("true"));
        assert_eq!(field(&line, "missing"), None);
    }

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let ns: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_us(&ns, 50.0), 51.0);
        assert_eq!(percentile_us(&ns, 99.0), 99.0);
        assert!(percentile_us(&[], 50.0).is_nan());
    }
}
