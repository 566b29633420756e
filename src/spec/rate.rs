//! Offered load: a throughput point's rate limit (`--rate`, `--rate-per-qp`,
//! `--burst`) and the loads of a latency-under-load run (`--under-load`).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The highest rate `--rate` accepts (Mops): far above any NIC, so only
/// typos are refused.
pub const MAX_RATE_MOPS: f64 = 100_000.0;
/// Most loads one `--under-load` list may hold.
pub const MAX_LOADS: usize = 64;

/// A token-bucket limit on the WRs an issuing side posts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    /// Offered million WRs per second: of the whole issuing process
    /// (split evenly over its QPs), or of every QP with `per_qp`.
    pub mops: f64,
    pub per_qp: bool,
    /// WRs added per token refill (`--burst`); `None`: one postlist.
    pub burst: Option<u32>,
}

impl RateLimit {
    /// Host-side checks of the limit alone, as `--rate`.
    pub fn validate(&self) -> Result<()> {
        self.validate_as(&format!("--rate {}", self.mops))
    }

    /// `validate`, naming the rate as `who` (the `--rate` or the
    /// `--under-load` load the user gave).
    pub fn validate_as(&self, who: &str) -> Result<()> {
        if !self.mops.is_finite() || self.mops <= 0.0 {
            return Err(Error::usage(format!("{who}: expected a rate above 0 Mops")));
        }
        if self.mops > MAX_RATE_MOPS {
            return Err(Error::usage(format!(
                "{who}: above the limit of {MAX_RATE_MOPS} Mops"
            )));
        }
        if self.burst == Some(0) {
            return Err(Error::usage("--burst 0: a refill adds at least 1 WR"));
        }
        Ok(())
    }

    /// WRs per refill at a point posting `postlist` WRs per doorbell.
    pub fn burst_for(&self, postlist: u32) -> u32 {
        self.burst.unwrap_or(postlist)
    }

    /// WRs per second each of `total_qps` QPs is offered.
    pub fn per_qp_ops(&self, total_qps: u32) -> f64 {
        let all = self.mops * 1e6;
        if self.per_qp {
            all
        } else {
            all / f64::from(total_qps.max(1))
        }
    }

    /// Mops the issuing process is offered in all, over `total_qps` QPs.
    pub fn offered_mops(&self, total_qps: u32) -> f64 {
        self.per_qp_ops(total_qps) * f64::from(total_qps) / 1e6
    }

    /// Checks the limit against one point: a refill fits in a QP's
    /// window, and each QP gets at least one postlist in the window. `who`
    /// names the rate as the user gave it (`--rate 0.5`, `--under-load 1%`)
    /// and `hint` says what would fix a rate too low.
    pub fn validate_point(
        &self,
        window: u32,
        postlist: u32,
        total_qps: u32,
        duration_s: f64,
        who: &str,
        hint: &str,
    ) -> Result<()> {
        let burst = self.burst_for(postlist);
        if burst > window {
            return Err(Error::usage(format!(
                "--burst {burst}: above --window {window} (a refill must fit in a QP's window)"
            )));
        }
        let per_window = self.per_qp_ops(total_qps) * duration_s;
        if per_window < f64::from(postlist.max(burst)) {
            return Err(Error::usage(format!(
                "{who}: each of {total_qps} QPs would post {per_window:.2} WRs in the {duration_s} s window, fewer than one refill of {} ({hint})",
                postlist.max(burst)
            )));
        }
        Ok(())
    }
}

/// One offered load of a latency-under-load run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// A fixed offered rate, Mops.
    Mops(f64),
    /// A fraction (0, 1] of the saturated rate, which is measured first.
    Fraction(f64),
    /// No limit: the background issues as fast as it can.
    Max,
}

impl Load {
    /// The load as the user spelled it (`0.5`, `10%`, `max`): what
    /// `compare` matches on.
    pub fn label(&self) -> String {
        match self {
            Load::Mops(m) => format!("{m}"),
            Load::Fraction(f) => format!("{}%", (f * 100.0 * 1e6).round() / 1e6),
            Load::Max => "max".into(),
        }
    }

    /// The offered rate given the saturated one (`None`: unlimited).
    pub fn offered_mops(&self, saturated: Option<f64>) -> Option<f64> {
        match self {
            Load::Mops(m) => Some(*m),
            Load::Fraction(f) => saturated.map(|s| s * f),
            Load::Max => None,
        }
    }
}

/// Parses `--under-load`: a comma list of Mops (`0.02`), percentages of the
/// saturated rate (`10%`, up to 100%) and `max`.
pub fn parse_loads(text: &str) -> Result<Vec<Load>> {
    let bad = |item: &str, why: &str| Error::usage(format!("--under-load {item}: {why}"));
    // Counted before any item is parsed: the duplicate check below is
    // quadratic, so its input stays within the limit.
    let items = text.split(',').count();
    if items > MAX_LOADS {
        return Err(Error::usage(format!(
            "--under-load: {items} loads, more than the limit of {MAX_LOADS}"
        )));
    }
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        let load = if item.eq_ignore_ascii_case("max") {
            Load::Max
        } else if let Some(pct) = item.strip_suffix('%') {
            let v: f64 = pct
                .trim()
                .parse()
                .map_err(|_| bad(item, "expected a percentage such as 50%"))?;
            if !v.is_finite() || v <= 0.0 || v > 100.0 {
                return Err(bad(
                    item,
                    "a percentage of the saturated rate is in (0, 100]",
                ));
            }
            Load::Fraction(v / 100.0)
        } else {
            let v: f64 = item.parse().map_err(|_| {
                bad(
                    item,
                    "expected Mops (0.5), a percentage (50%) or max, separated by commas",
                )
            })?;
            if !v.is_finite() || v <= 0.0 || v > MAX_RATE_MOPS {
                return Err(bad(
                    item,
                    "an offered rate is above 0 and at most 100000 Mops",
                ));
            }
            Load::Mops(v)
        };
        if out.contains(&load) {
            return Err(bad(item, "given twice"));
        }
        out.push(load);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_parse_and_keep_their_spelling() {
        let l = parse_loads("10%, 0.5,max").unwrap();
        assert_eq!(l, vec![Load::Fraction(0.1), Load::Mops(0.5), Load::Max]);
        assert_eq!(l[0].label(), "10%");
        assert_eq!(l[1].label(), "0.5");
        assert_eq!(l[2].offered_mops(Some(2.0)), None);
        assert!((l[0].offered_mops(Some(2.0)).unwrap() - 0.2).abs() < 1e-12);
        for bad in ["", "0%", "101%", "-1", "0", "x", "10%,10%", "nan", "inf"] {
            assert!(parse_loads(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_rate_splits_over_the_process_qps_unless_per_qp() {
        let r = RateLimit {
            mops: 1.0,
            per_qp: false,
            burst: None,
        };
        assert_eq!(r.per_qp_ops(4), 250_000.0);
        assert!((r.offered_mops(4) - 1.0).abs() < 1e-12);
        let q = RateLimit { per_qp: true, ..r };
        assert!((q.offered_mops(4) - 4.0).abs() < 1e-12);
        assert!(r
            .validate_point(128, 1, 4, 1.0, "--rate", "raise it")
            .is_ok());
        let big = RateLimit {
            burst: Some(256),
            ..r
        };
        assert!(big
            .validate_point(128, 1, 4, 1.0, "--rate", "raise it")
            .is_err());
        let tiny = RateLimit { mops: 1e-9, ..r };
        assert!(tiny
            .validate_point(128, 1, 4, 1.0, "--rate", "raise it")
            .is_err());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e9] {
            assert!(RateLimit { mops: bad, ..r }.validate().is_err());
        }
        assert!(RateLimit {
            burst: Some(0),
            ..r
        }
        .validate()
        .is_err());
    }
}
