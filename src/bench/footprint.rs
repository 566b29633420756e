//! What a session will pin, and `serve --max-memory`, the budget every
//! session draws from. A side's sets are built from `Buffers` (each builder
//! asks the same pure function for them that the estimate sums), so the
//! estimate is what would be registered: a client learns it is refused at
//! the handshake, before the server zeroes or pins a byte.

use std::sync::Mutex;

use crate::connect::{Control, Message};
use crate::error::{Error, Result};
use crate::spec::MemorySpec;
use crate::sweep::MAX_POINTS;
use crate::sys::HUGE_PAGE;

/// The page `MemoryRegion::new` rounds a heap buffer to.
const PAGE: u64 = 4096;
/// The smallest buffer `MemoryRegion` allocates.
const MIN_BUFFER: u64 = 64;

/// One QP set's buffers: `qps` regions of `region` bytes, registered once
/// for the set or (`--mr-per-qp`) once per QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffers {
    pub region: usize,
    pub qps: u32,
    pub memory: MemorySpec,
}

impl Buffers {
    /// How many registrations the set makes and the bytes each asks for
    /// (what `QpSet::build` registers).
    pub fn registrations(&self) -> (u32, u64) {
        let n = self.qps.max(1);
        let region = self.region as u64;
        match self.memory.mr_per_qp {
            true => (n, region),
            false => (1, region.saturating_mul(u64::from(n))),
        }
    }

    /// Bytes pinned, each registration rounded as `MemoryRegion` rounds it.
    pub fn pinned(&self) -> u64 {
        let (n, len) = self.registrations();
        let page = match self.memory.hugepages {
            true => HUGE_PAGE as u64,
            false => PAGE,
        };
        let each = len.max(MIN_BUFFER).div_ceil(page).saturating_mul(page);
        each.saturating_mul(u64::from(n))
    }
}

/// What one point (or a whole session: its largest point) pins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    pub bytes: u64,
    pub registrations: u64,
    pub qps: u64,
    /// The largest single registration.
    pub largest: u64,
    /// Work requests the side prepares once and keeps (the echo server: one
    /// response per client QP and window slot), heap that is not pinned but
    /// grows with `-q` x `-t` all the same.
    pub prepared_wrs: u64,
}

/// Heap one prepared single-SGE work request takes: its `SendList` and the
/// boxed WR, SGE and inline buffer it holds, with the allocator's rounding.
const PREPARED_WR: u64 = 256;

impl Footprint {
    pub fn of(sets: &[Buffers]) -> Footprint {
        sets.iter().fold(Footprint::default(), |f, b| {
            let (n, len) = b.registrations();
            Footprint {
                bytes: f.bytes.saturating_add(b.pinned()),
                registrations: f.registrations + u64::from(n),
                qps: f.qps + u64::from(b.qps),
                largest: f.largest.max(len),
                prepared_wrs: f.prepared_wrs,
            }
        })
    }

    /// The same with `wrs` prepared work requests kept beside the buffers.
    pub fn with_prepared(self, wrs: u64) -> Footprint {
        Footprint {
            prepared_wrs: self.prepared_wrs.saturating_add(wrs),
            ..self
        }
    }

    /// What the budget is charged: the pinned buffers and the prepared WRs.
    pub fn held(&self) -> u64 {
        self.bytes
            .saturating_add(self.prepared_wrs.saturating_mul(PREPARED_WR))
    }

    /// The larger of two points: a session holds one point's sets at a time.
    pub fn max(self, other: Footprint) -> Footprint {
        if other.held() > self.held() {
            other
        } else {
            self
        }
    }

    pub fn describe(&self) -> String {
        let mut d = format!(
            "{} in {} registration{} (the largest {}) for {} QP{}",
            bytes(self.bytes),
            self.registrations,
            if self.registrations == 1 { "" } else { "s" },
            bytes(self.largest),
            self.qps,
            if self.qps == 1 { "" } else { "s" },
        );
        if self.prepared_wrs > 0 {
            d.push_str(&format!(
                ", and hold {} prepared work requests ({})",
                self.prepared_wrs,
                bytes(self.prepared_wrs.saturating_mul(PREPARED_WR))
            ));
        }
        d
    }
}

/// The largest point's footprint of a session of `points` points, refusing
/// more points than any run may have before sizing any of them.
pub fn session<T>(what: &str, points: &[T], point: impl Fn(&T) -> Footprint) -> Result<Footprint> {
    if points.len() as u64 > MAX_POINTS {
        return Err(Error::usage(format!(
            "the test lists {} {what}, over the limit of {MAX_POINTS} per run",
            points.len()
        )));
    }
    Ok(points
        .iter()
        .map(point)
        .fold(Footprint::default(), Footprint::max))
}

/// `n` bytes as a person reads them: 1 GiB, 1.5 MiB, 4096 bytes.
pub fn bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if n >= size {
            let v = n as f64 / size as f64;
            return match n % size {
                0 => format!("{} {unit}", n / size),
                _ => format!("{v:.1} {unit}"),
            };
        }
    }
    format!("{n} bytes")
}

/// `serve --max-memory`: what all sessions together may pin.
#[derive(Debug)]
pub struct MemoryBudget {
    /// `None`: no bound (loopback and MPI servers, whose one client is the user).
    limit: Option<u64>,
    held: Mutex<u64>,
}

/// One session's share of the budget, given back when dropped (after the
/// session's sets, which it outlives).
#[derive(Debug)]
pub struct Reservation<'a> {
    budget: &'a MemoryBudget,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut held = self.budget.held.lock().unwrap_or_else(|p| p.into_inner());
        *held = held.saturating_sub(self.bytes);
    }
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Self {
        MemoryBudget {
            limit: Some(limit),
            held: Mutex::new(0),
        }
    }

    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    pub fn unlimited() -> Self {
        MemoryBudget {
            limit: None,
            held: Mutex::new(0),
        }
    }

    /// Refuses (exit 2 on the client) a session that alone would pin more
    /// than the budget: no wait makes it fit.
    pub fn check(&self, need: &Footprint) -> Result<()> {
        match self.limit {
            Some(limit) if need.held() > limit => Err(Error::usage(format!(
                "the test would register {}, over serve's --max-memory of {}",
                need.describe(),
                bytes(limit)
            ))),
            _ => Ok(()),
        }
    }

    /// Takes `need` from the budget for one session, or tells the client
    /// that the sessions already running hold too much of it (a busy
    /// server: trying later may work) and returns that as the error.
    pub fn admit<'a>(&'a self, ctl: &mut dyn Control, need: &Footprint) -> Result<Reservation<'a>> {
        self.check(need)?;
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(limit) = self.limit {
            if held.saturating_add(need.held()) > limit {
                let reason = format!(
                    "server busy: running sessions hold {} of serve's --max-memory of {}; this test needs {}",
                    bytes(*held),
                    bytes(limit),
                    bytes(need.held())
                );
                let _ = ctl.send(&Message::Refuse {
                    usage: false,
                    reason: reason.clone(),
                });
                return Err(Error::Peer {
                    peer: ctl.peer(),
                    what: format!("refused: {reason}"),
                });
            }
        }
        *held = held.saturating_add(need.held());
        Ok(Reservation {
            budget: self,
            bytes: need.held(),
        })
    }
}

/// The default `--max-memory`: half the host's memory (registered memory is
/// pinned, so the rest stays for the OS, the kernel and serve's own threads
/// and frames), and no more than `RLIMIT_MEMLOCK` unless this process may
/// pin past it (CAP_IPC_LOCK, as root usually has).
pub fn default_limit(
    mem_total: Option<u64>,
    memlock: Option<u64>,
    can_lock_any: bool,
) -> Option<u64> {
    let half = mem_total.map(|m| m / 2);
    let lock = memlock.filter(|_| !can_lock_any);
    match (half, lock) {
        (Some(h), Some(l)) => Some(h.min(l)),
        (h, l) => h.or(l),
    }
}

/// Parses `--max-memory SIZE`: bytes, or with a k, m, g or t suffix
/// (powers of 1024); at least one page.
pub fn parse_limit(text: &str) -> Result<u64> {
    let v = crate::spec::parse_bytes("--max-memory", text, "1048576, 512m or 4g")?;
    if v < PAGE {
        return Err(Error::usage(format!(
            "--max-memory {text}: must be at least {PAGE} bytes (one page)"
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bufs(region: usize, qps: u32, mr_per_qp: bool, hugepages: bool) -> Buffers {
        Buffers {
            region,
            qps,
            memory: MemorySpec {
                mr_per_qp,
                hugepages,
                ..MemorySpec::default()
            },
        }
    }

    #[test]
    fn registrations_round_as_memory_regions_do() {
        assert_eq!(bufs(1, 1, false, false).pinned(), 4096);
        assert_eq!(bufs(4097, 1, false, false).pinned(), 8192);
        // One registration for the set: 4 x 1000 bytes in two pages.
        assert_eq!(bufs(1000, 4, false, false).registrations(), (1, 4000));
        assert_eq!(bufs(1000, 4, false, false).pinned(), 4096);
        // One per QP: each its own page.
        assert_eq!(bufs(1000, 4, true, false).registrations(), (4, 1000));
        assert_eq!(bufs(1000, 4, true, false).pinned(), 4 * 4096);
        assert_eq!(bufs(1000, 4, true, true).pinned(), 4 * (2 << 20));
    }

    #[test]
    fn the_hostile_example_is_64_gib() {
        let f = Footprint::of(&[bufs((1 << 30) + 64, 64, true, false)]);
        assert!(f.bytes > 64 << 30, "{f:?}");
        assert_eq!((f.registrations, f.qps), (64, 64));
        let e = MemoryBudget::new(2 << 30)
            .check(&f)
            .unwrap_err()
            .to_string();
        assert!(e.contains("over serve's --max-memory of 2 GiB"), "{e}");
        assert!(e.contains("64 registrations"), "{e}");
    }

    #[test]
    fn prepared_work_requests_count_against_the_budget() {
        // The echo server at -q 4096 -t 4096: 16.7 M responses, 4 GiB of
        // heap beside a small registration.
        let f = Footprint::of(&[bufs(4096, 1, false, false)]).with_prepared(4096 * 4096);
        assert_eq!(f.held(), f.bytes + (4096 * 4096) * PREPARED_WR);
        let e = MemoryBudget::new(2 << 30)
            .check(&f)
            .unwrap_err()
            .to_string();
        assert!(e.contains("16777216 prepared work requests (4 GiB)"), "{e}");
        assert!(MemoryBudget::new(8 << 30).check(&f).is_ok());
    }

    #[test]
    fn sessions_are_sized_by_their_largest_point_and_counted() {
        let f = session("points", &[1u64, 5, 3], |&n| Footprint {
            bytes: n,
            ..Footprint::default()
        })
        .unwrap();
        assert_eq!(f.bytes, 5);
        let many = vec![0u8; MAX_POINTS as usize + 1];
        let e = session("sizes", &many, |_| Footprint::default()).unwrap_err();
        assert!(e.to_string().contains("limit of 10000"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn the_default_is_half_the_host_within_memlock() {
        let g = 1u64 << 30;
        assert_eq!(default_limit(Some(8 * g), None, false), Some(4 * g));
        assert_eq!(default_limit(Some(8 * g), Some(g), false), Some(g));
        assert_eq!(default_limit(Some(8 * g), Some(g), true), Some(4 * g));
        assert_eq!(default_limit(None, Some(g), false), Some(g));
        assert_eq!(default_limit(None, None, false), None);
    }

    #[test]
    fn limits_parse_with_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_limit("4g").unwrap(), 4 << 30);
        assert_eq!(parse_limit("512M").unwrap(), 512 << 20);
        assert_eq!(parse_limit("65536").unwrap(), 65536);
        for bad in ["", "x", "-1", "1.5g", "99999999999t", "100"] {
            let e = parse_limit(bad).unwrap_err();
            assert!(e.to_string().starts_with("--max-memory"), "{bad}: {e}");
        }
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes(4096), "4 KiB");
        assert_eq!(bytes(1 << 30), "1 GiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(bytes(100), "100 bytes");
    }
}
