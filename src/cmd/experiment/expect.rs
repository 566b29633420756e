//! The `expect` key: `--expect` expressions in an experiment file, a string
//! or a list of them. Unlike the option keys a series' list does not
//! replace `[defaults]`' but adds to it (and `run --expect` adds to both):
//! a limit set for the whole file holds in every series it fits.

use super::{found, Ctx, Series, Table};
use crate::error::{Error, Result};
use crate::escape::printable;
use crate::verdict::{parse_all, Expectation};

/// Holds the series to `parsed` and puts `list` on its command line.
fn take(list: Vec<String>, s: &mut Series, parsed: Vec<Expectation>) {
    s.argv.extend(list.iter().map(|e| format!("--expect={e}")));
    s.expect.extend(parsed);
}

/// The key's expressions as written in `table`, and where its value starts.
fn exprs(cx: &Ctx, table: &Table, in_series: &str) -> Result<Option<(Vec<String>, usize)>> {
    let Some((_, v)) = table.iter().find(|(k, _)| k.get_ref() == "expect") else {
        return Ok(None);
    };
    let at = v.span().start;
    let wrong = |what: String| {
        cx.err(
            at,
            format!("key 'expect' ({in_series}): expected a string or a list of strings such as [\"p99<=20us\"], found {what}"),
        )
    };
    let list = match v.get_ref() {
        toml::Value::String(s) => vec![s.clone()],
        toml::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                toml::Value::String(s) => Ok(s.clone()),
                other => Err(wrong(format!("{} in it", found(other)))),
            })
            .collect::<Result<Vec<_>>>()?,
        other => return Err(wrong(found(other))),
    };
    Ok(Some((list, at)))
}

/// Adds `[defaults]`' expressions that the series records and then its own
/// to `s.expect` (and to its command line, for launcher lines). A default
/// the series never records is left out with the reason, as a default
/// option that does not fit is; a malformed one, or one of the series' own
/// that it never records, is refused naming the file, line and key.
pub(super) fn add(cx: &Ctx, defaults: &Table, table: &Table, s: &mut Series) -> Result<()> {
    let in_series = format!("series '{}'", printable(&s.label));
    let run = crate::cmd::recorded(&s.plan);
    let option = format!("key 'expect' ({in_series})");
    let at_line = |at: usize| {
        move |e: Error| match e {
            Error::Usage(m) => cx.err(at, m),
            other => other,
        }
    };
    if let Some((list, at)) = exprs(cx, defaults, &in_series)? {
        for e in list {
            // Syntax and units first: a bad default is wrong wherever it goes.
            let parsed = Expectation::parse(&e).map_err(|m| {
                cx.err(
                    at,
                    format!("key 'expect' in [defaults] '{}': {m}", printable(e.trim())),
                )
            })?;
            let name = format!("expect '{}'", printable(e.trim()));
            match parsed.recorded_by(&run) {
                Ok(()) => {
                    s.defaults.push((name, None));
                    take(vec![e], s, vec![parsed]);
                }
                Err(why) => s.defaults.push((name, Some(why))),
            }
        }
    }
    if let Some((list, at)) = exprs(cx, table, &in_series)? {
        let parsed = parse_all(&option, &list, &run).map_err(at_line(at))?;
        take(list, s, parsed);
    }
    Ok(())
}
