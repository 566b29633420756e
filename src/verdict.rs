//! `--expect FIELD OP NUMBER[UNIT]`: a limit a recorded field must meet.
//! Parsed (and checked against what the run will record) before any device
//! opens; judged on each point's record as it is kept; `compare` judges
//! `ratio.FIELD` expressions on each file's ratio to the baseline.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::escape::printable;
use crate::report::ExpectationResult;
use crate::results::Record;

pub mod fields;
pub use fields::{Field, Kind};
use fields::{Has, Needs, FIELDS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// Longest first, so `<=` is not read as `<` and `=`.
const OPS: &[(&str, Op)] = &[
    ("<=", Op::Le),
    (">=", Op::Ge),
    ("==", Op::Eq),
    ("!=", Op::Ne),
    ("<", Op::Lt),
    (">", Op::Gt),
];

impl Op {
    pub fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Op::Lt => measured < limit,
            Op::Le => measured <= limit,
            Op::Gt => measured > limit,
            Op::Ge => measured >= limit,
            Op::Eq => measured == limit,
            Op::Ne => measured != limit,
        }
    }
}

/// Which kind of record a run makes, and what it records besides the
/// fields every such record has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    pub throughput: bool,
    pub interval: bool,
    pub validate: bool,
    /// Latency: ping-pong (the round trip is recorded).
    pub ping_pong: bool,
    /// Throughput: a `-n` run (its records carry `iters`).
    pub iters: bool,
    /// Throughput: atomics (their records carry `verify_failures`).
    pub atomic: bool,
    /// Throughput: the receiving side counts messages (records carry `lost`).
    pub received: bool,
}

/// One parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// As given, without surrounding whitespace.
    pub expr: String,
    pub field: &'static Field,
    /// `compare`: the expression is on `ratio.FIELD`, file / baseline.
    pub ratio: bool,
    pub op: Op,
    /// In the field's own unit (a ratio: a plain number).
    pub limit: f64,
    /// The unit the limit was written in and its size in the field's unit,
    /// to show a measured value as the user wrote the limit.
    shown: (&'static str, f64),
}

/// The expected shape, said in every syntax error.
const SHAPE: &str = "expected FIELD OP NUMBER[UNIT], OP one of < <= > >= == !=, e.g. p99<=20us";

/// Splits `FIELD OP NUMBER UNIT` (whitespace allowed between the parts).
fn split(expr: &str) -> std::result::Result<(&str, Op, f64, &str), String> {
    let s = expr.trim();
    let name_end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(s.len());
    let (name, rest) = s.split_at(name_end);
    if name.is_empty() {
        return Err(format!("no field name ({SHAPE})"));
    }
    let rest = rest.trim_start();
    let Some((sym, op)) = OPS.iter().find(|(sym, _)| rest.starts_with(sym)) else {
        return Err(format!("no operator after '{name}' ({SHAPE})"));
    };
    let rest = rest[sym.len()..].trim_start();
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
        .unwrap_or(rest.len());
    let (number, unit) = rest.split_at(number_end);
    if number.is_empty() {
        return Err(format!("no number after '{sym}' ({SHAPE})"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{number}' is not a number ({SHAPE})"))?;
    if !value.is_finite() {
        return Err(format!("'{number}' is not a finite number"));
    }
    let unit = unit.trim();
    if unit.chars().any(char::is_whitespace) {
        return Err(format!("'{unit}' is not a unit ({SHAPE})"));
    }
    Ok((name, *op, value, unit))
}

/// The limit in the field's unit, and how it was written.
fn limit_of(
    field: &'static Field,
    value: f64,
    unit: &str,
) -> std::result::Result<(f64, (&'static str, f64)), String> {
    if unit.is_empty() {
        if field.kind == Kind::Time {
            return Err(format!(
                "{} is a time: give the limit a unit (ns, us, ms, s), e.g. {}<=20us",
                field.name, field.name
            ));
        }
        return Ok((value, (field.unit, 1.0)));
    }
    let Some((name, kind, size)) = fields::unit(unit) else {
        return Err(format!(
            "unknown unit '{unit}' for {}, {} (units: {})",
            field.name,
            field.kind.name(),
            field.kind.units()
        ));
    };
    if kind != field.kind {
        return Err(format!(
            "'{unit}' is a unit of {}, but {} is {} (units: {})",
            kind.name().trim_start_matches("a "),
            field.name,
            field.kind.name(),
            field.kind.units()
        ));
    }
    // `size` is in the kind's base unit; the field's unit is `scale` of it.
    let per_field_unit = size / field.scale;
    Ok((value * per_field_unit, (name, per_field_unit)))
}

fn field_names(run: Option<&Recorded>) -> String {
    FIELDS
        .iter()
        .filter(|f| run.map_or(true, |r| recorded(f, r).is_ok()))
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a run like `run` records `f` at all, and if not, why.
fn recorded(f: &Field, run: &Recorded) -> std::result::Result<(), String> {
    let kind = if run.throughput {
        "throughput"
    } else {
        "latency"
    };
    let has = match f.has {
        Has::Both => true,
        Has::Latency => !run.throughput,
        Has::Throughput => run.throughput,
    };
    if !has {
        return Err(format!("a {kind} run records no {}", f.name));
    }
    match f.needs {
        Needs::Interval if !run.interval => {
            Err(format!("{} is recorded only with --interval", f.name))
        }
        Needs::Validate if !run.validate => {
            Err(format!("{} is recorded only with --validate", f.name))
        }
        Needs::PingPong if !run.ping_pong => Err(format!(
            "{} is recorded only by ping-pong latency (this run times completions)",
            f.name
        )),
        Needs::TputIters if run.throughput && !run.iters => Err(format!(
            "a throughput record's {} is the -n asked, and this run is timed (-D)",
            f.name
        )),
        Needs::TputAtomic if run.throughput && !run.atomic => Err(format!(
            "a throughput record has {} only for atomics",
            f.name
        )),
        Needs::Received if !run.received => Err(format!(
            "{} is recorded only where the receiver counts messages (send, write --imm, echo)",
            f.name
        )),
        _ => Ok(()),
    }
}

impl Expectation {
    /// Parses one expression on a record field (not yet checked against a run).
    pub fn parse(expr: &str) -> std::result::Result<Expectation, String> {
        Self::parse_on(expr, |name| {
            fields::find(name)
                .ok_or_else(|| format!("unknown field '{name}' (fields: {})", field_names(None)))
        })
    }

    /// Parses an expression on a fabric entry's figure (`fabric --expect`).
    pub fn parse_fabric(expr: &str) -> std::result::Result<Expectation, String> {
        Self::parse_on(expr, |name| {
            fields::FABRIC_FIELDS
                .iter()
                .find(|f| f.name == name)
                .ok_or_else(|| {
                    let names: Vec<&str> = fields::FABRIC_FIELDS.iter().map(|f| f.name).collect();
                    format!(
                        "unknown field '{name}' (fabric fields: {})",
                        names.join(", ")
                    )
                })
        })
    }

    /// `FIELD OP NUMBER[UNIT]` with the field found by `field`.
    fn parse_on(
        expr: &str,
        field: impl FnOnce(&str) -> std::result::Result<&'static Field, String>,
    ) -> std::result::Result<Expectation, String> {
        let (name, op, value, unit) = split(expr)?;
        let field = field(name)?;
        let (limit, shown) = limit_of(field, value, unit)?;
        Ok(Expectation {
            expr: expr.trim().to_string(),
            field,
            ratio: false,
            op,
            limit,
            shown,
        })
    }

    /// Parses `ratio.FIELD OP NUMBER` (`compare`): a file's figure over the
    /// baseline's, so the number has no unit.
    pub fn parse_ratio(expr: &str) -> std::result::Result<Expectation, String> {
        let (name, op, value, unit) = split(expr)?;
        let Some(field) = name.strip_prefix("ratio.").and_then(fields::find) else {
            return Err(format!(
                "'{name}' is not ratio.FIELD (fields: {})",
                field_names(None)
            ));
        };
        if !unit.is_empty() {
            return Err(format!(
                "a ratio has no unit, found '{unit}' (e.g. ratio.p50<=1.05)"
            ));
        }
        Ok(Expectation {
            expr: expr.trim().to_string(),
            field,
            ratio: true,
            op,
            limit: value,
            shown: ("", 1.0),
        })
    }

    /// Whether a run like `run` records the field at all, and if not, why.
    pub fn recorded_by(&self, run: &Recorded) -> std::result::Result<(), String> {
        recorded(self.field, run)
    }

    /// The field's value in `record` (a record as its JSON), in the field's
    /// unit; `None` when the record does not have it or it is null.
    pub fn value_in(&self, record: &Value) -> Option<f64> {
        self.field
            .path
            .split('.')
            .try_fold(record, |v, key| v.get(key))
            .and_then(Value::as_f64)
    }

    /// Holds `measured` to the limit; a missing value fails.
    pub fn judge(&self, measured: Option<f64>) -> ExpectationResult {
        ExpectationResult {
            expr: self.expr.clone(),
            field: if self.ratio {
                format!("ratio.{}", self.field.path)
            } else {
                self.field.path.to_string()
            },
            measured,
            limit: self.limit,
            pass: measured.is_some_and(|m| self.op.holds(m, self.limit)),
        }
    }

    /// What a failed result says under the point's row:
    /// `p99<=20us (p99 = 25.31 us)`.
    pub fn failure(&self, r: &ExpectationResult) -> String {
        let name = if self.ratio {
            format!("ratio.{}", self.field.name)
        } else {
            self.field.name.to_string()
        };
        match r.measured {
            None => format!(
                "{} ({name} is not recorded for this point)",
                printable(&self.expr)
            ),
            Some(m) => {
                let (unit, size) = self.shown;
                let shown = m / size;
                let sep = if unit.is_empty() || unit == "%" {
                    ""
                } else {
                    " "
                };
                format!(
                    "{} ({name} = {}{sep}{unit})",
                    printable(&self.expr),
                    round(shown)
                )
            }
        }
    }
}

/// A figure as a message shows it: two decimals below 100, one above,
/// whole numbers as they are, tiny ones in scientific notation.
pub fn round(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        format!("{v:.3e}")
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() < 100.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

/// Longest expression accepted: the longest field, operator, number and
/// unit fit in a fraction of it, so anything longer is not an expression.
pub const MAX_EXPR_CHARS: usize = 200;

/// Parses one expression of `option`, refusing it in one line that quotes
/// it (cut short if it is long) and says `why`.
fn parse_one<T>(
    option: &str,
    e: &str,
    parse: impl FnOnce(&str) -> std::result::Result<T, String>,
) -> Result<T> {
    let e = e.trim();
    let quoted = |e: &str| match e.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", printable(&e[..at])),
        None => printable(e).into_owned(),
    };
    let refuse = |msg: String| Error::usage(format!("{option} '{}': {msg}", quoted(e)));
    if e.chars().count() > MAX_EXPR_CHARS {
        return Err(refuse(format!(
            "longer than {MAX_EXPR_CHARS} characters: not an expression (FIELD OP NUMBER[UNIT], e.g. p99<=20us)"
        )));
    }
    parse(e).map_err(refuse)
}

/// Parses every expression of `option` (`--expect`, or an experiment
/// file's key) and checks each against what the run will record: one
/// usage error naming the option, the expression and the valid fields.
pub fn parse_all(option: &str, exprs: &[String], run: &Recorded) -> Result<Vec<Expectation>> {
    exprs
        .iter()
        .map(|e| {
            parse_one(option, e, |e| {
                let exp = Expectation::parse(e)?;
                recorded(exp.field, run).map_err(|why| {
                    format!("{why} (fields for this run: {})", field_names(Some(run)))
                })?;
                Ok(exp)
            })
        })
        .collect()
}

/// `fabric --expect`: every expression on a pair's figures.
pub fn parse_fabric(option: &str, exprs: &[String]) -> Result<Vec<Expectation>> {
    exprs
        .iter()
        .map(|e| parse_one(option, e, Expectation::parse_fabric))
        .collect()
}

/// `compare --expect`: every expression a `ratio.FIELD`.
pub fn parse_ratios(option: &str, exprs: &[String]) -> Result<Vec<Expectation>> {
    exprs
        .iter()
        .map(|e| parse_one(option, e, Expectation::parse_ratio))
        .collect()
}

/// Judges `record` by every expectation and records the verdicts in it;
/// returns the failures' lines for the table.
pub fn judge_record(exps: &[Expectation], record: &mut Record) -> Vec<String> {
    if exps.is_empty() {
        return Vec::new();
    }
    let value = serde_json::to_value(&*record).unwrap_or(Value::Null);
    let results: Vec<ExpectationResult> =
        exps.iter().map(|e| e.judge(e.value_in(&value))).collect();
    let failed = exps
        .iter()
        .zip(&results)
        .filter(|(_, r)| !r.pass)
        .map(|(e, r)| e.failure(r))
        .collect();
    let checks = match record {
        Record::Latency(l) => &mut l.checks,
        Record::Throughput(t) => &mut t.checks,
    };
    checks.expectations = results;
    failed
}

#[cfg(test)]
mod tests;
