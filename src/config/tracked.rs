//! Deserialising a JSON value while keeping the path to where it is (map keys, list indices),
//! so that an error can name its key: `serde_json::Value`'s own deserialiser with the maps and
//! lists walked here. Values that are neither are handed to `serde_json::Value` as they are, so
//! the messages are serde_json's. What `serde_path_to_error` gave, without its wrapper around
//! every visitor and field (BENCHMARKS.md, "Binary size, round three's last cut").
//!
//! The path is what was being read when the error happened: a key that is refused (`unknown
//! field`) or whose value is refused is on it; an error of a section as a whole (a missing
//! key) stops at the section. Enum variants add nothing (the configuration's enums are names).

use super::origin::Seg;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Unexpected, Visitor};
use serde_json::{Error, Map, Value};

/// `T` from `value`, or the error and the path where it happened.
pub(crate) fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, (Vec<Seg>, Error)> {
    let mut path = Vec::new();
    T::deserialize(Tracked {
        value,
        path: &mut path,
    })
    .map_err(|e| (path, e))
}

/// A value and the path to it; on an error the path is left where the error happened.
struct Tracked<'p> {
    value: Value,
    path: &'p mut Vec<Seg>,
}

macro_rules! as_value {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                self.value.$method(visitor)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Tracked<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(m) => visit_object(m, self.path, visitor),
            Value::Array(a) => visit_array(a, self.path, visitor),
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Number(n) => n.deserialize_any(visitor),
            Value::String(s) => visitor.visit_string(s),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Array(a) => visit_array(a, self.path, visitor),
            other => Err(refused(&other, &visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(m) => visit_object(m, self.path, visitor),
            other => Err(refused(&other, &visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(m) => visit_object(m, self.path, visitor),
            Value::Array(a) => visit_array(a, self.path, visitor),
            other => Err(refused(&other, &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.value.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_byte_buf(visitor)
    }

    /// As serde_json: a string's text, or a list (of numbers).
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::String(s) => visitor.visit_string(s),
            Value::Array(a) => visit_array(a, self.path, visitor),
            other => Err(refused(&other, &visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.value.deserialize_unit_struct(name, visitor)
    }

    as_value! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_unit deserialize_identifier deserialize_ignored_any
    }
}

/// serde_json's error for a value of the wrong type (`invalid type: string "x", expected …`).
/// Made here rather than by handing the value to serde_json's deserialiser, which would build
/// the visitor a second time for serde_json's own map and list readers.
fn refused(value: &Value, expected: &dyn de::Expected) -> Error {
    let unexpected = match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (None, Some(i)) => Unexpected::Signed(i),
            (None, None) => Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    };
    de::Error::invalid_type(unexpected, expected)
}

/// As `serde_json` reads a map: its entries, then an error if the visitor left some unread.
fn visit_object<'de, V: Visitor<'de>>(
    m: Map<String, Value>,
    path: &mut Vec<Seg>,
    visitor: V,
) -> Result<V::Value, Error> {
    let len = m.len();
    let mut access = Entries {
        iter: m.into_iter(),
        value: None,
        path,
    };
    let out = visitor.visit_map(&mut access)?;
    if access.iter.len() == 0 {
        Ok(out)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in map"))
    }
}

/// As `serde_json` reads a list: its items, then an error if the visitor left some unread.
fn visit_array<'de, V: Visitor<'de>>(
    a: Vec<Value>,
    path: &mut Vec<Seg>,
    visitor: V,
) -> Result<V::Value, Error> {
    let len = a.len();
    let mut access = Items {
        iter: a.into_iter(),
        index: 0,
        path,
    };
    let out = visitor.visit_seq(&mut access)?;
    if access.iter.len() == 0 {
        Ok(out)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in array"))
    }
}

struct Entries<'p> {
    iter: serde_json::map::IntoIter,
    /// The value of the key just read, and that key.
    value: Option<(String, Value)>,
    path: &'p mut Vec<Seg>,
}

impl<'de> de::MapAccess<'de> for Entries<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.iter.next() else {
            return Ok(None);
        };
        self.path.push(Seg::Key(key.clone()));
        let k = seed.deserialize(IntoDeserializer::<Error>::into_deserializer(key.clone()))?;
        self.path.pop();
        self.value = Some((key, value));
        Ok(Some(k))
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        let (key, value) = self
            .value
            .take()
            .ok_or_else(|| de::Error::custom("value is missing"))?;
        self.path.push(Seg::Key(key));
        let v = seed.deserialize(Tracked {
            value,
            path: &mut *self.path,
        })?;
        self.path.pop();
        Ok(v)
    }

    fn size_hint(&self) -> Option<usize> {
        exact(self.iter.size_hint())
    }
}

struct Items<'p> {
    iter: std::vec::IntoIter<Value>,
    index: usize,
    path: &'p mut Vec<Seg>,
}

impl<'de> de::SeqAccess<'de> for Items<'_> {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Error> {
        let Some(value) = self.iter.next() else {
            return Ok(None);
        };
        self.path.push(Seg::Index(self.index));
        self.index += 1;
        let v = seed.deserialize(Tracked {
            value,
            path: &mut *self.path,
        })?;
        self.path.pop();
        Ok(Some(v))
    }

    fn size_hint(&self) -> Option<usize> {
        exact(self.iter.size_hint())
    }
}

/// The length when the iterator knows it exactly, as `serde_json`'s accessors answer.
fn exact(hint: (usize, Option<usize>)) -> Option<usize> {
    match hint {
        (lower, Some(upper)) if lower == upper => Some(upper),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: u32,
        #[serde(default)]
        tags: Vec<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        list: Vec<Inner>,
        #[serde(default)]
        named: BTreeMap<String, Inner>,
        maybe: Option<Inner>,
    }

    fn err(v: Value) -> (String, String) {
        let (path, e) = from_value::<Outer>(v).unwrap_err();
        (super::super::origin::key_string(&path), e.to_string())
    }

    #[test]
    fn an_error_names_the_key_and_says_what_serde_json_says() {
        let (key, message) = err(json!({"list": [{"n": 1}, {"n": "x"}], "maybe": null}));
        assert_eq!(key, "list[1].n");
        let plain = serde_json::from_value::<Inner>(json!({"n": "x"})).unwrap_err();
        assert_eq!(message, plain.to_string());
        let (key, message) = err(json!({"list": [], "named": {"a": {"n": 1, "tagz": []}}}));
        assert_eq!(key, "named.a.tagz");
        assert!(message.starts_with("unknown field `tagz`"), "{message}");
        let (key, message) = err(json!({"list": [], "maybe": {"n": 2, "tags": [1]}}));
        assert_eq!(
            (key.as_str(), message.as_str()),
            (
                "maybe.tags[0]",
                "invalid type: integer `1`, expected a string"
            )
        );
        let (key, message) = err(json!({"list": [{}]}));
        assert_eq!(
            (key.as_str(), message.as_str()),
            ("list[0]", "missing field `n`")
        );
        let (key, message) = err(json!({"list": "no"}));
        assert_eq!(key, "list");
        assert_eq!(message, "invalid type: string \"no\", expected a sequence");
        let ok: Outer = from_value(json!({
            "list": [{"n": 3, "tags": ["t"]}],
            "named": {"k": {"n": 5}},
            "maybe": {"n": 4},
        }))
        .unwrap();
        assert_eq!((ok.list[0].n, ok.maybe.unwrap().n), (3, 4));
        assert_eq!(
            (ok.list[0].tags.as_slice(), ok.named["k"].n),
            (&["t".to_string()][..], 5)
        );
    }
}
