//! Whether a section's type takes a key, asked by reading the section with that key's value
//! poisoned: a value that every type fails to read, which only a reader that skips the key
//! (or keeps it without reading it) gets past.
//!
//! What `serde_ignored` cannot see: a struct with a `#[serde(flatten)]` field hands every key
//! its own fields do not take to serde's buffer, from which the flattened part takes its keys
//! and leaves the rest, dropped without a word; an untagged enum reads the section from such a
//! buffer too. Neither asks the deserializer to skip a key. So the keys under a table whose
//! type shows no fields (`probe::fields_at` finds no struct there) are asked one by one: the
//! section is read again with the key's value poisoned, and a read that still succeeds took
//! nothing there.
//!
//! The poison: asked for any particular type (`deserialize_u32`, `deserialize_struct`, ...),
//! or to be skipped, it fails. Asked for "any value" (what serde's buffer asks), it is a unit
//! wrapped as a newtype struct, which no type reads back but `IgnoredAny`.

use std::cell::Cell;

use figment::value::{Empty, Num, Value};
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, IntoDeserializer, Visitor};

/// Whether `T`, reading `value`, takes the key at `path` (a leaf of `value`, tables by key and
/// lists by index). `lossy`: strings are read as numbers or booleans where the type asks for
/// them, as values from the environment are. A read that fails whatever the key (a value that
/// does not fit `T`, the factory's error), or one that never reaches the key, counts as taking
/// it: only a read that reaches the key and succeeds without it is a key `T` does not take.
pub(super) fn takes<T: DeserializeOwned>(value: &Value, path: &[String], lossy: bool) -> bool {
    let reached = Cell::new(false);
    let read = T::deserialize(Poisoned { value, path: Some(path), lossy, reached: &reached });
    read.is_err() || !reached.get()
}

/// `value`, read as figment reads it (`&Value`'s deserializer, or its lossy one), with the
/// value at `path` (if any) poisoned.
struct Poisoned<'a> {
    value: &'a Value,
    /// The poisoned key's path from here; `None` when it is not under this value.
    path: Option<&'a [String]>,
    lossy: bool,
    reached: &'a Cell<bool>,
}

/// A read that failed: which way does not matter here.
#[derive(Debug)]
struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the read failed")
    }
}

impl std::error::Error for Failed {}

impl de::Error for Failed {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Failed
    }
}

type Error = Failed;

impl<'a> Poisoned<'a> {
    /// The value of key (or index) `key` under this one.
    fn under(&self, key: &str, value: &'a Value) -> Poisoned<'a> {
        let path = self.path.and_then(|path| match path.split_first() {
            Some((first, rest)) if first == key => Some(rest),
            _ => None,
        });
        Poisoned { value, path, lossy: self.lossy, reached: self.reached }
    }

    /// Whether this is the poisoned value itself.
    fn poisoned(&self) -> bool {
        self.path.is_some_and(<[String]>::is_empty)
    }

    fn poison<T>(&self) -> Result<T, Error> {
        self.reached.set(true);
        Err(Failed)
    }

    /// The value as a number or a boolean, for a lossy read that asks for one: `None` when it
    /// is read as it is.
    fn interpreted(&self, as_num: bool) -> Option<Value> {
        match self.value {
            Value::String(tag, _) if self.lossy && as_num => self.value.to_num_lossy().map(|n| Value::Num(*tag, n)),
            Value::String(tag, _) if self.lossy => self.value.to_bool_lossy().map(|b| Value::Bool(*tag, b)),
            _ => None,
        }
    }
}

/// The deserialize methods that read a number or a boolean, forwarded to `deserialize_any` of
/// the value (interpreted as one for a lossy read, as figment does), and those forwarded as
/// they are (`_ =>`); the poison fails them all.
macro_rules! forward {
    (_ => $($method:ident $(($($arg:ty),*))?),*) => {$(
        fn $method<V: Visitor<'de>>(self, $($(_: $arg,)*)? visitor: V) -> Result<V::Value, Error> {
            if self.poisoned() {
                return self.poison();
            }
            self.deserialize_any(visitor)
        }
    )*};
    ($as_num:expr => $($method:ident),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            if self.poisoned() {
                return self.poison();
            }
            match self.interpreted($as_num) {
                Some(value) => Poisoned { value: &value, ..self }.deserialize_any(visitor),
                None => self.deserialize_any(visitor),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Poisoned<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.poisoned() {
            self.reached.set(true);
            return visitor.visit_newtype_struct(().into_deserializer());
        }
        match self.value {
            Value::String(_, s) => visitor.visit_str(s),
            Value::Char(_, c) => visitor.visit_char(*c),
            Value::Bool(_, b) => visitor.visit_bool(*b),
            Value::Num(_, n) => <Num as Deserializer<'de>>::deserialize_any(*n, visitor).map_err(|_| Failed),
            Value::Empty(_, e) => <Empty as Deserializer<'de>>::deserialize_any(*e, visitor).map_err(|_| Failed),
            Value::Dict(_, dict) => visitor.visit_map(Entries { entries: dict.iter(), value: None, parent: self }),
            Value::Array(_, items) => visitor.visit_seq(Items { items: items.iter().enumerate(), parent: self }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            _ if self.poisoned() => self.poison(),
            Value::Empty(_, e) => <Empty as Deserializer<'de>>::deserialize_any(*e, visitor).map_err(|_| Failed),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Error> {
        if self.poisoned() {
            return self.poison();
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            _ if self.poisoned() => self.poison(),
            Value::String(_, s) => visitor.visit_enum(s.as_str().into_deserializer()),
            Value::Dict(_, dict) => visitor.visit_enum(de::value::MapAccessDeserializer::new(Entries {
                entries: dict.iter(),
                value: None,
                parent: self,
            })),
            Value::Num(_, n) if n.to_u32().is_some() => {
                visitor.visit_enum(n.to_u32().unwrap_or_default().into_deserializer())
            }
            _ => self.deserialize_any(visitor),
        }
    }

    forward!(true => deserialize_u8, deserialize_u16, deserialize_u32, deserialize_u64, deserialize_i8,
        deserialize_i16, deserialize_i32, deserialize_i64, deserialize_f32, deserialize_f64);
    forward!(false => deserialize_bool);
    forward!(_ => deserialize_char, deserialize_str, deserialize_string, deserialize_bytes, deserialize_byte_buf,
        deserialize_seq, deserialize_map, deserialize_unit, deserialize_identifier,
        deserialize_unit_struct(&'static str), deserialize_tuple(usize), deserialize_tuple_struct(&'static str, usize),
        deserialize_struct(&'static str, &'static [&'static str]));

    /// A skip fails on the poison (a struct skips a key it has no field for, which is a key it
    /// does not take, but `serde_ignored` reports those).
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.poisoned() {
            return self.poison();
        }
        visitor.visit_unit()
    }
}

/// A table's entries, each value poisoned where the path goes.
struct Entries<'a> {
    entries: std::collections::btree_map::Iter<'a, String, Value>,
    value: Option<Poisoned<'a>>,
    parent: Poisoned<'a>,
}

impl<'de> de::MapAccess<'de> for Entries<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else { return Ok(None) };
        self.value = Some(self.parent.under(key, value));
        seed.deserialize(key.as_str().into_deserializer()).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(Failed),
        }
    }
}

/// A list's items, each poisoned where the path goes (by index).
struct Items<'a> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
    parent: Poisoned<'a>,
}

impl<'de> de::SeqAccess<'de> for Items<'_> {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, Error> {
        let Some((index, item)) = self.items.next() else { return Ok(None) };
        seed.deserialize(self.parent.under(&index.to_string(), item)).map(Some)
    }
}

/// The paths of the leaves under `value` (as `known::leaves_of` walks them) that `T` reading it
/// does not take, among those `candidate` picks.
pub(super) fn untaken<T: DeserializeOwned>(
    value: &Value,
    lossy: bool,
    candidate: impl Fn(&[String]) -> bool,
) -> Vec<Vec<String>> {
    let Value::Dict(_, dict) = value else { return Vec::new() };
    let mut leaves = Vec::new();
    super::tree::leaves_of(dict, &mut Vec::new(), &mut leaves);
    leaves.into_iter().filter(|leaf| candidate(leaf) && !takes::<T>(value, leaf, lossy)).collect()
}

#[cfg(test)]
mod tests {
    use figment::value::Value;
    use serde::Deserialize;

    use super::takes;

    fn value(toml: &str) -> Value {
        let dict: figment::value::Dict = toml::from_str(toml).unwrap();
        Value::from(dict)
    }

    fn path(keys: &str) -> Vec<String> {
        keys.split('.').map(str::to_owned).collect()
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        #[serde(flatten)]
        inner: Inner,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        #[serde(default)]
        size: Option<u32>,
        #[serde(default)]
        tags: Vec<String>,
        #[serde(default)]
        nested: Option<Nested>,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Nested {
        #[serde(default)]
        on: bool,
    }

    #[test]
    fn the_keys_a_flattened_struct_takes() {
        let v = value("name = \"a\"\nsize = 3\nsiez = 4\ntags = [\"x\"]\n[nested]\non = true\nof = 1\n");
        for taken in ["name", "size", "tags", "nested.on"] {
            assert!(takes::<Outer>(&v, &path(taken), false), "{taken}");
        }
        for left in ["siez", "nested.of"] {
            assert!(!takes::<Outer>(&v, &path(left), false), "{left}");
        }
    }

    #[test]
    fn a_lossy_read_takes_strings_for_numbers() {
        let v = value("name = \"a\"\nsize = \"3\"\n");
        assert!(takes::<Outer>(&v, &path("size"), true));
        // Read strictly, the string fails `size` whatever the key: counted as taken.
        assert!(takes::<Outer>(&v, &path("name"), false));
    }

    #[test]
    fn a_map_and_a_reader_of_anything_take_every_key() {
        let v = value("a = 1\nb = 2\n");
        assert!(takes::<std::collections::HashMap<String, u32>>(&v, &path("a"), false));
        // Skipped whole, never reached: counted as taken, as a reader of anything takes all.
        assert!(takes::<serde::de::IgnoredAny>(&v, &path("a"), false));
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum Source {
        Url { url: String },
        Parts { host: String, port: u16 },
    }

    #[test]
    fn an_untagged_enum_takes_the_keys_of_the_variant_it_reads() {
        let v = value("host = \"db\"\nport = 5432\nprot = 1\n");
        assert!(takes::<Source>(&v, &path("host"), false) && takes::<Source>(&v, &path("port"), false));
        assert!(!takes::<Source>(&v, &path("prot"), false));
        // Read as `Url`, the other variant's keys are left.
        let v = value("url = \"postgres://db\"\nhost = \"db\"\n");
        assert!(takes::<Source>(&v, &path("url"), false));
        assert!(!takes::<Source>(&v, &path("host"), false));
    }
}
