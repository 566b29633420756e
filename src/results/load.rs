//! Reading a results file without trusting it: a regular file within the
//! input limit, written by rdma-bench in a schema version this build reads,
//! whose parsed form is bounded before it is built.

use std::path::Path;

use serde::Deserialize;

use super::{ResultsDoc, READABLE_SCHEMAS, TOOL};
use crate::error::{Error, Result};

/// The most memory the parsed form of the results files one command holds
/// at once may take (estimated by `input::census`): 2 GiB, eight times the
/// byte limit of one file.
pub const MAX_PARSED_BYTES: u64 = 8 * crate::input::MAX_RESULTS_BYTES;

/// The most strings one results file may hold. A run of `sweep::MAX_POINTS`
/// points writes a few dozen per point (names, counter keys); a string of
/// one byte costs about 80 bytes parsed, so this also bounds what a file
/// of many tiny strings can make a reader hold.
pub const MAX_STRINGS: u64 = 4_000_000;

/// The fields that say whose file this is, read before the rest.
#[derive(Deserialize)]
struct Origin {
    #[serde(default)]
    schema_version: Option<serde_json::Value>,
    #[serde(default)]
    tool: Option<serde_json::Value>,
    /// How many records, counted without building any.
    #[serde(default, deserialize_with = "count_elements")]
    results: u64,
}

/// The length of a JSON array, its elements skipped unbuilt.
fn count_elements<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    struct Count;
    impl<'de> serde::de::Visitor<'de> for Count {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of records")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<u64, A::Error> {
            let mut n = 0;
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                n += 1;
            }
            Ok(n)
        }
        // Anything else is not an array of records: the full parse says so.
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> std::result::Result<u64, A::Error> {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Ok(0)
        }
        fn visit_bool<E>(self, _: bool) -> std::result::Result<u64, E> {
            Ok(0)
        }
        fn visit_i64<E>(self, _: i64) -> std::result::Result<u64, E> {
            Ok(0)
        }
        fn visit_u64<E>(self, _: u64) -> std::result::Result<u64, E> {
            Ok(0)
        }
        fn visit_f64<E>(self, _: f64) -> std::result::Result<u64, E> {
            Ok(0)
        }
        fn visit_str<E>(self, _: &str) -> std::result::Result<u64, E> {
            Ok(0)
        }
        fn visit_unit<E>(self) -> std::result::Result<u64, E> {
            Ok(0)
        }
    }
    d.deserialize_any(Count)
}

/// Reads a results file: a regular file within the input limit, written by
/// rdma-bench in a schema version this build reads. Anything else is bad
/// input (exit 2) naming the file and the field.
pub fn load(path: &Path) -> Result<ResultsDoc> {
    load_within(path, MAX_PARSED_BYTES).map(|(doc, _)| doc)
}

/// `load`, refusing a file whose parsed form would take more than `budget`
/// bytes (what is left of `MAX_PARSED_BYTES` when several files are held at
/// once). Returns the document and the estimate charged for it.
pub fn load_within(path: &Path, budget: u64) -> Result<(ResultsDoc, u64)> {
    let file = path.display();
    let text = crate::input::read_text(path, crate::input::MAX_RESULTS_BYTES)?;
    let not_ours =
        |e: serde_json::Error| Error::usage(format!("{file}: not an rdma-bench results file: {e}"));
    // Counted before anything is built, the fields read first included: a
    // file of many tiny strings is refused at its size, not at the
    // allocator's failure.
    let census = crate::input::census(&text).map_err(not_ours)?;
    if census.strings > MAX_STRINGS {
        return Err(Error::usage(format!(
            "{file}: holds {} strings, over the limit of {MAX_STRINGS} for a results file",
            census.strings
        )));
    }
    let need = census.parsed_bytes();
    let mib = |b: u64| b.div_ceil(1 << 20);
    if need > budget {
        let left = if budget < MAX_PARSED_BYTES {
            format!(
                "what the files before it left ({} MiB) of the limit of {} MiB for results read at once",
                mib(budget),
                mib(MAX_PARSED_BYTES)
            )
        } else {
            format!(
                "the limit of {} MiB for results read at once",
                mib(MAX_PARSED_BYTES)
            )
        };
        return Err(Error::usage(format!(
            "{file}: its {} values and {} strings would take about {} MiB parsed, over {left}",
            census.values,
            census.strings,
            mib(need)
        )));
    }
    if !crate::input::can_allocate(need) {
        return Err(Error::usage(format!(
            "{file}: parsing it needs about {} MiB, more than this process may allocate (ulimit -v?)",
            mib(need)
        )));
    }
    let origin: Origin = serde_json::from_str(&text).map_err(not_ours)?;
    // A record costs far more parsed than `{}` does in the file.
    let max_records = crate::sweep::MAX_POINTS;
    if origin.results > max_records {
        return Err(Error::usage(format!(
            "{file}: holds {} records, over the limit of {max_records} points a run can measure",
            origin.results
        )));
    }
    match &origin.tool {
        Some(serde_json::Value::String(t)) if t == TOOL => {}
        Some(other) => {
            return Err(Error::usage(format!(
                "{file}: field 'tool' is {other}, not \"{TOOL}\": not an rdma-bench results file"
            )))
        }
        None => {
            return Err(Error::usage(format!(
                "{file}: field 'tool' is missing: not an rdma-bench results file"
            )))
        }
    }
    let readable = |v: &serde_json::Value| {
        v.as_u64()
            .is_some_and(|v| READABLE_SCHEMAS.iter().any(|&r| u64::from(r) == v))
    };
    match &origin.schema_version {
        Some(v) if readable(v) => {}
        Some(v) => {
            return Err(Error::usage(format!(
                "{file}: field 'schema_version' is {v}; this rdma-bench reads {READABLE_SCHEMAS:?}"
            )))
        }
        None => {
            return Err(Error::usage(format!(
            "{file}: field 'schema_version' is missing; this rdma-bench reads {READABLE_SCHEMAS:?}"
        )))
        }
    }
    let doc = serde_json::from_str(&text).map_err(not_ours)?;
    Ok((doc, need))
}
