//! Which `[defaults]` a series takes. A default applies to a series exactly
//! when the command line the series is would accept the option: the
//! command line's own validators are the one applicability table, so the
//! two cannot drift. A default that does not fit is left out, with the
//! validator's reason, which the run's plan prints; a value that is wrong
//! where the option does apply is still refused.

use crate::cli;
use crate::cmd::plan::Plan;
use crate::error::Error;
use crate::spec::VerbKind;

/// A value of each key that is valid wherever the key applies at all: when
/// a default's own value is refused, this one tells whether the key does
/// not fit the series (left out) or the value is wrong for it (refused).
const SAMPLE: &[(&str, &str)] = &[
    // Not 8: atomics take only 8 bytes, and --size does not apply to them.
    ("size", "64"),
    ("iters", "100"),
    ("duration", "1"),
    ("warmup", "10"),
    ("inline", ""),
    ("inline_size", "0"),
    ("transport", "rc"),
    ("imm", ""),
    ("op", "fadd"),
    ("completion", ""),
    ("timeout", "30"),
    ("signal_period", "64"),
    ("qps", "1"),
    ("postlist", "1"),
    ("window", "128"),
    ("threads", "1"),
    ("warmup_time", "0.2"),
    ("req", "write"),
    ("resp", "send"),
    // Not 1, which any run takes: a group applies only where 2 can meet.
    ("group", "2"),
    ("sge", "1"),
    ("events", ""),
    ("post_api", "classic"),
    ("tclass", "0"),
    ("sl", "0"),
    ("flow_label", "0"),
    // The largest: a smaller --mtu may be refused beside a size it cannot
    // carry, which is the value's fault, not the key's.
    ("mtu", "4096"),
    ("bidirectional", ""),
    ("srq", ""),
    ("hugepages", ""),
    ("mr_per_qp", ""),
    ("region", "16m"),
    ("offsets", "random"),
    ("cm", ""),
    ("interval", "1"),
    ("forever", ""),
    ("rate", "1"),
    ("rate_per_qp", ""),
    ("burst", "1"),
    ("under_load", "max"),
    ("validate", ""),
    // Not options: `metric` and `direction` make `--tput[=DIRECTION]`.
    ("metric", "throughput"),
    ("direction", "inbound"),
];

pub(super) fn sample(key: &str) -> Option<&'static str> {
    SAMPLE.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Why a series' command line is refused: the key to blame and the message.
#[derive(Debug)]
pub(super) struct Blame {
    pub key: String,
    pub msg: String,
}

/// Checks a series' command line as the run will run it: with the run's
/// `--connect` target (not resolved here; `run` resolves it once) and,
/// under MPI, with rank 0 as the server and the client ranks as the group.
pub(super) struct Checker {
    pub verb: VerbKind,
    pub connect: Option<String>,
    /// `launcher = "mpi"`: the client ranks.
    pub mpi_clients: Option<u32>,
}

impl Checker {
    pub fn check(&self, argv: &[String]) -> Result<Plan, Blame> {
        let mut full = argv.to_vec();
        if let (Some(target), None) = (&self.connect, self.mpi_clients) {
            full.push(format!("--connect={target}"));
        }
        if let Some(clients) = self.mpi_clients {
            // Under mpirun rank 0 serves and every other rank is a client of it.
            full.push("--connect=mpi-rank-0".into());
            if let Some(g) = argv.iter().find_map(|a| a.strip_prefix("--group=")) {
                if g != clients.to_string() {
                    return Err(blame(
                        "group",
                        format!("--group {g}: under launcher = \"mpi\" the group is the {clients} client ranks"),
                    ));
                }
            }
            if argv.iter().any(|a| a == "--cm") {
                return Err(blame("cm", "--cm: under launcher = \"mpi\" the ranks have no IP control channel to learn rank 0's address from; run --cm with serve/--connect"));
            }
        }
        let cli = cli::parse_from(&full).map_err(|e| {
            let line = cli::one_line(&e);
            let msg = line.trim_start_matches("error: ").to_string();
            let key = super::clap_key(&e)
                .or_else(|| super::option_in(&msg))
                .unwrap_or_else(|| "verb".into());
            Blame { key, msg }
        })?;
        let Some((_, args)) = cli.command.measurement() else {
            return Err(blame("verb", "not a measuring command"));
        };
        let plan = Plan::from_args_unresolved(self.verb, args).map_err(plan_blame)?;
        if self.mpi_clients.is_some() && !matches!(plan, Plan::Tput(..)) {
            // mpi::run refuses it: refuse it here, before any launch line is printed.
            return Err(blame(
                "metric",
                "under launcher = \"mpi\" only throughput series run (rank 0 serves, the other ranks are its clients): give metric = \"throughput\"",
            ));
        }
        if let (Some(clients), Plan::Tput(spec, _)) = (self.mpi_clients, &plan) {
            // What depends on the group (--bidirectional, --forever) with the group MPI gives.
            let mut spec = spec.clone();
            spec.group = clients;
            spec.validate().map_err(|e| {
                let mut b = plan_blame(e);
                if b.key == "group" && !argv.iter().any(|a| a.starts_with("--group=")) {
                    // The group is MPI's, not a key of the file: blame what needs another.
                    let (_, rest) = b.msg.split_once(':').unwrap_or(("", &b.msg));
                    b.key = super::option_in(rest).unwrap_or_else(|| "verb".into());
                }
                b
            })?;
        }
        Ok(plan)
    }
}

fn blame(key: &str, msg: impl Into<String>) -> Blame {
    Blame {
        key: key.into(),
        msg: msg.into(),
    }
}

fn plan_blame(e: Error) -> Blame {
    let msg = e.to_string();
    let key = super::option_in(&msg).unwrap_or_else(|| "verb".into());
    Blame { key, msg }
}

/// A key with its value as the command line spells it (`None`: a flag set to false).
pub(super) type KeyArg = (&'static str, Option<String>);

/// What one default did for a series.
pub(super) enum Outcome {
    Applied,
    LeftOut(String),
}

/// Decides the series' defaults. `argv_with(applied)` is the series' command
/// line with its own keys and the defaults in `applied` (in the order the
/// command line is built); `pending` are the defaults the series does not
/// set itself, each with its value as the command line spells it. A default
/// is applied when the command line accepts it; when it refuses it, the
/// key's sample value tells a key that does not fit the series (left out)
/// from a value that is wrong for it (refused). Decisions are retried while
/// any default got applied, since one default may be what another needs
/// (`offsets` needs `region`).
pub(super) fn decide(
    checker: &Checker,
    pending: &[KeyArg],
    argv_with: &dyn Fn(&[KeyArg]) -> Vec<String>,
) -> Result<Vec<(&'static str, Outcome)>, Blame> {
    // Most series take every default: one check decides them all.
    if !pending.is_empty() && checker.check(&argv_with(pending)).is_ok() {
        return Ok(pending
            .iter()
            .map(|(k, _)| (*k, Outcome::Applied))
            .collect());
    }
    // Whether a key fits is asked as if the run had a peer (`group` fits an
    // inbound series; run without --connect, its value is what is wrong).
    let in_any_context = Checker {
        verb: checker.verb,
        connect: match (&checker.connect, checker.mpi_clients) {
            (None, None) => Some("peer.invalid:1".into()),
            (c, _) => c.clone(),
        },
        mpi_clients: checker.mpi_clients,
    };
    let mut applied: Vec<(&'static str, Option<String>)> = Vec::new();
    let mut open: Vec<&(&'static str, Option<String>)> = pending.iter().collect();
    // Why each key was left out when first tried: later passes retry it
    // beside more defaults, but the reason that matters is the series' own.
    let mut left: Vec<(&'static str, String)> = Vec::new();
    loop {
        let mut changed = false;
        let mut still = Vec::new();
        for item in open {
            let (key, value) = item;
            if applied.iter().any(|(k, _)| k == key) {
                // Applied with the metric it belongs to.
                continue;
            }
            // A flag set to false adds nothing to the command line.
            if value.is_none() {
                applied.push(item.clone());
                changed = true;
                continue;
            }
            let mut with = applied.clone();
            with.push(item.clone());
            // A default metric and a default direction make one `--tput=DIRECTION`.
            let direction = pending.iter().find(|(k, _)| *k == "direction");
            if let (true, Some(d)) = (*key == "metric", direction) {
                let mut both = with.clone();
                both.push(d.clone());
                if checker.check(&argv_with(&both)).is_ok() {
                    with = both;
                }
            }
            let Err(refusal) = checker.check(&argv_with(&with)) else {
                left.retain(|(k, _)| !with.iter().any(|(w, _)| w == k));
                applied = with;
                changed = true;
                continue;
            };
            let fits = sample(key).is_some_and(|s| {
                let mut with = applied.clone();
                with.push((key, Some(s.to_string())));
                in_any_context.check(&argv_with(&with)).is_ok()
            });
            if fits {
                // The key applies here; its value does not.
                return Err(refusal);
            }
            if !left.iter().any(|(k, _)| k == key) {
                left.push((key, refusal.msg));
            }
            still.push(item);
        }
        open = still;
        if !changed && !open.is_empty() {
            // Stuck: defaults that each need another (atomic's `op` and a
            // throughput `direction`) are tried together, dropping the key
            // each refusal blames until the rest is accepted.
            let mut joint: Vec<_> = open.iter().map(|i| (*i).clone()).collect();
            while !joint.is_empty() {
                let mut with = applied.clone();
                with.extend(joint.iter().cloned());
                match checker.check(&argv_with(&with)) {
                    Ok(_) => {
                        left.retain(|(k, _)| !joint.iter().any(|(j, _)| j == k));
                        applied = with;
                        changed = true;
                        break;
                    }
                    Err(b) => {
                        let before = joint.len();
                        joint.retain(|(k, _)| *k != b.key);
                        if joint.len() == before {
                            break;
                        }
                    }
                }
            }
            open.retain(|(k, _)| !applied.iter().any(|(a, _)| a == k));
        }
        if !changed || open.is_empty() {
            break;
        }
    }
    let mut out: Vec<(&'static str, Outcome)> = applied
        .iter()
        .map(|(k, _)| (*k, Outcome::Applied))
        .collect();
    out.extend(left.into_iter().map(|(k, why)| (k, Outcome::LeftOut(why))));
    Ok(out)
}

/// The plan's line about a series' defaults: which it took, which it left
/// out and why (`None`: the file has no `[defaults]` for it).
pub fn note(outcomes: &[(String, Option<String>)]) -> Option<String> {
    if outcomes.is_empty() {
        return None;
    }
    let applied: Vec<&str> = outcomes
        .iter()
        .filter(|(_, why)| why.is_none())
        .map(|(k, _)| k.as_str())
        .collect();
    let left: Vec<String> = outcomes
        .iter()
        .filter_map(|(k, why)| why.as_ref().map(|w| format!("{k} ({w})")))
        .collect();
    let mut line = format!(
        "[defaults] applied: {}",
        if applied.is_empty() {
            "none".to_string()
        } else {
            applied.join(", ")
        }
    );
    if !left.is_empty() {
        line.push_str(&format!("; left out: {}", left.join("; ")));
    }
    Some(line)
}
