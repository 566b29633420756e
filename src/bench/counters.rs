//! The device's own counters, an independent witness for what rdma-bench
//! counts: rxe and mlx5 expose per-port counters in sysfs
//! (`/sys/class/infiniband/DEV/ports/N/hw_counters/*` and `counters/*`).
//! They are read at the edges of a measured window only, never inside it.

use std::path::PathBuf;

/// The counter files of one device port, found once when the port opens.
#[derive(Debug, Default)]
pub struct DeviceCounters {
    files: Vec<(String, PathBuf)>,
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
        for (dir, prefix) in [("hw_counters", ""), ("counters", "port_")] {
            let Ok(entries) = std::fs::read_dir(port_dir.join(dir)) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_file() {
                    if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                        files.push((format!("{prefix}{name}"), path.clone()));
                    }
                }
            }
        }
        files.sort();
        DeviceCounters { files }
    }

    pub fn open(device: &str, port: u8) -> Self {
        Self::open_under(std::path::Path::new("/sys/class/infiniband"), device, port)
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Reads every counter (a few small sysfs reads: window edges only).
    pub fn read(&self) -> CounterSnapshot {
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
        let c = DeviceCounters::open_under(&root, "rxe9", 1);
        assert!(!c.is_empty());
        let before = c.read();
        std::fs::write(hw.join("sent_pkts"), "250\n").unwrap();
        let after = c.read();
        let d = c.delta(&before, &after);
        assert_eq!(d.get("sent_pkts"), Some(&150));
        assert_eq!(d.get("rcvd_pkts"), Some(&0));
        assert!(
            !d.contains_key("broken"),
            "unreadable counters are absent, not 0"
        );
        assert!(DeviceCounters::open_under(&root, "nodev", 1).is_empty());
        std::fs::remove_dir_all(&root).ok();
    }
}
