//! One `[[series]]` table turned into a checked plan: its own keys, the
//! `[defaults]` that apply to it, and the command line it stands for.

use std::collections::BTreeMap;

use toml::Spanned;

use super::{
    as_arg, defaults, expect, option_keys, Ctx, Expect, Launcher, RunContext, Series, Table,
};
use crate::error::Result;
use crate::escape::printable;
use crate::spec::VerbKind;

/// The run's context and the file's launcher, for checking a series.
pub(super) struct Context<'a> {
    pub run: &'a RunContext,
    pub launcher: &'a Launcher,
}

pub(super) fn build_series(
    cx: &Ctx,
    index: usize,
    table_at: usize,
    defaults: &Table,
    table: &Table,
    run: &Context,
) -> Result<Series> {
    // The series' own keys override [defaults].
    let mut merged: BTreeMap<String, &Spanned<toml::Value>> = BTreeMap::new();
    for (k, v) in defaults.iter().chain(table.iter()) {
        merged.insert(k.get_ref().clone(), v);
    }
    let own = |key: &str| table.keys().any(|k| k.get_ref() == key);
    let first_key = table
        .keys()
        .map(|k| k.span().start)
        .min()
        .unwrap_or(table_at);
    let text_of = |key: &str| -> Result<Option<(String, usize)>> {
        match merged.get(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                toml::Value::String(s) => Ok(Some((s.clone(), v.span().start))),
                _ => Err(cx.err(v.span().start, format!("key '{key}': expected a string"))),
            },
        }
    };
    let (verb, verb_at) = text_of("verb")?.ok_or_else(|| {
        cx.err(
            first_key,
            format!("series {}: key 'verb' is missing", index + 1),
        )
    })?;
    let label = text_of("label")?
        .map(|(l, _)| l)
        .unwrap_or_else(|| format!("{verb} #{}", index + 1));
    if label.trim().is_empty() {
        return Err(cx.err(
            merged
                .get("label")
                .map(|v| v.span().start)
                .unwrap_or(first_key),
            "key 'label': empty; a label names the series",
        ));
    }
    // The line of a key; a missing direction is blamed on the metric that needs it.
    let where_ = |key: &str| -> usize {
        let at = |k: &str| merged.get(k).map(|v| v.span().start);
        at(key)
            .or_else(|| (key == "direction").then(|| at("metric")).flatten())
            .unwrap_or(first_key)
    };
    let in_series = format!("series '{}'", printable(&label));
    let verb_kind = match VerbKind::from_name(&verb) {
        Some(v) => v,
        None => {
            let names: Vec<&str> = VerbKind::ALL.iter().map(|v| v.name()).collect();
            return Err(cx.err(
                verb_at,
                format!(
                    "key 'verb' ({in_series}): '{verb}' is not one of {}",
                    names.join(", ")
                ),
            ));
        }
    };
    // The series' own keys, as the command line spells them.
    let metric = text_of("metric")?;
    if let Some((m, at)) = &metric {
        if m != "latency" && m != "throughput" {
            return Err(cx.err(
                *at,
                format!("key 'metric' ({in_series}): '{m}' is not latency or throughput"),
            ));
        }
    }
    let mut own_args: Vec<(&'static str, Option<String>)> = Vec::new();
    let mut pending: Vec<(&'static str, Option<String>)> = Vec::new();
    for key in ["metric", "direction"] {
        let Some(v) = merged.get(key) else { continue };
        let text = match v.get_ref() {
            toml::Value::String(t) => Some(t.clone()),
            _ => return Err(cx.err(v.span().start, format!("key '{key}': expected a string"))),
        };
        if own(key) {
            own_args.push((key, text))
        } else {
            pending.push((key, text))
        }
    }
    if own("direction")
        && !own_args
            .iter()
            .chain(&pending)
            .any(|(k, v)| *k == "metric" && v.as_deref() == Some("throughput"))
    {
        return Err(cx.err(
            where_("direction"),
            format!("key 'direction' ({in_series}): only for metric = \"throughput\""),
        ));
    }
    // Types are checked wherever the key comes from.
    for key in option_keys() {
        let Some(v) = merged.get(key) else { continue };
        let text = as_arg(key, v.get_ref())
            .map_err(|e| cx.err(v.span().start, format!("key '{key}' ({in_series}): {e}")))?;
        if own(key) {
            own_args.push((key, text))
        } else {
            pending.push((key, text))
        }
    }
    // Defaults that shape the run are decided first: what applies depends on them.
    const SHAPE: &[&str] = &[
        "metric",
        "direction",
        "completion",
        "req",
        "resp",
        "under_load",
        "transport",
    ];
    pending.sort_by_key(|(k, _)| SHAPE.iter().position(|s| s == k).unwrap_or(SHAPE.len()));
    let argv_with = |applied: &[(&'static str, Option<String>)]| -> Vec<String> {
        let value = |key: &str| {
            own_args
                .iter()
                .chain(applied)
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
        };
        let mut argv: Vec<String> = vec!["rdma-bench".into(), verb.clone()];
        if value("metric").flatten().as_deref() == Some("throughput") {
            argv.push(match value("direction").flatten() {
                Some(d) if !d.is_empty() => format!("--tput={d}"),
                _ => "--tput".to_string(),
            });
        }
        for key in option_keys() {
            let flag = format!("--{}", key.replace('_', "-"));
            match value(key) {
                Some(Some(t)) if expect(key) == Expect::Flag && t.is_empty() => argv.push(flag),
                Some(Some(t)) => argv.push(format!("{flag}={t}")),
                _ => {}
            }
        }
        argv
    };
    let checker = defaults::Checker {
        verb: verb_kind,
        connect: run.run.connect.clone(),
        mpi_clients: match run.launcher {
            Launcher::Mpi { ranks } => Some(ranks - 1),
            Launcher::Direct => None,
        },
    };
    let refuse = |b: defaults::Blame| {
        let key = if b.key == "tput" {
            "direction".to_string()
        } else {
            b.key
        };
        cx.err(
            where_(&key),
            format!("key '{key}' ({in_series}): {}", b.msg),
        )
    };
    // A [defaults] key applies only where the command line would take it;
    // the series' own keys are checked (and refused) as the command line's.
    let mut outcomes = defaults::decide(&checker, &pending, &argv_with).map_err(refuse)?;
    let tput = own_args.iter().chain(&pending).any(|(k, v)| {
        *k == "metric"
            && v.as_deref() == Some("throughput")
            && outcomes
                .iter()
                .all(|(o, r)| *o != "metric" || matches!(r, defaults::Outcome::Applied))
    });
    for (k, r) in &mut outcomes {
        if *k == "direction" && !tput {
            *r = defaults::Outcome::LeftOut("a direction is for metric = \"throughput\"".into());
        }
    }
    let applied: Vec<(&'static str, Option<String>)> = pending
        .iter()
        .filter(|(k, _)| {
            outcomes
                .iter()
                .any(|(o, r)| o == k && matches!(r, defaults::Outcome::Applied))
        })
        .cloned()
        .collect();
    let argv = argv_with(&applied);
    // Parse and validate exactly as the command line would.
    let plan = checker.check(&argv).map_err(refuse)?;
    Ok(Series {
        label,
        plan,
        argv: argv[1..].to_vec(),
        defaults: outcomes
            .into_iter()
            .map(|(k, o)| {
                (
                    k.to_string(),
                    match o {
                        defaults::Outcome::Applied => None,
                        defaults::Outcome::LeftOut(why) => Some(why),
                    },
                )
            })
            .collect(),
        expect: Vec::new(),
    })
}
