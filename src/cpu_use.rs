//! CPU use over a measured window, read at its two edges only: the host's
//! busy share from `/proc/stat` and this process's own CPU time
//! (`getrusage`, through `sys`). Nothing here runs inside a measured loop;
//! a window's edges cost a file read and one syscall each.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::sys;

/// What the CPUs did over one window, as one side measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct CpuUse {
    /// Wall time between the two readings.
    pub window_s: f64,
    /// Online CPUs of the host (`cpuN` lines of `/proc/stat`).
    pub cpus: u32,
    /// Share of all the host's CPU time that was busy (not idle or iowait),
    /// 0–100, every process counted; `None` where `/proc/stat` is unreadable.
    pub host_busy_pct: Option<f64>,
    /// CPU-seconds this process used in the window (user + system, all threads).
    pub process_cpu_s: Option<f64>,
    /// `process_cpu_s / window_s × 100`: percent of ONE CPU (a process
    /// spinning on two CPUs shows 200).
    pub process_pct: Option<f64>,
}

/// One reading of the counters behind [`CpuUse`].
#[derive(Debug, Clone, Copy)]
pub struct CpuSnapshot {
    at: Instant,
    /// (busy, total) jiffies summed over all CPUs.
    host: Option<(u64, u64)>,
    cpus: u32,
    process: Option<Duration>,
}

impl CpuSnapshot {
    pub fn take() -> Self {
        let (host, cpus) = match std::fs::read_to_string("/proc/stat") {
            Ok(text) => parse_proc_stat(&text),
            Err(_) => (None, 0),
        };
        CpuSnapshot {
            at: Instant::now(),
            host,
            cpus,
            process: sys::process_cpu_time(),
        }
    }

    /// What happened between `before` and this reading.
    pub fn since(&self, before: &CpuSnapshot) -> CpuUse {
        let window_s = self.at.saturating_duration_since(before.at).as_secs_f64();
        let host_busy_pct = match (before.host, self.host) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                Some(b1.saturating_sub(b0) as f64 * 100.0 / (t1 - t0) as f64)
            }
            _ => None,
        };
        let process_cpu_s = match (before.process, self.process) {
            (Some(p0), Some(p1)) => Some(p1.saturating_sub(p0).as_secs_f64()),
            _ => None,
        };
        CpuUse {
            window_s,
            cpus: self.cpus,
            host_busy_pct,
            process_cpu_s,
            process_pct: process_cpu_s
                .filter(|_| window_s > 0.0)
                .map(|s| s / window_s * 100.0),
        }
    }
}

/// The aggregate `cpu` line of `/proc/stat` as (busy, total) jiffies, and
/// the number of `cpuN` lines. Busy is everything but idle and iowait;
/// guest time is already inside user and nice, so it is not added again.
fn parse_proc_stat(text: &str) -> (Option<(u64, u64)>, u32) {
    let mut host = None;
    let mut cpus = 0;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("cpu") => {
                let v: Vec<u64> = fields.take(8).filter_map(|f| f.parse().ok()).collect();
                if v.len() >= 4 {
                    let idle = v[3] + v.get(4).copied().unwrap_or(0);
                    let total: u64 = v.iter().sum();
                    host = Some((total - idle, total));
                }
            }
            Some(name) if name.starts_with("cpu") => cpus += 1,
            _ => {}
        }
    }
    (host, cpus)
}

/// How long the calling thread has waited so far, runnable, for a CPU that
/// other threads held: the kernel's run delay, the second field of
/// `/proc/thread-self/schedstat`. `None` where the kernel keeps no such
/// figure. Read at a span's edges, never inside a measured loop.
pub fn thread_run_delay() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    parse_run_delay(&text)
}

/// `run_delay` (ns) out of a schedstat line: "on-CPU-ns run-delay-ns slices".
fn parse_run_delay(text: &str) -> Option<Duration> {
    let ns: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_run_delay_is_its_second_field() {
        assert_eq!(
            parse_run_delay("123 4500000000 7\n"),
            Some(Duration::from_millis(4500))
        );
        assert_eq!(parse_run_delay("123\n"), None);
        assert_eq!(parse_run_delay(""), None);
        assert_eq!(parse_run_delay("1 x 2"), None);
    }

    #[test]
    fn this_threads_run_delay_only_grows() {
        // Where the kernel keeps it (Linux with schedstats or delay accounting).
        let Some(a) = thread_run_delay() else { return };
        std::thread::yield_now();
        let b = thread_run_delay().expect("read once, readable again");
        assert!(b >= a, "{a:?} then {b:?}");
    }

    #[test]
    fn proc_stat_busy_excludes_idle_and_iowait() {
        let text = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\ncpu1 50 0 25 400 25 0 0 0 0 0\nintr 1\n";
        assert_eq!(parse_proc_stat(text), (Some((150, 1000)), 2));
    }

    #[test]
    fn a_spinning_thread_shows_as_most_of_one_cpu() {
        let before = CpuSnapshot::take();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let u = CpuSnapshot::take().since(&before);
        assert!(u.cpus >= 1);
        let pct = u.process_pct.expect("getrusage works here");
        // The machine is shared, so only a loose floor: the spin ran on a CPU.
        assert!(pct > 20.0 && pct < 100.0 * u.cpus as f64 + 10.0, "{u:?}");
        assert!(u.host_busy_pct.is_some_and(|b| (0.0..=100.0).contains(&b)));
    }
}
