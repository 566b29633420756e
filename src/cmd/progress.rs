//! What `run` (and `profile`, which runs its plan through it) says on a
//! stderr that is not a terminal, where there is no progress bar: one plain
//! line as each point starts, with the time its plan says is left.
//!
//! The time left is the sum of the remaining points' estimates, made from
//! the plan alone (each point's window and warm-up, plus the setup estimate
//! the profile budget uses), never from a rate measured while running: the
//! line is written between points, from the point callback, so nothing here
//! runs inside a measured loop.

use std::cell::Cell;
use std::io::Write;

use super::plan::Plan;
use super::profile::budget::{SETUP_PER_QP_S, SETUP_S};
use crate::escape::printable;

/// One point of a plan, as the progress line and `profile --resume` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedPoint {
    /// e.g. "WRITE 64 B, 16 QPs".
    pub what: String,
    /// Setup, warm-up and window; `None` for a point timed by iterations
    /// (or run forever), whose length the plan cannot know.
    pub estimate_s: Option<f64>,
}

/// Setting a point up, estimated as the profile budget does.
fn setup_s(qps: u64) -> f64 {
    SETUP_S + SETUP_PER_QP_S * qps as f64
}

/// The plan's points in the order they run, each with its estimate.
pub fn points(plan: &Plan) -> Vec<PlannedPoint> {
    match plan {
        Plan::Latency(s) => {
            let verb = s.verb.name().to_uppercase();
            let window = s.duration_s.filter(|_| !s.live.forever);
            s.sizes
                .iter()
                .map(|size| PlannedPoint {
                    what: format!("{verb} {size} B latency"),
                    estimate_s: window.map(|w| setup_s(1) + w),
                })
                .collect()
        }
        Plan::Tput(s, _) => {
            let verb = s.verb.name().to_uppercase();
            let timed = s.iters.is_none() && !s.live.forever;
            s.points
                .iter()
                .map(|p| {
                    let qps = u64::from(p.qps) * u64::from(p.threads);
                    let mut what = format!("{verb} {size} B", size = p.size);
                    if p.transport.name() != "rc" {
                        what = format!("{} {what}", p.transport.name().to_uppercase());
                    }
                    what.push_str(&format!(", {qps} QP{}", if qps == 1 { "" } else { "s" }));
                    if p.signal_period > 1 {
                        what.push_str(&format!(", S={}", p.signal_period));
                    }
                    if p.postlist > 1 {
                        what.push_str(&format!(", postlist {}", p.postlist));
                    }
                    PlannedPoint {
                        what,
                        estimate_s: timed.then(|| setup_s(qps) + s.warmup_s + s.duration_s),
                    }
                })
                .collect()
        }
        Plan::UnderLoad(u) => {
            let verb = u.probe.verb.name().to_uppercase();
            let size = u.probe.sizes.first().copied().unwrap_or(0);
            // One QP per point, as the budget counts it.
            let probe = u.probe.duration_s.map(|w| setup_s(1) + w);
            // A fractional load first measures the background's saturated
            // rate, a point of its own before the first load, unless a
            // `max` load is planned (that measurement is then reused).
            let saturation = u.saturation_point_apart();
            u.loads
                .iter()
                .enumerate()
                .map(|(i, load)| PlannedPoint {
                    what: format!("{verb} {size} B latency under load {}", load.label()),
                    estimate_s: probe.map(|p| if i == 0 && saturation { 2.0 * p } else { p }),
                })
                .collect()
        }
    }
}

/// What the remaining estimates add up to: "about 1m40s left", or, when
/// some points are timed by iterations, the least it can be.
pub fn time_left(estimates: impl IntoIterator<Item = Option<f64>>) -> String {
    let (mut known, mut unknown) = (0.0, 0usize);
    for e in estimates {
        match e {
            Some(s) => known += s,
            None => unknown += 1,
        }
    }
    match unknown {
        0 => format!("about {} left", duration(known)),
        n if known > 0.0 => format!(
            "at least {} left ({n} point{} timed by iterations)",
            duration(known),
            if n == 1 { "" } else { "s" }
        ),
        _ => "time left unknown (points timed by iterations)".into(),
    }
}

/// Whole seconds, as a person reads a time left: "45s", "1m40s", "1h05m".
pub fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// One progress line: "profile: [12/56] Figure / series: WRITE 64 B, 16 QPs · about 1m40s left".
pub fn line(
    command: &str,
    (index, total): (usize, usize),
    figure: Option<&str>,
    series: &str,
    point: &PlannedPoint,
    left: &str,
) -> String {
    let series = printable(series);
    let whose = match figure {
        Some(f) => format!("{f} / {series}"),
        None => series.to_string(),
    };
    format!(
        "{command}: [{index}/{total}] {whose}: {} · {left}",
        point.what
    )
}

/// The run's points still to measure, and which one starts next.
pub struct Progress<'a> {
    command: &'a str,
    /// (series, its figure, point), in run order.
    points: Vec<(String, Option<String>, PlannedPoint)>,
    /// Points of the experiment already measured (`--resume`), counted in
    /// the line's position.
    done: usize,
    next: Cell<usize>,
    enabled: bool,
}

impl<'a> Progress<'a> {
    /// `enabled`: stderr is not a terminal (where the bar shows progress)
    /// and `--quiet` was not given.
    pub fn new(
        command: &'a str,
        series: &[(String, Option<String>, &Plan)],
        done: usize,
        enabled: bool,
    ) -> Self {
        let points = series
            .iter()
            .flat_map(|(label, figure, plan)| {
                points(plan)
                    .into_iter()
                    .map(move |p| (label.clone(), figure.clone(), p))
            })
            .collect();
        Progress {
            command,
            points,
            done,
            next: Cell::new(0),
            enabled,
        }
    }

    /// The line of the point about to start, and what is left from it on.
    pub fn current(&self) -> Option<String> {
        let i = self.next.get();
        let (series, figure, point) = self.points.get(i)?;
        let left = time_left(self.points[i..].iter().map(|(_, _, p)| p.estimate_s));
        Some(line(
            self.command,
            (self.done + i + 1, self.done + self.points.len()),
            figure.as_deref(),
            series,
            point,
            &left,
        ))
    }

    /// A series is about to measure its first point.
    pub fn series_starts(&self) {
        self.show();
    }

    /// A point was measured and kept: the next one, if it is in the same
    /// series, starts now (a new series says so first, then starts).
    pub fn point_done(&self) {
        let i = self.next.get();
        self.next.set(i + 1);
        let same = match (self.points.get(i), self.points.get(i + 1)) {
            (Some(a), Some(b)) => a.0 == b.0,
            _ => false,
        };
        if same {
            self.show();
        }
    }

    fn show(&self) {
        if !self.enabled {
            return;
        }
        if let Some(l) = self.current() {
            // Best effort, as the run's closing line: stderr may be closed.
            let _ = writeln!(std::io::stderr().lock(), "{l}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(what: &str, s: Option<f64>) -> PlannedPoint {
        PlannedPoint {
            what: what.into(),
            estimate_s: s,
        }
    }

    #[test]
    fn durations_read_as_a_person_would() {
        assert_eq!(duration(0.4), "0s");
        assert_eq!(duration(45.2), "45s");
        assert_eq!(duration(100.0), "1m40s");
        assert_eq!(duration(3725.0), "1h02m");
        assert_eq!(duration(-3.0), "0s");
    }

    #[test]
    fn time_left_says_when_it_is_a_floor() {
        assert_eq!(time_left([Some(60.0), Some(40.0)]), "about 1m40s left");
        assert_eq!(
            time_left([Some(60.0), None]),
            "at least 1m00s left (1 point timed by iterations)"
        );
        assert_eq!(
            time_left([None, None]),
            "time left unknown (points timed by iterations)"
        );
    }

    #[test]
    fn the_line_names_figure_point_position_and_time_left() {
        let p = point("WRITE 64 B, 16 QPs", Some(5.0));
        assert_eq!(
            line(
                "profile",
                (12, 56),
                Some("Outbound throughput vs QP count"),
                "WRITE out [pass 1/3]",
                &p,
                "about 1m40s left"
            ),
            "profile: [12/56] Outbound throughput vs QP count / WRITE out [pass 1/3]: WRITE 64 B, 16 QPs · about 1m40s left"
        );
        assert_eq!(
            line("run", (1, 2), None, "lat", &p, "about 5s left"),
            "run: [1/2] lat: WRITE 64 B, 16 QPs · about 5s left"
        );
    }

    #[test]
    fn each_line_counts_on_and_its_time_left_falls() {
        let p = Progress {
            command: "profile",
            points: vec![
                ("a".into(), Some("Fig".into()), point("x", Some(30.0))),
                ("a".into(), Some("Fig".into()), point("y", Some(30.0))),
                ("b".into(), None, point("z", Some(40.0))),
            ],
            done: 2,
            next: Cell::new(0),
            enabled: false,
        };
        let mut lines = Vec::new();
        for _ in 0..3 {
            lines.push(p.current().unwrap());
            p.point_done();
        }
        assert_eq!(p.current(), None);
        assert_eq!(
            lines,
            [
                "profile: [3/5] Fig / a: x · about 1m40s left",
                "profile: [4/5] Fig / a: y · about 1m10s left",
                "profile: [5/5] b: z · about 40s left",
            ]
        );
    }
}
