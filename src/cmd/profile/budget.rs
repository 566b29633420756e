//! How a time budget becomes each point's window: split evenly over the
//! figures, then over each figure's points, after what setting a point up
//! is expected to cost. Pure arithmetic, apart from the set it is given.

use crate::analysis::figures::Figure;

/// What setting up one point costs before its window opens, estimated:
/// the handshake and a QP pair's creation and connection, per QP. A
/// point's real cost is in its record's elapsed and warm-up times; the
/// profile prints its estimate and, at the end, the time it took.
pub const SETUP_S: f64 = 0.5;
pub const SETUP_PER_QP_S: f64 = 0.004;

/// The shortest window a profile gives a point, and the warm-up of a
/// throughput point as a share of its window.
pub const MIN_WINDOW_S: f64 = 0.2;
pub const WARMUP_SHARE: f64 = 0.2;

/// A throughput point's `--interval`s: at least this many per window
/// (what its interval estimate is made from), none under `MIN_INTERVAL_S`.
pub const INTERVALS_PER_WINDOW: f64 = 8.0;

/// One series of the set as the budget sees it.
#[derive(Debug, Clone)]
pub struct SeriesShape {
    pub label: String,
    pub figure: Figure,
    /// Measured points; an under-load series whose loads need the
    /// background's saturated rate and do not include `max` measures it
    /// once more (counted as a point here).
    pub points: usize,
    /// How many times each point is measured (`passes`): every pass is set
    /// up and measured on its own, so the budget counts points × passes.
    pub passes: usize,
    pub throughput: bool,
    /// Whether its points take `--interval` (all but under-load probes).
    pub intervals: bool,
    /// QPs per point, summed over the series' points.
    pub qps: u64,
}

impl SeriesShape {
    /// Points measured, every pass counted.
    pub fn measured(&self) -> usize {
        self.points * self.passes
    }
}

/// What the budget gives one series.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesWindow {
    /// One pass's window.
    pub window_s: f64,
    /// Throughput: the warm-up before the window.
    pub warmup_s: Option<f64>,
    /// The `--interval`s the window is cut into (what a point's interval
    /// estimate is made from).
    pub interval_s: Option<f64>,
    /// Every pass of every point, setup included.
    pub estimate_s: f64,
}

/// "3m", "90s", "1h30m", "2.5m" or plain seconds.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty; give e.g. 3m, 90s or 1h".into());
    }
    let mut total = 0.0;
    let mut num = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1.0,
            'm' => 60.0,
            'h' => 3600.0,
            _ => return Err(format!("'{t}': unknown unit '{c}' (s, m or h)")),
        };
        let v: f64 = num
            .parse()
            .map_err(|_| format!("'{t}': a number must come before '{c}'"))?;
        total += v * unit;
        num.clear();
    }
    if !num.is_empty() {
        total += num
            .parse::<f64>()
            .map_err(|_| format!("'{t}': not a duration"))?;
    }
    if !(total.is_finite() && total > 0.0 && total <= 7.0 * 86_400.0) {
        return Err(format!("'{t}': between 1 s and 7 days"));
    }
    Ok(total)
}

fn setup_s(s: &SeriesShape) -> f64 {
    (SETUP_S * s.points as f64 + SETUP_PER_QP_S * s.qps as f64) * s.passes as f64
}

/// The time a point's window stands for, warm-up included. A latency
/// point's warm-up (its first 1000 iterations, and never more than a fifth
/// of its window) is a few milliseconds on a NIC and counted as nothing;
/// on a link with millisecond round trips it takes the whole fifth.
fn per_window(s: &SeriesShape) -> f64 {
    if s.throughput {
        1.0 + WARMUP_SHARE
    } else {
        1.0
    }
}

/// Each series' window (in the set's order), or, where the budget cannot
/// give every pass of every point `MIN_WINDOW_S`, the budget the set needs.
/// A pass's window is what the point's would be with one pass, split K
/// ways after the K setups are paid.
pub fn split(budget_s: f64, set: &[SeriesShape]) -> Result<Vec<SeriesWindow>, f64> {
    let mut figures: Vec<Figure> = Vec::new();
    for s in set {
        if !figures.contains(&s.figure) {
            figures.push(s.figure);
        }
    }
    let share = budget_s / figures.len().max(1) as f64;
    let mut window_of = Vec::new();
    let mut need: f64 = 0.0;
    for f in &figures {
        let mine: Vec<&SeriesShape> = set.iter().filter(|s| s.figure == *f).collect();
        let setup: f64 = mine.iter().map(|s| setup_s(s)).sum();
        let windows: f64 = mine
            .iter()
            .map(|s| s.measured() as f64 * per_window(s))
            .sum();
        need = need.max(setup + windows * MIN_WINDOW_S);
        window_of.push((*f, (share - setup) / windows.max(1.0)));
    }
    let need_total = need * figures.len() as f64;
    if window_of.iter().any(|(_, w)| *w < MIN_WINDOW_S) {
        return Err(need_total);
    }
    Ok(set
        .iter()
        .map(|s| {
            let w = window_of
                .iter()
                .find(|(f, _)| *f == s.figure)
                .map(|(_, w)| *w)
                .expect("every series' figure has a window");
            let iv = (w / INTERVALS_PER_WINDOW).max(crate::spec::MIN_INTERVAL_S);
            let warmup_s = s.throughput.then_some(w * WARMUP_SHARE);
            // An under-load point's probe takes no --interval.
            let interval_s = s.intervals.then_some(iv);
            SeriesWindow {
                window_s: w,
                warmup_s,
                interval_s,
                estimate_s: setup_s(s) + s.measured() as f64 * w * per_window(s),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::figures::Dir;

    fn shape(figure: Figure, points: usize, throughput: bool) -> SeriesShape {
        SeriesShape {
            label: "s".into(),
            figure,
            points,
            passes: 1,
            throughput,
            intervals: true,
            qps: points as u64 * 4,
        }
    }

    #[test]
    fn durations_parse_with_units_and_refuse_junk() {
        assert_eq!(parse_duration("3m"), Ok(180.0));
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("90"), Ok(90.0));
        assert_eq!(parse_duration("2.5m"), Ok(150.0));
        for bad in ["", "3x", "m", "0", "-1m", "8d", "1e400"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_budget_is_split_over_figures_and_adds_up() {
        let set = [
            shape(Figure::Latency, 10, false),
            shape(Figure::Latency, 6, false),
            shape(Figure::TputSize(Dir::Inbound), 3, true),
        ];
        let w = split(180.0, &set).unwrap();
        // Two figures: 90 s each, whatever their point counts.
        let lat: f64 = w[0].estimate_s + w[1].estimate_s;
        assert!((lat - 90.0).abs() < 1e-9, "{lat}");
        assert!((w[2].estimate_s - 90.0).abs() < 1e-9);
        assert_eq!(w[0].window_s, w[1].window_s);
        assert!(w[2].window_s > w[0].window_s);
        assert!(w[2].interval_s.unwrap() * INTERVALS_PER_WINDOW <= w[2].window_s + 1e-9);
        assert!(w[0].warmup_s.is_none() && w[2].warmup_s.is_some());
    }

    #[test]
    fn a_budget_too_short_says_what_the_set_needs() {
        let set = [
            shape(Figure::Latency, 100, false),
            shape(Figure::Signal, 2, true),
        ];
        let need = split(10.0, &set).unwrap_err();
        // 100 latency points: 100 * (0.5 + 0.2) + 400 QPs * 0.004, twice (two figures).
        assert!((need - 2.0 * (70.0 + 1.6)).abs() < 1e-9, "{need}");
        assert!(split(need + 1.0, &set).is_ok());
    }

    #[test]
    fn passes_split_a_points_window_and_pay_their_setups() {
        let one = [shape(Figure::Latency, 4, false)];
        let mut three = one.clone();
        three[0].passes = 3;
        let w1 = split(60.0, &one).unwrap()[0].clone();
        let w3 = split(60.0, &three).unwrap()[0].clone();
        // 4 points: 60 - 4 * (0.5 + 0.016) over 4 windows, then 3 times the
        // setups over 12.
        assert!((w1.window_s - (60.0 - 4.0 * 0.516) / 4.0).abs() < 1e-9);
        assert!((w3.window_s - (60.0 - 12.0 * 0.516) / 12.0).abs() < 1e-9);
        assert!((w3.estimate_s - 60.0).abs() < 1e-9);
        // The shortest budget grows with the passes, and says so.
        let need = split(1.0, &three).unwrap_err();
        assert!(
            (need - 12.0 * (0.516 + MIN_WINDOW_S)).abs() < 1e-9,
            "{need}"
        );
    }
}
