//! A measurement ready to run: a latency spec or a throughput sweep, built and
//! validated from arguments, then executed in loopback or against `serve`,
//! handing each measured point to the caller as a results record.

use crate::bench::{run_client, run_tput_client, PointOutcome, Port, TputOutcome};
use crate::cli::TestArgs;
use crate::clock::Clock;
use crate::error::Result;
use crate::output::Console;
use crate::results::Record;
use crate::spec::{LatencySpec, TputSpec, VerbKind};

use super::setup::connect_to;

pub enum Plan {
    Latency(LatencySpec),
    /// With the notes about sweep points skipped as contradictory.
    Tput(TputSpec, Vec<String>),
}

impl Plan {
    /// Validates the arguments (exit 2 on bad input) before anything is opened.
    pub fn from_args(verb: VerbKind, args: &TestArgs) -> Result<Plan> {
        if args.tput.is_some() {
            let (spec, skipped) = super::tput::spec_from_args(verb, args)?;
            Ok(Plan::Tput(spec, skipped))
        } else {
            Ok(Plan::Latency(super::latency::spec_from_args(verb, args)?))
        }
    }

    pub fn points(&self) -> usize {
        match self {
            Plan::Latency(s) => s.sizes.len(),
            Plan::Tput(s, _) => s.points.len(),
        }
    }

    fn timeout_s(&self) -> f64 {
        match self {
            Plan::Latency(s) => s.timeout_s,
            Plan::Tput(s, _) => s.timeout_s,
        }
    }

    /// Prints what the coming table means (and which points were skipped).
    pub fn announce(&self, console: &Console, device: &str) {
        match self {
            Plan::Latency(s) => console.header(s, device),
            Plan::Tput(s, skipped) => {
                for why in skipped {
                    console.note(&format!("skipped sweep points where {why}"));
                }
                console.tput_header(s, device);
            }
        }
    }

    /// Runs every point; `on_record` sees each as soon as it is measured.
    pub fn execute(
        &self,
        port: &Port,
        clock: &Clock,
        connect: Option<&str>,
        max_inline: u32,
        series: Option<&str>,
        on_record: &mut dyn FnMut(Record) -> Result<()>,
    ) -> Result<()> {
        let label = series.map(str::to_string);
        match self {
            Plan::Latency(spec) => {
                let mut on_point = |p: PointOutcome<'_>| {
                    let mut r = super::latency::record(spec, &p);
                    r.series = label.clone();
                    on_record(Record::Latency(r))
                };
                self.drive(port, clock, connect, &mut |ctl| {
                    run_client(spec, port, ctl, clock, &mut on_point)
                })
            }
            Plan::Tput(spec, _) => {
                let mut on_point = |o: TputOutcome| {
                    let mut r = super::tput::record(spec, &o, max_inline);
                    r.series = label.clone();
                    on_record(Record::Throughput(r))
                };
                self.drive(port, clock, connect, &mut |ctl| {
                    run_tput_client(spec, port, ctl, clock, &mut on_point)
                })
            }
        }
    }

    /// Runs `client` against `serve` at `connect`, or against a loopback server thread.
    fn drive(
        &self,
        port: &Port,
        clock: &Clock,
        connect: Option<&str>,
        client: &mut dyn FnMut(&mut dyn crate::connect::Control) -> Result<()>,
    ) -> Result<()> {
        match connect {
            Some(target) => {
                let mut ctl = connect_to(target, self.timeout_s())?;
                client(&mut ctl)
            }
            None => super::loopback(port, clock, self.timeout_s(), client),
        }
    }
}
