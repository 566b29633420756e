//! Experiment files (`bench-configs/*.toml`): named series of measurements,
//! each a verb with its knobs. Keys are the command line's long options with
//! `_` for `-`, so everything a flag accepts a key accepts, and both go
//! through the same validation. Errors name the file, the line and the key.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::plan::Plan;
use crate::error::{Error, Result};
use crate::escape::{printable, shell_word};

/// Keys a series (or `[defaults]`) may have besides `label`, `verb`, `metric`
/// and `direction`, each with the kind of value it takes: each maps to the
/// option `--<key with - for _>`, and the command line is built in this
/// order. A key is the option's name, not the record field's: `cm` is
/// recorded as `connection`, `interval` as `interval_s`, `duration` as
/// `requested_s`, and keys such as `timeout` are not recorded at all; a test
/// checks that every field of the records' shared posting, path and memory
/// runs is a key here.
const OPTIONS: &[(&str, Expect)] = &[
    ("size", Expect::Sweep),
    ("iters", Expect::Count),
    ("duration", Expect::Seconds),
    ("warmup", Expect::Count),
    ("inline", Expect::Flag),
    ("inline_size", Expect::Count),
    ("transport", Expect::Words),
    ("imm", Expect::Flag),
    ("op", Expect::Word),
    ("completion", Expect::Flag),
    ("timeout", Expect::Seconds),
    ("signal_period", Expect::Sweep),
    ("qps", Expect::Sweep),
    ("postlist", Expect::Sweep),
    ("window", Expect::Sweep),
    ("threads", Expect::Sweep),
    ("warmup_time", Expect::Seconds),
    ("req", Expect::Word),
    ("resp", Expect::Word),
    ("group", Expect::Count),
    ("sge", Expect::Count),
    ("events", Expect::Flag),
    ("post_api", Expect::Word),
    ("tclass", Expect::Count),
    ("sl", Expect::Count),
    ("flow_label", Expect::Count),
    ("mtu", Expect::Count),
    ("bidirectional", Expect::Flag),
    ("srq", Expect::Flag),
    ("hugepages", Expect::Flag),
    ("mr_per_qp", Expect::Flag),
    // 4096 or "256m" (one value; a list is refused by --region).
    ("region", Expect::Sweep),
    ("offsets", Expect::Word),
    ("cm", Expect::Flag),
    ("interval", Expect::Seconds),
    ("forever", Expect::Flag),
    ("rate", Expect::Number),
    ("rate_per_qp", Expect::Flag),
    ("burst", Expect::Count),
    ("under_load", Expect::Words),
    ("validate", Expect::Flag),
];

/// Series in one file: each is a command line checked on its own (and once
/// per `[defaults]` key that may not fit it), so this bounds a file's checks
/// to seconds.
pub const MAX_SERIES: usize = 1000;

/// The keys of `OPTIONS`, in order.
fn option_keys() -> impl Iterator<Item = &'static str> {
    OPTIONS.iter().map(|(key, _)| *key)
}

fn is_option_key(key: &str) -> bool {
    option_keys().any(|k| k == key)
}

type Table = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    name: Spanned<String>,
    #[serde(default)]
    description: Option<String>,
    /// "mpi": the experiment runs under an MPI launcher with `ranks` ranks.
    #[serde(default)]
    launcher: Option<Spanned<String>>,
    #[serde(default)]
    ranks: Option<Spanned<u32>>,
    /// The CPUs the run's measuring threads are pinned to, as `--cpu`
    /// (which overrides it): part of what the experiment measures when a
    /// load must share a CPU with what it disturbs.
    #[serde(default)]
    cpu: Option<Spanned<String>>,
    /// `profile`: how many times each point is measured (see `PASSES`).
    #[serde(default)]
    passes: Option<Spanned<i64>>,
    #[serde(default)]
    defaults: Option<Table>,
    series: Vec<Spanned<Table>>,
}

/// One series, validated and ready to run.
pub struct Series {
    pub label: String,
    pub plan: Plan,
    /// The command line this series is (for printing launcher lines).
    pub argv: Vec<String>,
    /// Each `[defaults]` key the series does not set itself: `None` when it
    /// applied, else why it was left out.
    pub defaults: Vec<(String, Option<String>)>,
    /// `expect`: the `[defaults]` list that fits the series, then its own.
    pub expect: Vec<crate::verdict::Expectation>,
}

impl Series {
    /// The plan's line about this series' defaults.
    pub fn defaults_note(&self) -> Option<String> {
        defaults::note(&self.defaults)
    }
}

/// What a run gives every series besides its file: the `--connect` target
/// (checks such as `--group` depend on it).
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    pub connect: Option<String>,
}

/// Where an experiment runs: here (loopback or --connect), or under MPI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    Direct,
    Mpi { ranks: u32 },
}

pub struct Experiment {
    pub name: String,
    pub description: Option<String>,
    pub launcher: Launcher,
    /// `cpu = "LIST"`: the run's `--cpu` unless the command line gives one.
    pub cpu: Option<Vec<usize>>,
    /// Where `cpu` was given, "FILE:LINE: key 'cpu'", for refusals made
    /// once the allowed CPUs are known.
    pub cpu_where: String,
    /// `passes = K`: `profile` measures each point K times, interleaved
    /// over the run, so its intervals see drift between moments of a run.
    /// `run` measures each series once whatever it says.
    pub passes: Option<u32>,
    pub series: Vec<Series>,
}

/// The range `passes` takes.
pub const PASSES: std::ops::RangeInclusive<u32> = 1..=5;

impl Experiment {
    pub fn points(&self) -> usize {
        self.series.iter().map(|s| s.plan.points()).sum()
    }

    /// Each series' plan, in order, without the points that `done` (an
    /// earlier run's records) already holds: what `--resume` runs.
    pub fn remaining(&self, done: &[crate::results::Record]) -> Vec<super::plan::Plan> {
        let ids: std::collections::HashSet<String> =
            done.iter().map(super::plan::record_id).collect();
        self.series
            .iter()
            .map(|s| s.plan.without(Some(&s.label), &ids))
            .collect()
    }
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, offset: usize, msg: impl std::fmt::Display) -> Error {
        Error::usage(format!(
            "{}:{}: {msg}",
            self.file,
            line_of(self.text, offset)
        ))
    }
}

pub fn load(path: &Path, run: &RunContext) -> Result<Experiment> {
    let file = path.display().to_string();
    let text = crate::input::read_text(path, crate::input::MAX_EXPERIMENT_BYTES)?;
    parse_in(&file, &text, run)
}

/// Parses and validates an experiment for a run without `--connect`.
pub fn parse(file: &str, text: &str) -> Result<Experiment> {
    parse_in(file, text, &RunContext::default())
}

/// Parses and validates an experiment as `run` with `run`'s context would
/// run it; `file` names it in errors.
pub fn parse_in(file: &str, text: &str, run: &RunContext) -> Result<Experiment> {
    let cx = Ctx { file, text };
    let raw: ExperimentFile = toml::from_str(text).map_err(|e| {
        let at = e.span().map(|s| s.start).unwrap_or(0);
        // serde's type errors name no key: name the top-level key whose value it is in.
        match top_level_key_at(text, at) {
            Some((key, key_at)) => cx.err(key_at, format!("key '{key}': {}", e.message().trim())),
            None => cx.err(at, e.message().trim()),
        }
    })?;
    let name = raw.name.get_ref().trim().to_string();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(cx.err(
            raw.name.span().start,
            format!("key 'name': '{name}' must be non-empty letters, digits, '-', '_' or '.' (it names the results files)"),
        ));
    }
    if raw.series.is_empty() {
        return Err(cx.err(0, "no [[series]]: an experiment needs at least one"));
    }
    let launcher = match (&raw.launcher, &raw.ranks) {
        (None, None) => Launcher::Direct,
        (Some(l), ranks) if l.get_ref() == "mpi" => {
            let Some(r) = ranks else {
                return Err(cx.err(l.span().start, "key 'ranks': launcher = \"mpi\" needs ranks = N (rank 0 serves, the rest are clients)"));
            };
            if !(2..=4096).contains(r.get_ref()) {
                return Err(cx.err(
                    r.span().start,
                    format!("key 'ranks': {} is not in 2..4096", r.get_ref()),
                ));
            }
            Launcher::Mpi {
                ranks: *r.get_ref(),
            }
        }
        (Some(l), _) => {
            return Err(cx.err(
                l.span().start,
                format!("key 'launcher': '{}' is not \"mpi\"", l.get_ref()),
            ))
        }
        (None, Some(r)) => {
            return Err(cx.err(r.span().start, "key 'ranks': only with launcher = \"mpi\""))
        }
    };
    let cpu_where = match &raw.cpu {
        Some(c) => format!(
            "{}:{}: key 'cpu'",
            cx.file,
            line_of(cx.text, c.span().start)
        ),
        None => format!("{}: key 'cpu'", cx.file),
    };
    let cpu = match &raw.cpu {
        None => None,
        Some(c) => Some(
            crate::affinity::parse_cpu_list(c.get_ref())
                .map_err(|e| cx.err(c.span().start, format!("key 'cpu': {e}")))?,
        ),
    };
    let passes = match &raw.passes {
        None => None,
        Some(k) => match u32::try_from(*k.get_ref()) {
            Ok(v) if PASSES.contains(&v) => Some(v),
            _ => {
                return Err(cx.err(
                    k.span().start,
                    format!(
                        "key 'passes': {} is outside {} to {}",
                        k.get_ref(),
                        PASSES.start(),
                        PASSES.end()
                    ),
                ))
            }
        },
    };
    let defaults = raw.defaults.unwrap_or_default();
    check_keys(&cx, &defaults, true)?;
    if let Some(extra) = raw.series.get(MAX_SERIES) {
        return Err(cx.err(
            extra.span().start,
            format!(
                "key 'series': {} series, over the limit of {MAX_SERIES} in one file",
                raw.series.len()
            ),
        ));
    }
    let mut series: Vec<Series> = Vec::new();
    let mut points: u64 = 0;
    for (i, table) in raw.series.iter().enumerate() {
        let at = table.span().start;
        let table = table.get_ref();
        check_keys(&cx, table, false)?;
        let mut s = series::build_series(
            &cx,
            i,
            at,
            &defaults,
            table,
            &series::Context {
                run,
                launcher: &launcher,
            },
        )?;
        expect::add(&cx, &defaults, table, &mut s)?;
        let label_at = table
            .iter()
            .find(|(k, _)| k.get_ref() == "label")
            .map(|(_, v)| v.span().start)
            .unwrap_or(at);
        if series.iter().any(|o| o.label == s.label) {
            return Err(cx.err(
                label_at,
                format!(
                    "key 'label': '{}' names two series; labels must be unique (they identify points for --resume)",
                    printable(&s.label)
                ),
            ));
        }
        points += s.plan.points() as u64;
        if points > crate::sweep::MAX_POINTS {
            return Err(cx.err(
                at,
                format!(
                    "series '{}': the experiment reaches {points} points, over the limit of {} per run",
                    printable(&s.label),
                    crate::sweep::MAX_POINTS
                ),
            ));
        }
        series.push(s);
    }
    Ok(Experiment {
        name,
        description: raw.description,
        launcher,
        cpu,
        cpu_where,
        passes,
        series,
    })
}

/// The top-level key whose value holds byte `at`, and where that value
/// starts (`None`: the text is not TOML, or `at` is in no value).
fn top_level_key_at(text: &str, at: usize) -> Option<(String, usize)> {
    let doc: Table = toml::from_str(text).ok()?;
    doc.iter()
        .find(|(k, v)| v.span().contains(&at) || k.span().contains(&at))
        .map(|(k, v)| (printable(k.get_ref()).into_owned(), v.span().start))
}

fn check_keys(cx: &Ctx, table: &Table, defaults: bool) -> Result<()> {
    for key in table.keys() {
        let k = key.get_ref().as_str();
        let known = is_option_key(k)
            || matches!(k, "verb" | "metric" | "direction" | "expect")
            || (!defaults && k == "label");
        if !known {
            return Err(cx.err(
                key.span().start,
                format!(
                    "unknown key '{k}'{} (known: label, verb, metric, direction, expect, {})",
                    if defaults { " in [defaults]" } else { "" },
                    option_keys().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// What kind of value a key takes.
#[derive(Clone, Copy, PartialEq)]
enum Expect {
    /// A whole number: `iters = 1000`.
    Count,
    /// Whole numbers: `size = 64`, `size = "2..4096"`, `size = [64, "1k"]`.
    Sweep,
    /// Seconds: `duration = 2` or `duration = 0.5`.
    Seconds,
    /// A number: `rate = 0.05`.
    Number,
    /// true or false.
    Flag,
    /// One word: `op = "fadd"`.
    Word,
    /// Words: `transport = "rc"` or `transport = ["rc", "uc"]`.
    Words,
}

/// What kind of value `key` takes (from `OPTIONS`).
fn expect(key: &str) -> Expect {
    OPTIONS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(Expect::Word, |(_, kind)| *kind)
}

/// A TOML value's type, with the value, for errors.
fn found(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("the string \"{}\"", printable(s)),
        toml::Value::Integer(i) => format!("the integer {i}"),
        toml::Value::Float(f) => format!("the float {f:?}"),
        toml::Value::Boolean(b) => format!("the boolean {b}"),
        toml::Value::Datetime(d) => format!("the date {d}"),
        toml::Value::Array(_) => "a list".into(),
        toml::Value::Table(_) => "a table".into(),
    }
}

/// The value as the command line spells it (`None`: a flag set to false),
/// or why its type is wrong for the key.
fn as_arg(key: &str, v: &toml::Value) -> std::result::Result<Option<String>, String> {
    use toml::Value as V;
    let want = expect(key);
    let wrong = |what: &str| Err(format!("expected {what}, found {}", found(v)));
    let item = |i: &V, numbers: bool| -> std::result::Result<String, String> {
        match i {
            V::Integer(n) if numbers => Ok(n.to_string()),
            V::String(s) => Ok(s.clone()),
            other => Err(format!(
                "expected a list of {}, found {} in it",
                if numbers { "whole numbers" } else { "strings" },
                found(other)
            )),
        }
    };
    match (want, v) {
        (Expect::Flag, V::Boolean(b)) => Ok(b.then(String::new)),
        (Expect::Flag, _) => wrong("true or false"),
        (Expect::Count, V::Integer(n)) => Ok(Some(n.to_string())),
        (Expect::Count, _) => wrong("a whole number"),
        (Expect::Seconds, V::Integer(n)) => Ok(Some(n.to_string())),
        (Expect::Seconds, V::Float(f)) => Ok(Some(format!("{f:?}"))),
        (Expect::Seconds, _) => wrong("a number of seconds"),
        (Expect::Number, V::Integer(n)) => Ok(Some(n.to_string())),
        (Expect::Number, V::Float(f)) => Ok(Some(format!("{f:?}"))),
        (Expect::Number, _) => wrong("a number"),
        (Expect::Sweep, V::Integer(n)) => Ok(Some(n.to_string())),
        (Expect::Sweep | Expect::Words | Expect::Word, V::String(s)) => Ok(Some(s.clone())),
        (Expect::Sweep | Expect::Words, V::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|i| item(i, want == Expect::Sweep))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(|v| Some(v.join(","))),
        (Expect::Sweep, _) => wrong("whole numbers (64, \"2..4096\" or [64, 128])"),
        (Expect::Words, _) => wrong("a string or a list of strings"),
        (Expect::Word, _) => wrong("a string"),
    }
}

impl Experiment {
    /// The exact launcher lines for an MPI experiment, one per series (and
    /// per launcher: mpirun, srun), each with `run --expect`'s `expect`
    /// expressions. rdma-bench never starts remote processes.
    pub fn launch_lines(&self, out: &Path, expect: &[String]) -> Vec<String> {
        let Launcher::Mpi { ranks } = self.launcher else {
            return Vec::new();
        };
        let mut lines = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            let json = out.join(format!("{}-{}.json", self.name, i + 1));
            let mut args: Vec<String> = s.argv.iter().map(|a| shell_word(a)).collect();
            args.extend(expect.iter().map(|e| shell_word(&format!("--expect={e}"))));
            if let Some(cpu) = &self.cpu {
                args.push(format!("--cpu={}", crate::affinity::format_cpu_list(cpu)));
            }
            let tail = format!(
                "rdma-bench {} --json {}",
                args.join(" "),
                shell_word(&json.display().to_string())
            );
            lines.push(match s.defaults_note() {
                Some(note) => format!("# series '{}': {note}", printable(&s.label)),
                None => format!("# series '{}'", printable(&s.label)),
            });
            lines.push(format!("mpirun -np {ranks} {tail}"));
            lines.push(format!("srun -n {ranks} {tail}"));
        }
        lines
    }
}

/// The first `--option` a message names that is a config key (or `tput`).
fn option_in(msg: &str) -> Option<String> {
    msg.match_indices("--").find_map(|(at, _)| {
        let name: String = msg[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let key = name.replace('-', "_");
        (is_option_key(&key) || key == "tput").then_some(key)
    })
}

/// The option a clap error is about (its `InvalidArg` context), as a key.
fn clap_key(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let arg = match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(s) => s.clone(),
        ContextValue::Strings(v) => v.first()?.clone(),
        _ => return None,
    };
    option_in(&arg)
}

#[cfg(test)]
mod tests;

mod defaults;
mod expect;
mod series;
