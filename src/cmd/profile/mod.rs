//! `rdma-bench profile`: one command that measures a NIC (or a pair of
//! hosts) through a curated set of series (`bench-configs/profile.toml`, or
//! the user's copy), each point's window sized so the whole fits a time
//! budget. The plan is printed and written (`profile-plan.toml` is the
//! experiment file that runs, `profile-plan.json` the figures, points and
//! time each), then run as `rdma-bench run` runs it, so `--resume` keeps
//! every finished point and measures only the rest.

pub mod budget;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use super::experiment::{self, Experiment, RunContext};
use super::plan::Plan;
use super::report::PLAN_JSON;
use crate::analysis::figures::{Figure, Knobs, PointKind};
use crate::cli::{ProfileArgs, RunArgs};
use crate::error::{Error, Result};
use crate::output::print_line;

use budget::{SeriesShape, SeriesWindow};

/// The built-in set.
pub const DEFAULT_SET: &str = include_str!("../../../bench-configs/profile.toml");
pub const DEFAULT_BUDGET: &str = "10m";
/// Passes of each point when the set does not say (`passes = K`).
pub const DEFAULT_PASSES: u32 = 3;
pub const PLAN_TOML: &str = "profile-plan.toml";

pub fn run(args: &ProfileArgs) -> Result<()> {
    let context = RunContext {
        connect: args.connect.clone(),
    };
    let plan_toml = args.out.join(PLAN_TOML);
    let plan_text = if args.resume {
        if args.budget.is_some() || args.set.is_some() {
            return Err(Error::usage(format!(
                "--resume: runs the plan already in {} as it was written; leave out --budget and --set",
                plan_toml.display()
            )));
        }
        crate::input::read_text(&plan_toml, crate::input::MAX_EXPERIMENT_BYTES)
            .map_err(|e| Error::usage(format!("--resume: {e}")))?
    } else {
        let budget_text = args.budget.as_deref().unwrap_or(DEFAULT_BUDGET);
        let budget_s = budget::parse_duration(budget_text)
            .map_err(|e| Error::usage(format!("--budget {e}")))?;
        let (set_name, set_text) = match &args.set {
            Some(p) => (
                p.display().to_string(),
                crate::input::read_text(p, crate::input::MAX_EXPERIMENT_BYTES)?,
            ),
            None => (
                "bench-configs/profile.toml (built in)".to_string(),
                DEFAULT_SET.to_string(),
            ),
        };
        let set = experiment::parse_in(&set_name, &set_text, &context)?;
        let asked = set.passes.unwrap_or(DEFAULT_PASSES);
        // A budget too short for every pass the set asks for measures each
        // point fewer times (at least once) and says so; one too short for
        // a single pass is refused with what it would need.
        let fits = |passes: u32| -> Result<std::result::Result<_, f64>> {
            let shapes = shapes(&set, passes)?;
            Ok(budget::split(budget_s, &shapes).map(|w| (shapes, w)))
        };
        let mut fitted = None;
        let mut need_all = None;
        for passes in (1..=asked).rev() {
            match fits(passes)? {
                Ok((shapes, windows)) => {
                    fitted = Some((passes, shapes, windows));
                    break;
                }
                Err(need) => {
                    need_all.get_or_insert(need);
                }
            }
        }
        let Some((passes, shapes, windows)) = fitted else {
            let need = fits(1)?.err().unwrap_or_default();
            return Err(Error::usage(format!(
                "--budget {budget_text}: too short for {set_name}'s {} points × 1 pass, which need at least {} ({} s per pass at the least, plus about {} s to set each up)",
                set.points(),
                minutes(need.ceil()),
                budget::MIN_WINDOW_S,
                budget::SETUP_S
            )));
        };
        if let (true, Some(need)) = (passes < asked, need_all) {
            print_line(&format!(
                "# --budget {budget_text} fits {passes} of the {asked} passes {set_name} asks for: each point is measured {passes} time{}, so its interval sees less of what drifts over the run ({} gives every pass)",
                if passes == 1 { "" } else { "s" },
                minutes(need.ceil())
            ))?;
        }
        let text = planned_set(&set_name, &set_text, &set, &windows, budget_text, passes)?;
        // The written plan is checked as the run will read it.
        experiment::parse_in(&plan_toml.display().to_string(), &text, &context)?;
        crate::output_target::check_out_dir("--out", &args.out)?;
        if existing_results(&args.out)?.is_some() {
            return Err(Error::usage(format!(
                "--out {}: already holds a profile's results; give --resume to finish it, or another --out",
                args.out.display()
            )));
        }
        std::fs::create_dir_all(&args.out)
            .map_err(|e| Error::usage(format!("--out {}: {e}", args.out.display())))?;
        let summary = plan_json(budget_s, &set_name, &shapes, &windows, passes);
        crate::export::write_atomically(&plan_toml, text.as_bytes())?;
        let mut bytes = serde_json::to_vec_pretty(&summary).expect("plans serialise");
        bytes.push(b'\n');
        crate::export::write_atomically(&args.out.join(PLAN_JSON), &bytes)?;
        print_plan(&shapes, &windows, budget_s, passes)?;
        text
    };
    let planned = experiment::parse_in(&plan_toml.display().to_string(), &plan_text, &context)?;
    let figure_of = figure_names(&planned)?;
    if args.resume && !args.quiet {
        print_remaining(
            &planned,
            &figure_of,
            existing_results(&args.out)?.as_deref(),
        )?;
    }
    if args.dry_run {
        return Ok(());
    }
    let run = RunArgs {
        config: plan_toml.clone(),
        connect: args.connect.clone(),
        device: args.device.clone(),
        out: args.out.clone(),
        quiet: args.quiet,
        resume: if args.resume {
            existing_results(&args.out)?
        } else {
            None
        },
        expect: Vec::new(),
    };
    let started = Instant::now();
    let result = super::run::run_with(&run, "profile", &|series| {
        figure_of
            .iter()
            .find(|(s, _)| s == series)
            .map(|(_, f)| f.clone())
    });
    if !args.quiet {
        let _ = print_line(&format!(
            "# profile: {:.0} s in this run; `rdma-bench report {}` draws it",
            started.elapsed().as_secs_f64(),
            args.out.display()
        ));
    }
    result
}

fn minutes(s: f64) -> String {
    if s >= 60.0 {
        format!("{}m{:02}s", (s / 60.0).floor(), s % 60.0)
    } else {
        format!("{s} s")
    }
}

/// What the budget needs to know of each series, each point measured
/// `passes` times.
fn shapes(set: &Experiment, passes: u32) -> Result<Vec<SeriesShape>> {
    set.series
        .iter()
        .map(|s| {
            let knobs = knobs(&s.plan);
            let figure = Figure::of_series(&knobs)
                .ok_or_else(|| Error::usage(format!("series '{}' measures no point", s.label)))?;
            let extra = matches!(&s.plan, Plan::UnderLoad(u) if u.saturation_point_apart());
            Ok(SeriesShape {
                label: s.label.clone(),
                figure,
                points: s.plan.points() + usize::from(extra),
                passes: passes as usize,
                throughput: matches!(s.plan, Plan::Tput(..)),
                intervals: !matches!(s.plan, Plan::UnderLoad(_)),
                qps: knobs.iter().map(|k| u64::from(k.qps)).sum(),
            })
        })
        .collect()
}

/// The figure rule's view of a plan's points (as `Knobs::of` sees records).
fn knobs(plan: &Plan) -> Vec<Knobs> {
    let base = |kind, size| Knobs {
        kind,
        direction: String::new(),
        size,
        qps: 1,
        signal_period: 1,
        postlist: 1,
        region: None,
    };
    match plan {
        Plan::Latency(s) => s
            .sizes
            .iter()
            .map(|&size| Knobs {
                region: s.memory.region,
                ..base(PointKind::Latency, size)
            })
            .collect(),
        Plan::UnderLoad(u) => u
            .loads
            .iter()
            .map(|_| base(PointKind::UnderLoad, u.probe.sizes[0]))
            .collect(),
        Plan::Tput(s, _) => s
            .points
            .iter()
            .map(|p| Knobs {
                kind: PointKind::Throughput,
                direction: s.direction.name().into(),
                size: p.size,
                qps: p.qps.saturating_mul(p.threads),
                signal_period: p.signal_period,
                postlist: p.postlist,
                region: s.memory.region,
            })
            .collect(),
    }
}

fn figure_names(set: &Experiment) -> Result<Vec<(String, String)>> {
    Ok(set
        .series
        .iter()
        .zip(shapes(set, 1)?)
        .map(|(s, shape)| (s.label.clone(), shape.figure.title()))
        .collect())
}

/// The set with each series' window keys replaced by the budget's, and
/// each series listed once per pass as `LABEL [pass i/K]`: every series'
/// pass 1, then every pass 2, and so on, so the passes of one point are
/// spread over the run (`analysis::passes` folds them back).
fn planned_set(
    set_name: &str,
    text: &str,
    set: &Experiment,
    windows: &[SeriesWindow],
    budget: &str,
    passes: u32,
) -> Result<String> {
    let mut doc: toml::Table =
        toml::from_str(text).map_err(|e| Error::usage(format!("{set_name}: {}", e.message())))?;
    // The plan lists the passes itself; `run` would not repeat them.
    doc.remove("passes");
    if let Some(toml::Value::Table(d)) = doc.get_mut("defaults") {
        d.remove("iters");
    }
    let Some(toml::Value::Array(series)) = doc.get_mut("series") else {
        return Err(Error::usage(format!("{set_name}: no [[series]]")));
    };
    for ((entry, s), w) in series.iter_mut().zip(&set.series).zip(windows) {
        let toml::Value::Table(t) = entry else {
            continue;
        };
        t.remove("iters");
        t.insert("duration".into(), round3(w.window_s).into());
        if let Some(warm) = w.warmup_s {
            t.insert("warmup_time".into(), round3(warm).into());
        }
        if let Some(iv) = w.interval_s {
            t.insert("interval".into(), round3(iv).into());
        }
        debug_assert_eq!(
            t.get("label").and_then(|l| l.as_str()),
            Some(s.label.as_str())
        );
    }
    let once = std::mem::take(series);
    for i in 1..=passes {
        for (entry, s) in once.iter().zip(&set.series) {
            let mut entry = entry.clone();
            if let toml::Value::Table(t) = &mut entry {
                t.insert(
                    "label".into(),
                    crate::analysis::passes::label(&s.label, i, passes).into(),
                );
            }
            series.push(entry);
        }
    }
    let body = toml::to_string(&doc).expect("TOML tables serialise");
    Ok(format!(
        "# The plan `rdma-bench profile --budget {budget}` wrote from {set_name}: each\n# series' duration, warmup_time and interval are the budget's, and each series\n# is listed once per pass ({passes} passes, interleaved). `profile --resume`\n# runs this file again; `rdma-bench run` runs it as it is.\n{body}"
    ))
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn plan_json(
    budget_s: f64,
    set: &str,
    shapes: &[SeriesShape],
    windows: &[SeriesWindow],
    passes: u32,
) -> serde_json::Value {
    let mut figures: Vec<serde_json::Value> = Vec::new();
    for (s, w) in shapes.iter().zip(windows) {
        let id = s.figure.id();
        // window_s is one pass's; estimate_s every pass's.
        let entry = json!({"label": s.label, "points": s.points, "passes": passes,
            "pass_labels": (1..=passes).map(|i| crate::analysis::passes::label(&s.label, i, passes)).collect::<Vec<_>>(),
            "window_s": round3(w.window_s),
            "warmup_s": w.warmup_s.map(round3), "interval_s": w.interval_s.map(round3),
            "estimate_s": round3(w.estimate_s)});
        match figures.iter_mut().find(|f| f["figure"] == id.as_str()) {
            Some(f) => f["series"]
                .as_array_mut()
                .expect("series is a list")
                .push(entry),
            None => {
                figures.push(json!({"figure": id, "title": s.figure.title(), "series": [entry]}))
            }
        }
    }
    let estimate: f64 = windows.iter().map(|w| w.estimate_s).sum();
    json!({
        // Not a results file: what `profile` planned (tools that walk
        // results/ tell the two apart by this).
        "tool": "rdma-bench profile",
        "budget_s": budget_s,
        "set": set,
        "passes": passes,
        "estimate_s": round3(estimate),
        "setup_estimate_s_per_point": budget::SETUP_S,
        "setup_estimate_s_per_qp": budget::SETUP_PER_QP_S,
        "figures": figures,
    })
}

fn print_plan(
    shapes: &[SeriesShape],
    windows: &[SeriesWindow],
    budget_s: f64,
    passes: u32,
) -> Result<()> {
    print_line(&format!(
        "# profile plan: {} series, {} points, {passes} pass{} of each (interleaved), budget {} s, split evenly over the figures",
        shapes.len(),
        shapes.iter().map(|s| s.points).sum::<usize>(),
        if passes == 1 { "" } else { "es" },
        budget_s
    ))?;
    print_line(&format!(
        "# {:<44} {:<28} {:>6} {:>9} {:>9}",
        "figure", "series", "points", "window", "est."
    ))?;
    for (s, w) in shapes.iter().zip(windows) {
        print_line(&format!(
            "# {:<44} {:<28} {:>6} {:>8.3}s {:>8.1}s",
            s.figure.title(),
            crate::escape::printable(&s.label),
            s.points,
            w.window_s,
            w.estimate_s
        ))?;
    }
    Ok(())
}

/// `--resume`: what of the written plan is left, series by series, and
/// its estimated time (as the progress lines count it), before anything runs.
fn print_remaining(
    planned: &Experiment,
    figure_of: &[(String, String)],
    results: Option<&Path>,
) -> Result<()> {
    let done = match results {
        Some(path) => {
            super::compare::load(path)
                .map_err(|e| Error::usage(format!("--resume: {e}")))?
                .results
        }
        None => Vec::new(),
    };
    let mut rows = Vec::new();
    let (mut total, mut left) = (0, Vec::new());
    for (s, rest) in planned.series.iter().zip(planned.remaining(&done)) {
        let all = s.plan.points();
        let rest = super::progress::points(&rest);
        total += all;
        if !rest.is_empty() {
            let figure = figure_of
                .iter()
                .find(|(l, _)| *l == s.label)
                .map_or("", |(_, f)| f.as_str());
            rows.push(format!(
                "# {:<44} {:<28} {:>9} {:>12}",
                figure,
                crate::escape::printable(&s.label),
                format!("{}/{all}", rest.len()),
                super::progress::time_left(rest.iter().map(|p| p.estimate_s))
                    .trim_start_matches("about ")
                    .trim_end_matches(" left")
            ));
        }
        left.extend(rest);
    }
    print_line(&format!(
        "# profile --resume: {} of {total} points left, {}",
        left.len(),
        super::progress::time_left(left.iter().map(|p| p.estimate_s))
    ))?;
    if !rows.is_empty() {
        print_line(&format!(
            "# {:<44} {:<28} {:>9} {:>12}",
            "figure", "series", "left", "est."
        ))?;
    }
    rows.iter().try_for_each(|r| print_line(r))
}

/// The results file a profile directory already holds, if any.
fn existing_results(dir: &Path) -> Result<Option<PathBuf>> {
    let Ok(mut found) = super::report::results_files_in(dir) else {
        return Ok(None);
    };
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        n => Err(Error::usage(format!(
            "--out {}: holds {n} results files; a profile directory holds one",
            dir.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The progress lines' time left is the plan's own estimate: over the
    /// built-in set, their per-point estimates add up to what the budget
    /// planned (within the plan file's rounding of windows to 1 ms),
    /// latency under load included (its `50%` load reuses the `max`
    /// point's saturated rate, which neither side counts twice).
    #[test]
    fn progress_estimates_add_up_to_the_plans() {
        let ctx = RunContext { connect: None };
        let set = experiment::parse_in("set", DEFAULT_SET, &ctx).unwrap();
        assert!(
            set.series
                .iter()
                .any(|s| matches!(&s.plan, Plan::UnderLoad(u) if u.needs_saturation())),
            "the built-in set has a series whose loads need the saturated rate"
        );
        let shapes = shapes(&set, DEFAULT_PASSES).unwrap();
        let windows = budget::split(600.0, &shapes).unwrap();
        let text = planned_set("set", DEFAULT_SET, &set, &windows, "10m", DEFAULT_PASSES).unwrap();
        let plan = experiment::parse_in("plan", &text, &ctx).unwrap();
        let sum: f64 = plan
            .series
            .iter()
            .flat_map(|s| super::super::progress::points(&s.plan))
            .map(|p| p.estimate_s.unwrap())
            .sum();
        let planned: f64 = windows.iter().map(|w| w.estimate_s).sum();
        assert!((sum - planned).abs() < 0.01 * planned, "{sum} vs {planned}");
    }

    /// A fractional load without `max` costs one unrecorded point of its
    /// own for the saturated rate; with `max` planned, none.
    #[test]
    fn under_load_counts_its_saturation_point_once() {
        let ctx = RunContext { connect: None };
        let with = |loads: &str| {
            let text = format!(
                "name = \"u\"\n[[series]]\nlabel = \"u\"\nverb = \"write\"\n\
                 size = 64\nduration = 0.5\nunder_load = {loads}\n"
            );
            let set = experiment::parse_in("set", &text, &ctx).unwrap_or_else(|e| panic!("{e}"));
            shapes(&set, 1).unwrap()[0].points
        };
        assert_eq!(with(r#"["50%", "max"]"#), 2);
        assert_eq!(with(r#"["10%", "50%"]"#), 3);
        assert_eq!(with(r#"["max"]"#), 1);
    }
}
