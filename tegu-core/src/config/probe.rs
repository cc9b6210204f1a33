//! The field names a section's type has at a path, asked of its `Deserialize` impl: how an
//! environment variable's lowercased key finds the field it meant (`maxconn` is `maxConn`), and
//! what a misspelled key is offered instead. A path goes through tables by key and through
//! lists by index.
//!
//! The type is deserialized from a probe that presents, level by level, a table holding the
//! one key of the path; at the end of the path, the struct found there hands its field names
//! to `deserialize_struct`, and the probe stops the deserialization with an error.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};

/// The fields of the struct at `path` in `T`; `None` if there is no struct there (a map, a
/// type that deserializes itself otherwise).
pub(super) fn fields_at<T: de::DeserializeOwned>(path: &[&str]) -> Option<&'static [&'static str]> {
    let found = Cell::new(None);
    let _ = T::deserialize(Probe { path, found: &found });
    found.get()
}

struct Probe<'a> {
    path: &'a [&'a str],
    found: &'a Cell<Option<&'static [&'static str]>>,
}

#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("probed")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Stop> {
        if self.path.is_empty() {
            self.found.set(Some(fields));
            return Err(Stop);
        }
        self.deserialize_map(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        match self.path.split_first() {
            Some((&key, rest)) => {
                visitor.visit_map(One { key: Some(key), rest: Probe { path: rest, found: self.found } })
            }
            None => Err(Stop),
        }
    }

    /// A list: the element at the path's next index stands for all of them.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        match self.path.split_first() {
            Some((index, rest)) if index.parse::<usize>().is_ok() => {
                visitor.visit_seq(OneItem { rest: Some(Probe { path: rest, found: self.found }) })
            }
            _ => Err(Stop),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct tuple tuple_struct enum identifier ignored_any
    }
}

/// A list of one item, the probe of the rest of the path.
struct OneItem<'a> {
    rest: Option<Probe<'a>>,
}

impl<'de> de::SeqAccess<'de> for OneItem<'_> {
    type Error = Stop;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Stop> {
        match self.rest.take() {
            Some(probe) => seed.deserialize(probe).map(Some),
            None => Ok(None),
        }
    }
}

/// A table of one key, whose value is the probe of the rest of the path.
struct One<'a> {
    key: Option<&'a str>,
    rest: Probe<'a>,
}

impl<'de> MapAccess<'de> for One<'_> {
    type Error = Stop;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Stop> {
        match self.key.take() {
            Some(key) => seed.deserialize(key.into_deserializer()).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Stop> {
        seed.deserialize(Probe { path: self.rest.path, found: self.rest.found })
    }
}

#[cfg(test)]
mod tests {
    use super::fields_at;

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Pool {
        max_conn: u32,
        min_idle: Option<u32>,
    }

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Db {
        url: String,
        pool: Option<Pool>,
        limits: std::collections::HashMap<String, u32>,
    }

    #[test]
    fn the_fields_at_a_path() {
        assert_eq!(fields_at::<Db>(&[]), Some(&["url", "pool", "limits"][..]));
        assert_eq!(fields_at::<Db>(&["pool"]), Some(&["maxConn", "minIdle"][..]));
        assert_eq!(fields_at::<Db>(&["limits"]), None, "a map has no fields");
        assert_eq!(fields_at::<Db>(&["nothing"]), None);
        assert_eq!(fields_at::<String>(&[]), None);
    }
}
