//! `rdma-bench report DIR|FILE… -o page.html`: one self-contained HTML page
//! of one or more profiles: what was measured on what, every figure, the
//! headline numbers, the findings with the rules that found them, B/A
//! ratios with their intervals when there are several profiles, and the raw
//! results embedded, so the page is the archive.

mod captions;
mod draw;
mod page;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::analysis::figures::{by_series_of, Figure};
use crate::analysis::findings::{self, Finding, Rules};
use crate::analysis::headlines::{self, Headline};
use crate::analysis::uncertainty::{judge_ratio, RatioJudgement};
use crate::cli::ReportArgs;
use crate::error::{Error, Result};
use crate::output_target::Target;
use crate::results::{Record, ResultsDoc};

/// Results files one page takes, all profiles together.
pub const MAX_FILES: usize = 256;

/// The file a profile's plan is written to, which is not a results file.
pub const PLAN_JSON: &str = "profile-plan.json";

/// One profile: its name on the page and its results files.
pub struct Profile {
    pub label: String,
    pub files: Vec<(String, ResultsDoc)>,
}

impl Profile {
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.files.iter().flat_map(|(_, d)| d.results.iter())
    }
}

/// What the page says about one profile.
pub struct Analysed {
    pub headlines: Vec<Headline>,
    pub findings: Vec<Finding>,
    pub figures: BTreeSet<Figure>,
}

/// B/A of one headline.
pub struct Ratio {
    pub key: String,
    pub label: String,
    pub field: &'static str,
    pub a: f64,
    pub b: f64,
    pub unit: &'static str,
    pub judged: RatioJudgement,
}

pub fn run(args: &ReportArgs) -> Result<()> {
    if !args.label.is_empty() && args.label.len() != args.inputs.len() {
        return Err(Error::usage(format!(
            "--label: given {} times for {} inputs (once per input, or not at all)",
            args.label.len(),
            args.inputs.len()
        )));
    }
    let files = expand(&args.inputs)?;
    let inputs: Vec<&Path> = files.iter().flatten().map(|p| p.as_path()).collect();
    crate::output_target::check(
        &[Target {
            option: "-o",
            path: &args.output,
        }],
        &inputs,
    )?;
    let scripts = draw::scripts_dir(args.scripts.as_deref())?;
    let mut profiles = Vec::new();
    for (i, paths) in files.iter().enumerate() {
        let mut docs = Vec::new();
        for p in paths {
            docs.push((p.display().to_string(), super::compare::load(p)?));
        }
        let label = match args.label.get(i) {
            Some(l) => l.clone(),
            None => default_label(&docs),
        };
        profiles.push(Profile { label, files: docs });
    }
    unique_labels(&mut profiles);
    let differing = differing_conditions(&profiles);
    if let (false, Some(first)) = (args.force, differing.first()) {
        return Err(Error::usage(format!(
            "report: {first}; these measure different things, give --force to report them side by side anyway"
        )));
    }
    let rules = Rules {
        cliff: args.cliff / 100.0,
        spread: args.spread / 100.0,
    };
    // What is analysed and drawn has each point's passes folded into one
    // record (`analysis::passes`); the page embeds the files as they are.
    let folded: Vec<Profile> = profiles
        .iter()
        .map(|p| Profile {
            label: p.label.clone(),
            files: p
                .files
                .iter()
                .map(|(n, d)| (n.clone(), crate::analysis::passes::fold_doc(d)))
                .collect(),
        })
        .collect();
    let analysed: Vec<Analysed> = folded.iter().map(|p| analyse(p, &rules)).collect();
    let ratios: Vec<Vec<Ratio>> = analysed
        .iter()
        .skip(1)
        .map(|b| ratios(&analysed[0], b, args.noise / 100.0))
        .collect();
    let figures: BTreeSet<Figure> = analysed
        .iter()
        .flat_map(|a| a.figures.iter().copied())
        .collect();
    let scratch = draw::Scratch::new()?;
    // Each file with its profile's name, which the figures' legends name
    // that profile's lines by.
    let all_files: Vec<(&str, &ResultsDoc)> = folded
        .iter()
        .flat_map(|p| p.files.iter().map(|(_, d)| (p.label.as_str(), d)))
        .collect();
    let mut drawn = Vec::new();
    for f in figures {
        drawn.push((f, draw::figure_svg(&scripts, &scratch.0, f, &all_files)?));
    }
    let html = page::render(&page::Page {
        profiles: &profiles,
        analysed: &analysed,
        ratios: &ratios,
        figures: &drawn,
        differing: &differing,
        rules: &rules,
        noise: args.noise / 100.0,
    });
    crate::export::write_atomically(&args.output, html.as_bytes())?;
    eprintln!(
        "# wrote {}: {} profile(s), {} figure(s), {} finding(s)",
        args.output.display(),
        profiles.len(),
        drawn.len(),
        analysed.iter().map(|a| a.findings.len()).sum::<usize>()
    );
    Ok(())
}

/// Each input's results files: a file as itself, a directory as every
/// `*.json` in it but a profile's plan, in name order.
fn expand(inputs: &[PathBuf]) -> Result<Vec<Vec<PathBuf>>> {
    let mut out = Vec::new();
    let mut total = 0;
    for input in inputs {
        let files = if input.is_dir() {
            let files = results_files_in(input)
                .map_err(|e| Error::usage(format!("{}: cannot list: {e}", input.display())))?;
            if files.is_empty() {
                return Err(Error::usage(format!(
                    "{}: holds no results files (*.json)",
                    input.display()
                )));
            }
            files
        } else {
            vec![input.clone()]
        };
        total += files.len();
        if total > MAX_FILES {
            return Err(Error::usage(format!(
                "report: more than {MAX_FILES} results files in one page"
            )));
        }
        out.push(files);
    }
    Ok(out)
}

/// The results files of a directory: every `*.json` but a profile's plan,
/// in name order.
pub fn results_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name().is_some_and(|n| n != PLAN_JSON)
        })
        .collect();
    files.sort();
    Ok(files)
}

/// "device @ host, date" of a profile's first file.
fn default_label(docs: &[(String, ResultsDoc)]) -> String {
    match docs.first() {
        Some((_, d)) => format!(
            "{} @ {}, {}",
            d.device.name,
            d.host.hostname,
            d.started_utc.get(..10).unwrap_or(&d.started_utc)
        ),
        None => "(empty)".into(),
    }
}

/// Profiles of one device, host and day get their start time, then a letter.
fn unique_labels(profiles: &mut [Profile]) {
    let clash = |ps: &[Profile], i: usize| ps.iter().filter(|p| p.label == ps[i].label).count() > 1;
    for i in 0..profiles.len() {
        if clash(profiles, i) {
            if let Some((_, d)) = profiles[i].files.first() {
                let t = d.started_utc.get(11..19).unwrap_or("").to_string();
                profiles[i].label.push_str(&format!(" {t}Z"));
            }
        }
    }
    for i in 0..profiles.len() {
        if clash(profiles, i) {
            profiles[i].label = format!("{} ({})", profiles[i].label, super::compare::column(i));
        }
    }
}

/// Every file's run conditions against the first file's, as sentences
/// naming the field and both values.
fn differing_conditions(profiles: &[Profile]) -> Vec<String> {
    let mut files = profiles.iter().flat_map(|p| p.files.iter());
    let Some((first_name, first)) = files.next() else {
        return Vec::new();
    };
    let base = super::compare::conditions(first);
    let mut out = Vec::new();
    for (name, doc) in files {
        for ((field, a), (_, b)) in base.iter().zip(super::compare::conditions(doc)) {
            if *a != b {
                out.push(format!(
                    "{name} differs from {first_name} in {field}: {b} vs {a}"
                ));
            }
        }
    }
    out
}

fn analyse(p: &Profile, rules: &Rules) -> Analysed {
    let series = by_series_of(p.files.iter().map(|(_, d)| d));
    Analysed {
        headlines: headlines::of_profile(&series),
        findings: findings::find(&series, rules),
        figures: series.iter().filter_map(|s| s.figure).collect(),
    }
}

/// B/A for every headline both profiles have.
fn ratios(a: &Analysed, b: &Analysed, noise: f64) -> Vec<Ratio> {
    a.headlines
        .iter()
        .filter_map(|ha| {
            let hb = b.headlines.iter().find(|h| h.key == ha.key)?;
            let mut judged = judge_ratio(
                ha.field,
                (ha.value, ha.interval),
                (hb.value, hb.interval),
                noise,
            )?;
            if judged.interval.is_none() {
                judged.why = ha.why_none.or(hb.why_none);
            }
            Some(Ratio {
                key: ha.key.clone(),
                label: ha.label.clone(),
                field: ha.field,
                a: ha.value,
                b: hb.value,
                unit: ha.unit,
                judged,
            })
        })
        .collect()
}
