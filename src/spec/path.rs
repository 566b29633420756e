//! The QPs' path (`PathSpec`: `--tclass`, `--sl`, `--flow-label`, `--mtu` and
//! how they connect, `--cm`), its range checks, and the path MTU both ends
//! agree on from their ports' active MTUs (`PathEnds`).

use serde::{Deserialize, Serialize};

use super::check_range;
use crate::error::{Error, Result};
use crate::verbs::Transport;

/// The MTUs `--mtu` accepts (the IB path MTUs).
pub const MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];
/// Largest service level (4 bits).
pub const MAX_SL: u8 = 15;
/// Largest GRH flow label (20 bits).
pub const MAX_FLOW_LABEL: u32 = 0xF_FFFF;

/// How a run's QPs are connected: by GIDs and QP numbers exchanged over the
/// control channel (the default), or by rdma_cm (`--cm`: address and route
/// resolution, connect/accept), which iWARP needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Connection {
    #[default]
    Gid,
    Cm,
}

impl Connection {
    pub fn name(self) -> &'static str {
        match self {
            Connection::Gid => "gid",
            Connection::Cm => "cm",
        }
    }
}

/// QoS and path of every QP a run connects (`--tclass`, `--sl`,
/// `--flow-label`, `--mtu`): `None` where not given (traffic class, SL and
/// flow label 0, the port's active MTU), and how the QPs are connected
/// (`--cm`). Both sides apply the client's values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct PathSpec {
    pub tclass: Option<u8>,
    pub sl: Option<u8>,
    pub flow_label: Option<u32>,
    pub mtu: Option<u32>,
    pub connection: Connection,
    /// The path MTU both ends agreed on in the handshake
    /// ([`PathSpec::negotiate_mtu`]); each side sets it for itself, so it
    /// never crosses the wire.
    #[serde(skip)]
    pub path_mtu: Option<u32>,
}

impl PathSpec {
    /// Builds the path from the options as given (any integer), refusing
    /// values outside their ranges.
    pub fn from_options(
        tclass: Option<i64>,
        sl: Option<i64>,
        flow_label: Option<i64>,
        mtu: Option<i64>,
    ) -> Result<PathSpec> {
        if let Some(v) = tclass {
            check_range("--tclass", v, 0, 255, "")?;
        }
        if let Some(v) = sl {
            check_range("--sl", v, 0, i64::from(MAX_SL), "")?;
        }
        if let Some(v) = flow_label {
            check_range("--flow-label", v, 0, i64::from(MAX_FLOW_LABEL), "")?;
        }
        if let Some(v) = mtu {
            check_mtu(v)?;
        }
        let path = PathSpec {
            tclass: tclass.map(|v| v as u8),
            sl: sl.map(|v| v as u8),
            flow_label: flow_label.map(|v| v as u32),
            mtu: mtu.map(|v| v as u32),
            connection: Connection::Gid,
            path_mtu: None,
        };
        path.validate()?;
        Ok(path)
    }

    /// Host-side checks (a spec from the wire goes through them too).
    pub fn validate(&self) -> Result<()> {
        if let Some(v) = self.sl {
            check_range("--sl", v, 0, MAX_SL, "")?;
        }
        if let Some(v) = self.flow_label {
            check_range("--flow-label", v, 0, MAX_FLOW_LABEL, "")?;
        }
        if let Some(v) = self.mtu {
            check_mtu(i64::from(v))?;
        }
        Ok(())
    }

    /// Refuses `--cm` with a transport rdma_cm cannot connect here.
    pub fn check_transport(&self, t: Transport) -> Result<()> {
        match (self.connection, t) {
            (Connection::Cm, Transport::Uc) => Err(Error::usage(
                "--cm -c uc: librdmacm has no UC (rdma_cm connects RC and UD QPs only); use -c rc, or drop --cm",
            )),
            (Connection::Cm, Transport::Ud) => Err(Error::usage(
                "--cm -c ud: rdma-bench connects only RC QPs through rdma_cm (UD over RDMA_PS_UDP is not wired); use -c rc, or drop --cm",
            )),
            _ => Ok(()),
        }
    }

    /// The MTU QPs run with: the one both ends agreed on, else the
    /// requested one, else the port's active MTU.
    pub fn effective_mtu(&self, active: u32) -> u32 {
        self.path_mtu
            .unwrap_or_else(|| self.mtu.map_or(active, |m| m.min(active)))
    }

    /// The MTU a run's QPs can use on the path between `ends`: `--mtu` when
    /// every end's port carries it, else the smallest active MTU. Each side
    /// computes it from the same two ports' facts (exchanged in the
    /// handshake), so both set the same path MTU.
    pub fn negotiate_mtu(&self, ends: &PathEnds) -> Result<u32> {
        self.check_device(ends)?;
        Ok(self.mtu.unwrap_or_else(|| ends.active()))
    }

    /// Refuses an `--mtu` above the active MTU of either end's port.
    pub fn check_device(&self, ends: &PathEnds) -> Result<()> {
        let (narrow, other) = ends.narrowest();
        match self.mtu {
            Some(m) if m > narrow.active => Err(Error::usage(match other {
                None => format!(
                    "--mtu {m} exceeds the active MTU of {} ({})",
                    narrow.name(),
                    narrow.active
                ),
                Some(o) => format!(
                    "--mtu {m} exceeds the active MTU of {} ({}; {} has {})",
                    narrow.name(),
                    narrow.active,
                    o.name(),
                    o.active
                ),
            })),
            _ => Ok(()),
        }
    }

    /// The UD payload limit and where it comes from, for refusals:
    /// "the UD MTU of rxe0 (512, from --mtu 512)", or for two hosts "the UD
    /// MTU of the path (512: rxe0 port 1 on h2 has 512, rxe0 port 1 on h1 has 1024)".
    pub fn ud_limit(&self, ends: &PathEnds) -> (u32, String) {
        let active = ends.active();
        let mtu = self.effective_mtu(active);
        let from = match self.mtu {
            Some(m) if m < active => format!(", from --mtu {m}"),
            _ => String::new(),
        };
        let why = match ends.narrowest() {
            (n, None) => format!("the UD MTU of {} ({mtu}{from})", n.device),
            (n, Some(o)) => format!(
                "the UD MTU of the path ({mtu}{from}: {} has {}, {} has {})",
                n.name(),
                n.active,
                o.name(),
                o.active
            ),
        };
        (mtu, why)
    }
}

/// One end of a run's path: a device port, the host it is on where the
/// other end is on another, and its active MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MtuEnd {
    pub device: String,
    pub port: u8,
    pub host: Option<String>,
    pub active: u32,
}

impl MtuEnd {
    /// "rxe0 port 1", or "rxe0 port 1 on h2".
    pub fn name(&self) -> String {
        match &self.host {
            Some(h) => format!("{} port {} on {h}", self.device, self.port),
            None => format!("{} port {}", self.device, self.port),
        }
    }
}

/// The ports whose active MTUs bound a run's path: this side's, and the
/// peer's once its handshake said, where that is another port (another
/// host, or `serve` on another device of this one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEnds {
    pub local: MtuEnd,
    pub peer: Option<MtuEnd>,
}

impl PathEnds {
    /// One port is both ends (loopback, or before the handshake).
    pub fn single(device: &str, port: u8, active: u32) -> Self {
        PathEnds {
            local: MtuEnd {
                device: device.to_string(),
                port,
                host: None,
                active,
            },
            peer: None,
        }
    }

    /// This port and the peer's: `peer` is left out when it is this very
    /// port. Hosts are named only when they differ.
    pub fn between(local: MtuEnd, peer: MtuEnd) -> Self {
        let same_host = local.host == peer.host;
        if same_host && local.device == peer.device && local.port == peer.port {
            return PathEnds { local, peer: None };
        }
        let keep = |mut e: MtuEnd| {
            if same_host {
                e.host = None;
            }
            e
        };
        PathEnds {
            local: keep(local),
            peer: Some(keep(peer)),
        }
    }

    /// The largest MTU every end carries.
    pub fn active(&self) -> u32 {
        self.peer
            .as_ref()
            .map_or(self.local.active, |p| p.active.min(self.local.active))
    }

    /// The end with the smaller active MTU (the peer's on a tie), and the other.
    fn narrowest(&self) -> (&MtuEnd, Option<&MtuEnd>) {
        match &self.peer {
            Some(p) if p.active <= self.local.active => (p, Some(&self.local)),
            Some(p) => (&self.local, Some(p)),
            None => (&self.local, None),
        }
    }
}

fn check_mtu(v: i64) -> Result<()> {
    if MTUS.iter().any(|&m| i64::from(m) == v) {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "--mtu {v}: must be one of 256, 512, 1024, 2048, 4096"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::{MtuEnd, PathEnds, PathSpec};

    #[test]
    fn path_options_are_range_checked_with_the_option_and_limit() {
        let p = PathSpec::from_options(Some(32), Some(1), Some(7), Some(512)).unwrap();
        assert_eq!(
            p,
            PathSpec {
                tclass: Some(32),
                sl: Some(1),
                flow_label: Some(7),
                mtu: Some(512),
                connection: super::Connection::Gid,
                path_mtu: None,
            }
        );
        assert_eq!(
            PathSpec::default(),
            PathSpec::from_options(None, None, None, None).unwrap()
        );
        for (args, msg) in [
            (
                (Some(256), None, None, None),
                "--tclass 256: must be 0..=255",
            ),
            ((Some(-1), None, None, None), "--tclass -1: must be 0..=255"),
            ((None, Some(16), None, None), "--sl 16: must be 0..=15"),
            (
                (None, None, Some(1 << 20), None),
                "--flow-label 1048576: must be 0..=1048575",
            ),
            (
                (None, None, None, Some(3000)),
                "--mtu 3000: must be one of 256, 512, 1024, 2048, 4096",
            ),
        ] {
            let e = PathSpec::from_options(args.0, args.1, args.2, args.3).unwrap_err();
            assert_eq!(e.to_string(), msg);
            assert_eq!(e.exit_code(), 2);
        }
        let wire = PathSpec {
            sl: Some(16),
            ..PathSpec::default()
        };
        assert!(wire.validate().is_err());
    }

    #[test]
    fn mtu_above_the_active_one_is_refused_with_both_numbers() {
        let p = PathSpec {
            mtu: Some(4096),
            ..PathSpec::default()
        };
        let one = PathEnds::single("rxe0", 1, 1024);
        let e = p.check_device(&one).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--mtu 4096 exceeds the active MTU of rxe0 port 1 (1024)"
        );
        assert_eq!(e.exit_code(), 2);
        let p = PathSpec {
            mtu: Some(512),
            ..PathSpec::default()
        };
        p.check_device(&one).unwrap();
        assert_eq!(p.effective_mtu(1024), 512);
        assert_eq!(PathSpec::default().effective_mtu(1024), 1024);
        assert_eq!(
            p.ud_limit(&one).1,
            "the UD MTU of rxe0 (512, from --mtu 512)"
        );
    }

    fn end(host: &str, active: u32) -> MtuEnd {
        MtuEnd {
            device: "rxe0".into(),
            port: 1,
            host: Some(host.into()),
            active,
        }
    }

    #[test]
    fn two_hosts_run_at_the_smaller_active_mtu_or_are_refused_naming_both() {
        let ends = PathEnds::between(end("h1", 1024), end("h2", 512));
        assert_eq!(PathSpec::default().negotiate_mtu(&ends).unwrap(), 512);
        let asked = |m| PathSpec {
            mtu: Some(m),
            ..PathSpec::default()
        };
        assert_eq!(asked(256).negotiate_mtu(&ends).unwrap(), 256);
        let e = asked(1024).negotiate_mtu(&ends).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--mtu 1024 exceeds the active MTU of rxe0 port 1 on h2 (512; rxe0 port 1 on h1 has 1024)"
        );
        assert_eq!(e.exit_code(), 2);
        // Whichever side computes it, the narrower end is named first.
        let theirs = PathEnds::between(end("h2", 512), end("h1", 1024));
        assert_eq!(
            asked(1024).negotiate_mtu(&theirs).unwrap_err().to_string(),
            e.to_string()
        );
        assert_eq!(
            PathSpec::default().ud_limit(&ends),
            (
                512,
                "the UD MTU of the path (512: rxe0 port 1 on h2 has 512, rxe0 port 1 on h1 has 1024)"
                    .into()
            )
        );
        // The negotiated MTU is what QPs run with.
        let agreed = PathSpec {
            path_mtu: Some(512),
            ..PathSpec::default()
        };
        assert_eq!(agreed.effective_mtu(1024), 512);
        // One port at both ends (loopback, serve on the same device) is one end.
        let same = PathEnds::between(end("h1", 1024), end("h1", 1024));
        assert_eq!(same.peer, None);
        assert_eq!(
            PathSpec::default().ud_limit(&same).1,
            "the UD MTU of rxe0 (1024)"
        );
    }
}
