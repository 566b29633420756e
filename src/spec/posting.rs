//! How a run posts its work requests and waits for their completions:
//! `--post-api classic|ex` and `--events`.

use serde::{Deserialize, Serialize};

use super::{Direction, EchoVerb, LatencyMode, VerbKind};
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

/// `--events` on a throughput run: the inbound and outbound issuers (each
/// side's, with `--bidirectional`) sleep on their send CQ's channel; echo's
/// client and server sleep on one channel serving their UD QP's send and
/// receive CQs. A WRITE request or response is seen in memory, not in a
/// completion, so echo takes --events only with SEND requests and responses.
pub fn check_tput_events(direction: Direction, req: EchoVerb, resp: EchoVerb) -> Result<()> {
    if direction == Direction::Echo && (req == EchoVerb::Write || resp == EchoVerb::Write) {
        return Err(Error::usage(
            "--events: echo --tput sleeps on completions, and a WRITE request or response is \
             seen in memory, not in a completion: --events needs --req send --resp send",
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
