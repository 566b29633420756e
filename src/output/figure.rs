//! `--output` (perftest's spelling): the one number per point a script
//! reads from stdout, while every table line goes to stderr.

use clap::ValueEnum;

use crate::results::Record;

/// perftest's `--output`: the one figure per point printed on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFigure {
    /// Latency points: the p50 half-RTT (or completion time) in microseconds.
    Latency,
    /// Throughput points: Gb/s of payload.
    Bandwidth,
    /// Throughput points: million operations per second.
    #[value(name = "message_rate", alias = "message-rate")]
    MessageRate,
}

impl OutputFigure {
    /// The option's value as written (`message_rate`).
    pub fn name(self) -> &'static str {
        match self {
            OutputFigure::Latency => "latency",
            OutputFigure::Bandwidth => "bandwidth",
            OutputFigure::MessageRate => "message_rate",
        }
    }

    /// Whether the figure is a throughput one (else latency).
    pub fn is_tput(self) -> bool {
        self != OutputFigure::Latency
    }

    /// The figure of `r` as printed (the table's figure, as its results
    /// record holds it), or `None` when `r` is not of the figure's kind.
    pub fn of(self, r: &Record) -> Option<String> {
        match (self, r) {
            (OutputFigure::Latency, Record::Latency(l)) => {
                Some(format!("{:.3}", l.stats.p50_ns / 1000.0))
            }
            (OutputFigure::Bandwidth, Record::Throughput(t)) => Some(format!("{:.3}", t.gbps)),
            (OutputFigure::MessageRate, Record::Throughput(t)) => Some(format!("{:.4}", t.mops)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{LatencyRecord, TputRecord};

    #[test]
    fn each_figure_reads_its_record_kind_only() {
        let mut l = LatencyRecord::example();
        l.stats.p50_ns = 1234.5678;
        let mut t = TputRecord::example();
        t.gbps = 12.34567;
        t.mops = 0.123456;
        let (l, t) = (Record::Latency(l), Record::Throughput(t));
        assert_eq!(OutputFigure::Latency.of(&l).as_deref(), Some("1.235"));
        assert_eq!(OutputFigure::Bandwidth.of(&t).as_deref(), Some("12.346"));
        assert_eq!(OutputFigure::MessageRate.of(&t).as_deref(), Some("0.1235"));
        assert_eq!(OutputFigure::Latency.of(&t), None);
        assert_eq!(OutputFigure::Bandwidth.of(&l), None);
    }
}
