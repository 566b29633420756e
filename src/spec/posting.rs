//! How a run posts its work requests and waits for their completions:
//! `--post-api classic|ex` and `--events`.

use serde::{Deserialize, Serialize};

use super::{Direction, LatencyMode, VerbKind};
use crate::error::{Error, Result};

/// Which post API the QPs use: `ibv_post_send` (classic, the default) or
/// `ibv_wr_*` on an extended QP made with `ibv_create_qp_ex` (ex).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
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

/// `--events` on a throughput run: the inbound and outbound issuers sleep on
/// their send CQ's channel whenever every window is full. Echo's client and
/// server each drive a send CQ and a receive CQ (and the server its peers'
/// request slots) in one loop, which has no single CQ to sleep on; and a
/// bidirectional point with events is untested, so both are refused.
pub fn check_tput_events(direction: Direction, bidirectional: bool) -> Result<()> {
    if direction == Direction::Echo {
        return Err(Error::usage(
            "--events: echo --tput polls a send CQ and a receive CQ in one loop on each side, \
             so there is no one CQ to sleep on; --events applies to inbound and outbound \
             throughput (and to latency)",
        ));
    }
    if bidirectional {
        return Err(Error::usage(
            "--events: not with --bidirectional (untested together)",
        ));
    }
    Ok(())
}

/// `--post-api ex` with inline payloads gathered from several SGEs
/// (`ibv_wr_set_inline_data_list`): on soft-RoCE (rdma-core 44) the data of
/// such WRs never arrived at the peer, so the combination is not trusted.
pub fn check_post_api(api: PostApi, inline: bool, sge: u32) -> Result<()> {
    if api == PostApi::Ex && inline && sge > 1 {
        return Err(Error::usage(format!(
            "--post-api ex --inline --sge {sge}: inline data from several SGEs \
             (ibv_wr_set_inline_data_list) did not reach the peer on soft-RoCE, so it is \
             not offered; use --sge 1 or --post-api classic"
        )));
    }
    Ok(())
}
