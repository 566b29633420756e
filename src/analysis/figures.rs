//! Which figure a series of points belongs to, decided by what the series
//! sweeps: the same rule for a plan (before anything runs) and for records
//! (after), so `profile` prints the figures `report` will draw. A user's own
//! series lands in a figure by what it measures, not by its name.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::results::{Record, ResultsDoc};

/// What one point measures, as far as the figure rule needs to know.
#[derive(Debug, Clone, PartialEq)]
pub struct Knobs {
    pub kind: PointKind,
    /// `inbound`, `outbound` or `echo` (throughput only).
    pub direction: String,
    pub size: u32,
    /// QPs per thread times threads.
    pub qps: u32,
    pub signal_period: u32,
    pub postlist: u32,
    /// `--region`, in bytes, where set.
    pub region: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointKind {
    Latency,
    UnderLoad,
    Throughput,
}

impl Knobs {
    pub fn of(r: &Record) -> Knobs {
        match r {
            Record::Latency(l) => Knobs {
                kind: if l.load.is_some() {
                    PointKind::UnderLoad
                } else {
                    PointKind::Latency
                },
                direction: String::new(),
                size: l.size,
                qps: 1,
                signal_period: 1,
                postlist: 1,
                region: l.memory.region,
            },
            Record::Throughput(t) => Knobs {
                kind: PointKind::Throughput,
                direction: t.direction.clone(),
                size: t.size,
                qps: t.qps.saturating_mul(t.threads),
                signal_period: t.signal_period,
                postlist: t.postlist,
                region: t.memory.region,
            },
        }
    }
}

/// The figures a profile draws. Throughput figures against payload size
/// and QP count are one per direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Figure {
    Latency,
    TputSize(Dir),
    TputQps(Dir),
    Signal,
    Postlist,
    NicCache,
    UnderLoad,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Dir {
    Inbound,
    Outbound,
    Echo,
}

impl Dir {
    fn parse(s: &str) -> Dir {
        match s {
            "outbound" => Dir::Outbound,
            "echo" => Dir::Echo,
            _ => Dir::Inbound,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dir::Inbound => "inbound",
            Dir::Outbound => "outbound",
            Dir::Echo => "echo",
        }
    }
}

/// What draws a figure: one of the plotting scripts, with its arguments.
pub struct Drawing {
    pub script: &'static str,
    pub args: &'static [&'static str],
}

impl Figure {
    /// The figure of a series: under-load latency, latency, the NIC-cache
    /// figure for any point with `--region`, else the throughput knob the
    /// series sweeps (QPs, then S, then postlist), else payload size.
    pub fn of_series(points: &[Knobs]) -> Option<Figure> {
        let first = points.first()?;
        let varies = |f: fn(&Knobs) -> u64| points.iter().map(f).collect::<BTreeSet<_>>().len() > 1;
        Some(match first.kind {
            PointKind::UnderLoad => Figure::UnderLoad,
            PointKind::Latency => Figure::Latency,
            PointKind::Throughput => {
                let dir = Dir::parse(&first.direction);
                if points.iter().any(|k| k.region.is_some()) {
                    Figure::NicCache
                } else if varies(|k| k.qps.into()) {
                    Figure::TputQps(dir)
                } else if varies(|k| k.signal_period.into()) {
                    Figure::Signal
                } else if varies(|k| k.postlist.into()) {
                    Figure::Postlist
                } else {
                    Figure::TputSize(dir)
                }
            }
        })
    }

    /// A stable name, used in file names and the page's anchors.
    pub fn id(self) -> String {
        match self {
            Figure::Latency => "latency".into(),
            Figure::TputSize(d) => format!("{}-size", d.name()),
            Figure::TputQps(d) => format!("{}-qps", d.name()),
            Figure::Signal => "signal-period".into(),
            Figure::Postlist => "postlist".into(),
            Figure::NicCache => "nic-cache".into(),
            Figure::UnderLoad => "latency-under-load".into(),
        }
    }

    pub fn title(self) -> String {
        match self {
            Figure::Latency => "Latency vs payload size".into(),
            Figure::TputSize(d) => format!("{} throughput vs payload size", capital(d.name())),
            Figure::TputQps(d) => format!("{} throughput vs QP count", capital(d.name())),
            Figure::Signal => "Throughput vs signaling period S".into(),
            Figure::Postlist => "Throughput vs postlist (doorbell batching)".into(),
            Figure::NicCache => "NIC cache: remote region size and MRs per QP".into(),
            Figure::UnderLoad => "Latency under load".into(),
        }
    }

    /// The x knob a series of this figure is swept along (for the cliff rule).
    pub fn x(self, k: &Knobs) -> f64 {
        match self {
            Figure::Latency | Figure::TputSize(_) => k.size.into(),
            Figure::TputQps(_) => k.qps.into(),
            Figure::Signal => k.signal_period.into(),
            Figure::Postlist => k.postlist.into(),
            Figure::NicCache => k.region.map(|r| r as f64).unwrap_or(0.0),
            Figure::UnderLoad => 0.0,
        }
    }

    pub fn drawing(self) -> Drawing {
        let (script, args): (&str, &[&str]) = match self {
            Figure::Latency => ("plot_latency.py", &[]),
            Figure::TputSize(_) => ("plot_tput_size.py", &[]),
            Figure::TputQps(_) => ("plot_tput_qps.py", &[]),
            Figure::Signal => ("plot_tput_signal.py", &[]),
            Figure::Postlist => ("plot_tput_postlist.py", &[]),
            Figure::NicCache => ("plot_nic_cache.py", &[]),
            Figure::UnderLoad => ("plot_latency_load.py", &[]),
        };
        Drawing { script, args }
    }
}

pub fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// A series' name in a results file: the experiment's label, else the verb
/// and what the record measured (files written by the measuring commands).
pub fn series_of(r: &Record) -> String {
    match r {
        Record::Latency(l) => l
            .series
            .clone()
            .unwrap_or_else(|| format!("{} {}", l.verb.to_uppercase(), l.metric)),
        Record::Throughput(t) => t
            .series
            .clone()
            .unwrap_or_else(|| format!("{} {}", t.verb.to_uppercase(), t.direction)),
    }
}

/// What a series label is scoped to: the same label names different
/// series in a latency file and in a throughput file of each direction
/// (HERD's "READ" is all three), so a series is its label and its kind.
pub fn kind_of(r: &Record) -> (&'static str, Option<String>) {
    match r {
        Record::Latency(_) => ("latency", None),
        Record::Throughput(t) => ("throughput", Some(t.direction.clone())),
    }
}

/// Records of one experiment grouped by series, in first-seen order, each
/// with its figure.
pub fn by_series<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<SeriesPoints<'a>> {
    scoped(records.into_iter().map(|r| ("", r)))
}

/// The series of several results files: a label names a series within
/// its file's experiment (HERD's Figure 3 files and the signaling-period
/// file each have a "SEND inbound" of their own).
pub fn by_series_of<'a>(docs: impl IntoIterator<Item = &'a ResultsDoc>) -> Vec<SeriesPoints<'a>> {
    scoped(docs.into_iter().flat_map(|d| {
        let scope = d.experiment.as_deref().unwrap_or("");
        d.results.iter().map(move |r| (scope, r))
    }))
}

fn scoped<'a>(records: impl Iterator<Item = (&'a str, &'a Record)>) -> Vec<SeriesPoints<'a>> {
    let mut out: Vec<SeriesPoints<'a>> = Vec::new();
    for (experiment, r) in records {
        let name = series_of(r);
        let (kind, direction) = kind_of(r);
        match out.iter_mut().find(|s| {
            s.series == name
                && s.kind == kind
                && s.direction == direction
                && s.experiment == experiment
        }) {
            Some(s) => s.records.push(r),
            None => out.push(SeriesPoints {
                series: name,
                experiment: experiment.to_string(),
                kind,
                direction,
                figure: None,
                records: vec![r],
            }),
        }
    }
    for s in &mut out {
        let knobs: Vec<Knobs> = s.records.iter().map(|r| Knobs::of(r)).collect();
        s.figure = Figure::of_series(&knobs);
    }
    out
}

pub struct SeriesPoints<'a> {
    pub series: String,
    /// The experiment of the file the series is in ("" where none).
    pub experiment: String,
    /// `latency` or `throughput`, and a throughput series' direction.
    pub kind: &'static str,
    pub direction: Option<String>,
    pub figure: Option<Figure>,
    pub records: Vec<&'a Record>,
}

impl SeriesPoints<'_> {
    /// The series as one key: experiment, kind, direction and label.
    pub fn key(&self) -> String {
        match &self.direction {
            Some(d) => format!("{}|{} {d}|{}", self.experiment, self.kind, self.series),
            None => format!("{}|{}|{}", self.experiment, self.kind, self.series),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tput(size: u32, qps: u32, s: u32, postlist: u32) -> Knobs {
        Knobs {
            kind: PointKind::Throughput,
            direction: "outbound".into(),
            size,
            qps,
            signal_period: s,
            postlist,
            region: None,
        }
    }

    #[test]
    fn a_series_lands_in_the_figure_of_what_it_sweeps() {
        let f = |k: Vec<Knobs>| Figure::of_series(&k);
        assert_eq!(f(vec![]), None);
        assert_eq!(
            f(vec![tput(4, 1, 64, 1), tput(64, 1, 64, 1)]),
            Some(Figure::TputSize(Dir::Outbound))
        );
        assert_eq!(
            f(vec![tput(64, 1, 64, 1), tput(64, 8, 64, 1)]),
            Some(Figure::TputQps(Dir::Outbound))
        );
        assert_eq!(
            f(vec![tput(64, 4, 1, 1), tput(64, 4, 64, 1)]),
            Some(Figure::Signal)
        );
        assert_eq!(
            f(vec![tput(64, 4, 64, 1), tput(64, 4, 64, 16)]),
            Some(Figure::Postlist)
        );
        // One point: throughput at its size.
        assert_eq!(
            f(vec![tput(64, 4, 64, 1)]),
            Some(Figure::TputSize(Dir::Outbound))
        );
        let mut cached = tput(64, 4, 64, 1);
        cached.region = Some(1 << 20);
        assert_eq!(f(vec![cached]), Some(Figure::NicCache));
        let mut lat = tput(8, 1, 1, 1);
        lat.kind = PointKind::Latency;
        assert_eq!(f(vec![lat.clone()]), Some(Figure::Latency));
        lat.kind = PointKind::UnderLoad;
        assert_eq!(f(vec![lat]), Some(Figure::UnderLoad));
    }

    #[test]
    fn figure_ids_are_distinct() {
        let all = [
            Figure::Latency,
            Figure::TputSize(Dir::Inbound),
            Figure::TputSize(Dir::Outbound),
            Figure::TputSize(Dir::Echo),
            Figure::TputQps(Dir::Inbound),
            Figure::TputQps(Dir::Outbound),
            Figure::Signal,
            Figure::Postlist,
            Figure::NicCache,
            Figure::UnderLoad,
        ];
        let ids: BTreeSet<String> = all.iter().map(|f| f.id()).collect();
        assert_eq!(ids.len(), all.len());
    }
}
