//! Slow pairs, judged against the best pairs rather than the median (one
//! bad host is in most pairs of a small cluster), and the endpoint the slow
//! pairs share named as the likely culprit.
//!
//! The rule, for one figure over the M observations (pair and direction):
//! - The reference is the ⌈M/4⌉-th best. With one bad endpoint among N ≥ 3,
//!   the observations that do not touch it are (N−2)/N ≥ 1/3 of all, so the
//!   best quarter lies among healthy pairs; the median would not (with 3
//!   hosts a bad host is in 2 of the 3 pairs). It holds while healthy pairs
//!   are more than a quarter of all.
//! - An observation is slow when it is more than 1 + tolerance times worse
//!   than the reference (value/reference for lower-is-better figures,
//!   reference/value for higher-is-better ones).
//! - Culprits, greedily: the endpoint in the most slow observations not yet
//!   explained, with at least 2 distinct partners among them (one slow pair
//!   cannot say which of its two ends is at fault), explains all of its
//!   slow observations; repeat. What is left is a link of its own.
//! - With fewer than 3 endpoints there is no other pair to judge against.

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
}

/// One measured figure of a pair in one direction (`from` drove it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub from: u32,
    pub to: u32,
    pub value: f64,
}

/// An observation worse than the reference by more than the tolerance.
#[derive(Debug, Clone, PartialEq)]
pub struct Slow {
    pub from: u32,
    pub to: u32,
    pub value: f64,
    pub reference: f64,
    /// How many times worse than the reference (always > 1).
    pub ratio: f64,
}

/// An endpoint that the slow observations share.
#[derive(Debug, Clone, PartialEq)]
pub struct Culprit {
    pub endpoint: u32,
    /// Slow observations it is in, of all its observations.
    pub slow: u32,
    pub of: u32,
    /// The distinct partners of its slow observations.
    pub partners: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// The figure every observation was judged against; `None` when there
    /// are too few endpoints to judge.
    pub reference: Option<f64>,
    /// The rule, in one sentence, with its numbers.
    pub rule: String,
    pub slow: Vec<Slow>,
    pub culprits: Vec<Culprit>,
    /// Slow observations no culprit explains (a link of its own).
    pub unexplained: Vec<Slow>,
}

/// How many times worse than `reference` a value `v` is (infinite when
/// nothing was measured against a reference that measured something).
pub fn times_worse(better: Better, reference: f64, v: f64) -> f64 {
    match better {
        Better::Lower if reference > 0.0 => v / reference,
        Better::Lower => {
            if v > 0.0 {
                f64::INFINITY
            } else {
                1.0
            }
        }
        Better::Higher if v > 0.0 => reference / v,
        Better::Higher => f64::INFINITY,
    }
}

/// Judges `obs` (from `endpoints` endpoints) with `tolerance` (0.2 = 20 %).
pub fn judge(better: Better, tolerance: f64, endpoints: u32, obs: &[Observation]) -> Judgement {
    let usable: Vec<&Observation> = obs.iter().filter(|o| !o.value.is_nan()).collect();
    if endpoints < 3 || usable.len() < 3 {
        return Judgement {
            reference: None,
            rule: "fewer than 3 endpoints: no other pair to judge against (use --expect)".into(),
            slow: Vec::new(),
            culprits: Vec::new(),
            unexplained: Vec::new(),
        };
    }
    let mut sorted: Vec<f64> = usable.iter().map(|o| o.value).collect();
    sorted.sort_by(|a, b| match better {
        Better::Lower => a.total_cmp(b),
        Better::Higher => b.total_cmp(a),
    });
    let m = sorted.len();
    let k = m.div_ceil(4);
    let reference = sorted[k - 1];
    let ratio = |v: f64| times_worse(better, reference, v);
    let slow: Vec<Slow> = usable
        .iter()
        .filter_map(|o| {
            let r = ratio(o.value);
            (r > 1.0 + tolerance).then_some(Slow {
                from: o.from,
                to: o.to,
                value: o.value,
                reference,
                ratio: r,
            })
        })
        .collect();
    let mut explained = vec![false; slow.len()];
    let mut culprits = Vec::new();
    loop {
        let mut best: Option<(u32, usize, Vec<u32>)> = None;
        for e in 0..endpoints {
            let mut partners: Vec<u32> = Vec::new();
            let mut count = 0;
            for (s, done) in slow.iter().zip(&explained) {
                if *done || (s.from != e && s.to != e) {
                    continue;
                }
                count += 1;
                let p = if s.from == e { s.to } else { s.from };
                if !partners.contains(&p) {
                    partners.push(p);
                }
            }
            if partners.len() >= 2 && best.as_ref().map_or(true, |(_, c, _)| count > *c) {
                best = Some((e, count, partners));
            }
        }
        let Some((e, _, mut partners)) = best else {
            break;
        };
        partners.sort_unstable();
        let mut slow_n = 0;
        for (s, done) in slow.iter().zip(explained.iter_mut()) {
            if s.from == e || s.to == e {
                *done = true;
                slow_n += 1;
            }
        }
        let of = usable.iter().filter(|o| o.from == e || o.to == e).count() as u32;
        culprits.push(Culprit {
            endpoint: e,
            slow: slow_n,
            of,
            partners,
        });
    }
    let unexplained = slow
        .iter()
        .zip(&explained)
        .filter(|(_, d)| !**d)
        .map(|(s, _)| s.clone())
        .collect();
    let nth = match k {
        1 => "best".to_string(),
        2 => "2nd best".into(),
        3 => "3rd best".into(),
        k => format!("{k}th best"),
    };
    Judgement {
        reference: Some(reference),
        rule: format!(
            "slow when more than {:.2}x worse than the reference {} (the {nth} of {m}, the best quarter of pairs)",
            1.0 + tolerance,
            shown(reference)
        ),
        slow,
        culprits,
        unexplained,
    }
}

/// A reference as the rule shows it: whole when large, else 3 significant digits.
fn shown(v: f64) -> String {
    if v.abs() >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v.abs() < 0.01 {
        format!("{v:.3e}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ordered pair of `n` endpoints, its value from `f(from, to)`.
    fn mesh(n: u32, f: impl Fn(u32, u32) -> f64) -> Vec<Observation> {
        (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .map(|(from, to)| Observation {
                from,
                to,
                value: f(from, to),
            })
            .collect()
    }

    fn slow_set(j: &Judgement) -> Vec<(u32, u32)> {
        let mut v: Vec<_> = j.slow.iter().map(|s| (s.from, s.to)).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn one_delayed_host_of_three_is_named_and_the_pair_without_it_is_not_flagged() {
        let obs = mesh(3, |a, b| {
            if a == 2 || b == 2 {
                900.0
            } else {
                200.0 + f64::from(a)
            }
        });
        let j = judge(Better::Lower, 0.2, 3, &obs);
        assert_eq!(slow_set(&j), vec![(0, 2), (1, 2), (2, 0), (2, 1)]);
        assert_eq!(j.culprits.len(), 1);
        assert_eq!(
            (j.culprits[0].endpoint, j.culprits[0].slow, j.culprits[0].of),
            (2, 4, 4)
        );
        assert_eq!(j.culprits[0].partners, vec![0, 1]);
        assert!(j.unexplained.is_empty());
        assert!(j.rule.contains("reference 201"), "{}", j.rule);
    }

    #[test]
    fn a_host_slow_in_one_direction_is_named_by_its_two_outgoing_pairs() {
        let obs = mesh(3, |a, _| if a == 1 { 0.1 } else { 0.5 });
        let j = judge(Better::Higher, 0.2, 3, &obs);
        assert_eq!(slow_set(&j), vec![(1, 0), (1, 2)]);
        assert_eq!(j.culprits.len(), 1);
        assert_eq!(
            (j.culprits[0].endpoint, j.culprits[0].slow, j.culprits[0].of),
            (1, 2, 4)
        );
        assert!((j.slow[0].ratio - 5.0).abs() < 1e-9);
    }

    #[test]
    fn one_and_two_bad_hosts_of_eight() {
        let j = judge(
            Better::Lower,
            0.2,
            8,
            &mesh(8, |a, b| if a == 5 || b == 5 { 3.0 } else { 1.0 }),
        );
        assert_eq!(j.slow.len(), 14);
        assert_eq!(
            j.culprits.iter().map(|c| c.endpoint).collect::<Vec<_>>(),
            vec![5]
        );
        let bad = |x: u32| x == 2 || x == 6;
        let j = judge(
            Better::Lower,
            0.2,
            8,
            &mesh(8, |a, b| if bad(a) || bad(b) { 3.0 } else { 1.0 }),
        );
        let mut named: Vec<u32> = j.culprits.iter().map(|c| c.endpoint).collect();
        named.sort_unstable();
        assert_eq!(named, vec![2, 6]);
        assert!(j.unexplained.is_empty());
    }

    #[test]
    fn a_single_slow_link_blames_no_host_and_noise_flags_nothing() {
        let j = judge(
            Better::Lower,
            0.2,
            4,
            &mesh(4, |a, b| if (a, b) == (0, 3) { 5.0 } else { 1.0 }),
        );
        assert_eq!(slow_set(&j), vec![(0, 3)]);
        assert!(j.culprits.is_empty());
        assert_eq!(j.unexplained.len(), 1);
        let j = judge(
            Better::Lower,
            0.2,
            4,
            &mesh(4, |a, b| 1.0 + 0.05 * f64::from((a * 3 + b) % 4)),
        );
        assert!(j.slow.is_empty(), "{:?}", j.slow);
    }

    #[test]
    fn too_few_endpoints_or_odd_values_are_handled() {
        let j = judge(Better::Lower, 0.2, 2, &mesh(2, |_, _| 1.0));
        assert_eq!(j.reference, None);
        assert!(j.rule.contains("fewer than 3"));
        let mut obs = mesh(3, |_, _| 1.0);
        obs[0].value = f64::NAN;
        obs[1].value = f64::INFINITY;
        obs[2].value = 0.0;
        let lower = judge(Better::Lower, 0.2, 3, &obs);
        assert!(lower.slow.iter().any(|s| s.value.is_infinite()));
        let higher = judge(Better::Higher, 0.2, 3, &obs);
        assert!(higher
            .slow
            .iter()
            .any(|s| s.value == 0.0 && s.ratio.is_infinite()));
    }
}
