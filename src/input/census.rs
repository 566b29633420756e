//! How big a JSON document's parsed form may get, found before it is built.
//! A pass over the text that visits every value and borrows every string it
//! can counts values, strings and string bytes, and allocates nothing but
//! the escaped strings it must decode one at a time (never more than one
//! string's worth). The caller turns the counts into an estimate and refuses
//! a document whose parsed form would outgrow its bytes too far.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// What a JSON document holds, counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Census {
    /// Every value: numbers, booleans, nulls, strings, arrays, objects
    /// (object keys count as strings, not as values).
    pub values: u64,
    /// Strings, object keys included.
    pub strings: u64,
    /// Bytes in those strings, decoded.
    pub string_bytes: u64,
}

/// Bytes a parsed value takes beyond its own payload, at most: a record is
/// tagged by `kind` and has flattened fields, so serde buffers it whole
/// (unknown keys included) as its 32-byte `Content` values in `Vec`s that
/// keep room for up to twice their length, before typing it. Measured: 15
/// million numbers in one record peaked at 34 bytes each.
const PER_VALUE: u64 = 64;
/// Bytes an owned string takes beyond its text and `PER_VALUE`: its 24-byte
/// slot, doubled like any `Vec`'s, less what `PER_VALUE` counts, plus the
/// allocator's smallest block (a 1-byte string still takes 32 bytes).
const PER_STRING: u64 = 64;

impl Census {
    /// An upper estimate of the memory the document's typed form takes.
    pub fn parsed_bytes(&self) -> u64 {
        self.values
            .saturating_mul(PER_VALUE)
            .saturating_add(self.strings.saturating_mul(PER_STRING))
            .saturating_add(self.string_bytes)
    }
}

/// Counts what `text` holds; a syntax error is serde_json's.
pub fn census(text: &str) -> Result<Census, serde_json::Error> {
    let mut c = Census::default();
    let mut de = serde_json::Deserializer::from_str(text);
    Counter(&mut c).deserialize(&mut de)?;
    de.end()?;
    Ok(c)
}

struct Counter<'c>(&'c mut Census);

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.0.values += 1;
        d.deserialize_any(self)
    }
}

/// An object key: counted as a string, not as a value.
struct Key<'c>(&'c mut Census);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(Counter(self.0))
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.0.strings += 1;
        self.0.string_bytes += s.len() as u64;
        Ok(())
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<(), E> {
        self.visit_str(s)
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<(), E> {
        self.visit_str(&s)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Counter(self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Key(self.0))?.is_some() {
            map.next_value_seed(Counter(self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_string_and_key_is_counted() {
        let c = census(r#"{"a": [1, 2.5, "xy", null, true], "b\u0041": {}}"#).unwrap();
        // The object, the array, its five elements, the inner object.
        assert_eq!(c.values, 8);
        // "xy" and the keys "a" and "bA".
        assert_eq!(c.strings, 3);
        assert_eq!(c.string_bytes, 5);
        assert!(census("[1,").is_err());
        assert!(census("[1] x").is_err());
    }

    #[test]
    fn tiny_strings_are_estimated_far_above_their_bytes() {
        let text = format!("[{}\"a\"]", "\"a\",".repeat(1000));
        let c = census(&text).unwrap();
        assert_eq!(c.strings, 1001);
        // A `String` per item: header and heap block, not 4 bytes.
        assert!(c.parsed_bytes() >= 1001 * 80, "{c:?}");
        assert!(c.parsed_bytes() as usize >= 1001 * (std::mem::size_of::<String>() + 32));
    }
}
