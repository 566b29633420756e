//! How a run posts its work requests and waits for their completions:
//! `--post-api classic|ex` and `--events`.

use serde::{Deserialize, Serialize};

use super::{Direction, LatencyMode, VerbKind};
use crate::error::{Error, Result};

/// Which post API the QPs use: `ibv_post_send` (classic, the default) or
/// `ibv_wr_*` on an extended QP made with `ibv_create_qp_ex` (ex).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum PostApi {
    #[default]
    Classic,
    Ex,
}

impl PostApi {
    pub fn name(self) -> &'static str {
        match self {
            PostApi::Classic => "classic",
            PostApi::Ex => "ex",
        }
    }
}

/// `--events` on a latency run: the waits that sleep on a completion
/// channel are completions, so a ping-pong that sees its answer in memory
/// (WRITE, echo) has nothing to sleep on.
pub fn check_latency_events(verb: VerbKind, mode: LatencyMode) -> Result<()> {
    if mode == LatencyMode::PingPong && matches!(verb, VerbKind::Write | VerbKind::Echo) {
        return Err(Error::usage(format!(
            "--events: a {} ping-pong sees each answer in memory, not in a completion, so there \
             is no event to wait for (use --completion, or send)",
            verb.name()
        )));
    }
    Ok(())
}

/// `--events` on a throughput run: the issuer sleeps on its send CQ; the
/// echo loops poll both CQs and are not built for events.
pub fn check_tput_events(direction: Direction) -> Result<()> {
    if direction == Direction::Echo {
        return Err(Error::usage(
            "--events: echo throughput polls its request and response CQs together; \
             events apply to inbound and outbound throughput",
        ));
    }
    Ok(())
}
