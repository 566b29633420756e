//! The device's own counters, an independent witness for what rdma-bench
//! counts: rxe and mlx5 expose per-port counters in sysfs
//! (`/sys/class/infiniband/DEV/ports/N/hw_counters/*` and `counters/*`).
//! They are read at the edges of a measured window only, never inside it.
//!
//! The kernel caches `hw_counters` for `lifespan` milliseconds (rxe: 12):
//! a read within that time of the previous one returns the old values. The
//! cache is kept while `jiffies <= refreshed + lifespan` (in jiffies), so it
//! lives up to one jiffy longer than `lifespan` says, and a jiffy is at
//! most `lifespan` (the kernel rounds the lifespan up to whole jiffies). So a
//! read waits until twice the lifespan (plus a millisecond) has passed since
//! this port's previous read, and the port is read once when it opens: every
//! reading is fresh, however short the window between two of them, as long
//! as no other process reads the same port meanwhile.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The counter files of one device port, found once when the port opens.
#[derive(Debug, Default)]
pub struct DeviceCounters {
    files: Vec<(String, PathBuf)>,
    /// How long the kernel caches the values (hw_counters/lifespan).
    lifespan: Duration,
    last_read: Mutex<Option<Instant>>,
}

/// One reading of every counter; `None` where a file could not be read.
#[derive(Debug, Clone, Default)]
pub struct CounterSnapshot(Vec<Option<u64>>);

pub use crate::report::CounterDeltas;

impl DeviceCounters {
    /// Lists the counters of `device` port `port` under `root` (normally
    /// `/sys/class/infiniband`). A device without counters has none.
    pub fn open_under(root: &std::path::Path, device: &str, port: u8) -> Self {
        let port_dir = root.join(device).join("ports").join(port.to_string());
        let mut files = Vec::new();
        // A setting, not a counter: how long values are cached, in ms.
        let lifespan = std::fs::read_to_string(port_dir.join("hw_counters/lifespan"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map_or(Duration::ZERO, Duration::from_millis);
        for (dir, prefix) in [("hw_counters", ""), ("counters", "port_")] {
            let Ok(entries) = std::fs::read_dir(port_dir.join(dir)) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_file() {
                    match path.file_name().and_then(|n| n.to_str()) {
                        Some("lifespan") | None => {}
                        Some(name) => files.push((format!("{prefix}{name}"), path.clone())),
                    }
                }
            }
        }
        files.sort();
        let counters = DeviceCounters {
            files,
            lifespan,
            last_read: Mutex::new(None),
        };
        // Whatever another process last read is cached now; this read starts
        // the wait, so the first window's opening read is fresh too.
        if !counters.is_empty() {
            counters.read();
        }
        counters
    }

    pub fn open(device: &str, port: u8) -> Self {
        Self::open_under(std::path::Path::new("/sys/class/infiniband"), device, port)
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// How long after a read the kernel may still serve it from its cache.
    pub fn cache_life(&self) -> Duration {
        2 * self.lifespan + Duration::from_millis(1)
    }

    /// Reads every counter (a few small sysfs reads: window edges only),
    /// first waiting out what remains of the kernel's cache lifespan.
    pub fn read(&self) -> CounterSnapshot {
        let mut last = self.last_read.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = *last {
            let fresh_at = t + self.cache_life();
            let now = Instant::now();
            if fresh_at > now {
                std::thread::sleep(fresh_at - now);
            }
        }
        *last = Some(Instant::now());
        CounterSnapshot(
            self.files
                .iter()
                .map(|(_, p)| std::fs::read_to_string(p).ok()?.trim().parse().ok())
                .collect(),
        )
    }

    /// What grew between two readings of this device's counters.
    pub fn delta(&self, before: &CounterSnapshot, after: &CounterSnapshot) -> CounterDeltas {
        self.files
            .iter()
            .zip(before.0.iter().zip(&after.0))
            .filter_map(|((name, _), (b, a))| {
                Some((name.clone(), a.as_ref()?.wrapping_sub(*b.as_ref()?)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_name_each_counter_and_leave_out_unreadable_ones() {
        let root = std::env::temp_dir().join(format!("rb-counters-{}", std::process::id()));
        let hw = root.join("rxe9/ports/1/hw_counters");
        std::fs::create_dir_all(&hw).unwrap();
        std::fs::write(hw.join("sent_pkts"), "100\n").unwrap();
        std::fs::write(hw.join("rcvd_pkts"), "7\n").unwrap();
        std::fs::write(hw.join("broken"), "n/a\n").unwrap();
        std::fs::write(hw.join("lifespan"), "30\n").unwrap();
        let c = DeviceCounters::open_under(&root, "rxe9", 1);
        assert!(!c.is_empty());
        let t = Instant::now();
        let before = c.read();
        assert!(
            t.elapsed() >= Duration::from_millis(50),
            "the read at open starts the wait: the first reading is fresh too"
        );
        std::fs::write(hw.join("sent_pkts"), "250\n").unwrap();
        let t = Instant::now();
        let after = c.read();
        assert!(
            t.elapsed() >= Duration::from_millis(55),
            "waits out twice the cache lifespan, for the kernel's jiffy rounding"
        );
        let d = c.delta(&before, &after);
        assert_eq!(d.get("sent_pkts"), Some(&150));
        assert_eq!(d.get("rcvd_pkts"), Some(&0));
        assert!(
            !d.contains_key("broken"),
            "unreadable counters are absent, not 0"
        );
        assert!(!d.contains_key("lifespan"), "a setting, not a counter");
        assert!(DeviceCounters::open_under(&root, "nodev", 1).is_empty());
        std::fs::remove_dir_all(&root).ok();
    }
}
