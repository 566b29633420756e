//! Slow pairs, judged against the best pairs rather than the median (one
//! bad host is in most pairs of a small cluster), and the endpoint the slow
//! pairs share named as the likely culprit.

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

/// Judges `obs` (from `endpoints` endpoints) with `tolerance` (0.2 = 20 %).
pub fn judge(better: Better, tolerance: f64, endpoints: u32, obs: &[Observation]) -> Judgement {
    let _ = (better, tolerance, endpoints, obs);
    unimplemented!("helper B")
}
