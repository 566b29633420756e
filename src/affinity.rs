//! Which CPU each measuring thread of a point runs on. The planning is pure
//! (allowed CPUs, the device's NUMA node, the user's `--cpu` list and the
//! thread counts in; one CPU per thread, a warning and a description out), so
//! it is tested without a machine of any particular shape; reading the NUMA
//! node from sysfs is the one impure helper. Pinning itself is
//! `sys::pin_current_thread`, called by each thread with its planned CPU.
//!
//! Defaults: the CPUs of the device's NUMA node (sysfs) that the process may
//! use, else any CPUs it may use; the client and the server threads of a
//! loopback point get different CPUs where there are enough, and the plan
//! carries a one-line warning where there are not.

use std::path::Path;

mod cpu_list;
pub use cpu_list::{check_user, format_cpu_list, parse_cpu_list, CPU_LIMIT};

/// The NUMA node a device hangs off and that node's CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaCpus {
    pub node: u32,
    pub cpus: Vec<usize>,
}

/// Reads the device's NUMA node (`<sysfs>/class/infiniband/DEV/device/numa_node`)
/// and that node's CPUs (`<sysfs>/devices/system/node/nodeN/cpulist`); `None`
/// where either is absent, unreadable or says -1 (no NUMA information, as
/// for soft-RoCE). `sysfs` is `/sys` outside tests.
pub fn device_numa_cpus(sysfs: &Path, device: &str) -> Option<NumaCpus> {
    let node_file = sysfs
        .join("class/infiniband")
        .join(device)
        .join("device/numa_node");
    let node: u32 = std::fs::read_to_string(node_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let list =
        std::fs::read_to_string(sysfs.join(format!("devices/system/node/node{node}/cpulist")))
            .ok()?;
    let cpus = cpu_list::parse_kernel_cpu_list(&list).ok()?;
    (!cpus.is_empty()).then_some(NumaCpus { node, cpus })
}

/// The plan this process's measuring threads follow, installed once by the
/// command before anything is measured.
static PLAN: std::sync::OnceLock<CpuPlan> = std::sync::OnceLock::new();

thread_local! {
    /// Added to the index of this thread's `pin` calls (see `shift_pins`).
    static PIN_SHIFT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes this thread's later `pin(side, i)` take CPU `i + by` of its side:
/// an under-load probe pins past the background's issuing threads, so
/// the two do not busy-poll on one CPU.
pub fn shift_pins(by: usize) {
    PIN_SHIFT.with(|s| s.set(by));
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    crate::sys::allowed_cpus()
}

/// Which side of a point a measuring thread belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// Makes `plan` the one the measuring threads pin to (the first one wins).
pub fn install(plan: CpuPlan) {
    let _ = PLAN.set(plan);
}

/// Pins the calling thread, the `index`-th measuring thread of `side`, to
/// its planned CPU (wrapping when a point has more threads than planned).
/// Without a plan, or where the kernel refuses, the thread stays unpinned:
/// a setup-time syscall, never inside a measured loop.
pub fn pin(side: Side, index: usize) {
    let Some(plan) = PLAN.get() else {
        return;
    };
    let index = index + PIN_SHIFT.with(|s| s.get());
    let cpus = match side {
        Side::Client => &plan.client,
        Side::Server => &plan.server,
    };
    if let Some(&cpu) = cpus.get(index % cpus.len().max(1)) {
        let _ = crate::sys::pin_current_thread(cpu);
    }
}

/// What to plan for.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// The CPUs this process may run on (`sys::allowed_cpus`).
    pub allowed: &'a [usize],
    /// The device's NUMA node and its CPUs, if sysfs says.
    pub numa: Option<&'a NumaCpus>,
    /// The user's `--cpu` list, if given.
    pub user: Option<&'a [usize]>,
    /// Measuring threads on the client side of the point in this process
    /// (0 for a `serve` process).
    pub client_threads: usize,
    /// Measuring threads on the server side in this process (loopback: the
    /// server thread(s); 0 for a client talking to a remote server).
    pub server_threads: usize,
}

/// The CPU of each measuring thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPlan {
    /// `client[i]` is client thread i's CPU.
    pub client: Vec<usize>,
    /// `server[i]` is server thread i's CPU.
    pub server: Vec<usize>,
    /// One line for the console when threads had to share CPUs or leave the
    /// device's NUMA node.
    pub warning: Option<String>,
    /// What to record as `affinity`, e.g.
    /// `client 0-1, server 2-3 (CPUs of NUMA node 0 of the device)`.
    pub description: String,
}

/// Plans one CPU per measuring thread. Errs (a usage error for the caller)
/// when `--cpu` names CPUs this process may not use, or nothing is allowed.
pub fn plan(input: PlanInput) -> Result<CpuPlan, String> {
    let PlanInput {
        allowed,
        numa,
        user,
        client_threads,
        server_threads,
    } = input;
    let threads = client_threads + server_threads;
    let mut warnings = Vec::new();
    let (pool, whence): (Vec<usize>, String) = match (user, numa) {
        (Some(user), _) => {
            check_user(user, allowed)
                .map_err(|e| format!("--cpu {}: {e}", format_cpu_list(user)))?;
            (user.to_vec(), format!("--cpu {}", format_cpu_list(user)))
        }
        (None, Some(numa)) => {
            let local: Vec<usize> = allowed
                .iter()
                .copied()
                .filter(|c| numa.cpus.contains(c))
                .collect();
            if local.len() >= threads && !local.is_empty() {
                (
                    local,
                    format!("CPUs of NUMA node {} of the device", numa.node),
                )
            } else {
                // Node-local CPUs first, then the others.
                let mut pool = local.clone();
                pool.extend(allowed.iter().copied().filter(|c| !local.contains(c)));
                warnings.push(format!(
                    "the device's NUMA node {} has {} usable CPU(s) for {threads} measuring threads; the rest run on other nodes",
                    numa.node,
                    local.len()
                ));
                (
                    pool,
                    format!(
                        "CPUs of NUMA node {} of the device first, then any",
                        numa.node
                    ),
                )
            }
        }
        (None, None) => (
            allowed.to_vec(),
            "any allowed CPUs; the device's NUMA node is unknown".into(),
        ),
    };
    if pool.is_empty() {
        return Err("no CPU is available to this process".into());
    }
    // The CPUs the pool prefers: the device's node where it spilled over.
    let preferred = match numa {
        Some(numa) if user.is_none() => pool
            .iter()
            .take_while(|c| numa.cpus.contains(c))
            .count()
            .max(1),
        _ => pool.len(),
    };
    // Thread k (clients first, then servers) takes the k-th CPU, wrapping
    // around when there are fewer CPUs than threads. A process with server
    // threads only (`serve`) walks its preferred CPUs from the other end, so
    // a client and a `serve` on one host, each planning alone, busy-poll on
    // different CPUs.
    let mut pool = pool;
    if client_threads == 0 {
        pool[..preferred].reverse();
    }
    let cpu = |k: usize| pool[k % pool.len()];
    let client: Vec<usize> = (0..client_threads).map(cpu).collect();
    // Server threads follow the clients round the pool; where the clients
    // fill it a whole number of times, server thread k would land on client
    // thread k's CPU, so the servers start one further on. Client thread k
    // and server thread k (a latency point's pair, a one-thread throughput
    // point's) then spin apart whenever there are two CPUs: a run is planned
    // for its widest series, and a shared CPU under a ping-pong costs a
    // scheduler tick per round trip.
    let skip = usize::from(
        client_threads > 0
            && pool.len() > 1
            && client_threads % pool.len() == 0
            && threads > pool.len(),
    );
    let server: Vec<usize> = (client_threads..threads).map(|k| cpu(k + skip)).collect();
    if threads > pool.len() {
        let shared = if client_threads > 0 && server_threads > 0 {
            " (client and server threads share some)"
        } else {
            ""
        };
        warnings.push(format!(
            "{threads} measuring threads on {} CPU(s) ({}): threads share CPUs{shared}, so figures may suffer",
            pool.len(),
            format_cpu_list(&pool)
        ));
    }
    let mut sides = Vec::new();
    if client_threads > 0 {
        sides.push(format!("client {}", list_in_order(&client)));
    }
    if server_threads > 0 {
        sides.push(format!("server {}", list_in_order(&server)));
    }
    let description = if sides.is_empty() {
        format!("no measuring threads ({whence})")
    } else {
        format!("{} ({whence})", sides.join(", "))
    };
    Ok(CpuPlan {
        client,
        server,
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        description,
    })
}

/// Thread i's CPU in thread order, compacted only where that order ascends
/// by one (`0-3`), so the description says which thread runs where.
fn list_in_order(cpus: &[usize]) -> String {
    if cpus.windows(2).all(|w| w[1] == w[0] + 1) {
        format_cpu_list(cpus)
    } else {
        cpus.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(allowed: &'a [usize], c: usize, s: usize) -> PlanInput<'a> {
        PlanInput {
            allowed,
            numa: None,
            user: None,
            client_threads: c,
            server_threads: s,
        }
    }

    #[test]
    fn a_serve_process_walks_its_cpus_from_the_other_end() {
        // A client and a serve on one 2-CPU host, each planning alone.
        let allowed = [0, 1];
        let client = plan(PlanInput {
            allowed: &allowed,
            numa: None,
            user: None,
            client_threads: 1,
            server_threads: 0,
        })
        .unwrap();
        let serve = plan(PlanInput {
            allowed: &allowed,
            numa: None,
            user: None,
            client_threads: 0,
            server_threads: 2,
        })
        .unwrap();
        assert_eq!(client.client, vec![0]);
        assert_eq!(serve.server, vec![1, 0]);
        // With a NUMA node that spills over, serve still prefers node-local CPUs.
        let numa = NumaCpus {
            node: 1,
            cpus: vec![2, 3],
        };
        let serve = plan(PlanInput {
            allowed: &[0, 1, 2, 3],
            numa: Some(&numa),
            user: None,
            client_threads: 0,
            server_threads: 4,
        })
        .unwrap();
        assert_eq!(serve.server[..2], [3, 2]);
    }

    #[test]
    fn loopback_client_and_server_get_different_cpus() {
        let p = plan(input(&[0, 1, 2, 3], 1, 1)).unwrap();
        assert_eq!((p.client, p.server), (vec![0], vec![1]));
        assert_eq!(p.warning, None);
        assert!(
            p.description
                .starts_with("client 0, server 1 (any allowed CPUs"),
            "{}",
            p.description
        );

        let p = plan(input(&[0, 1, 2, 3], 2, 2)).unwrap();
        assert_eq!((p.client, p.server), (vec![0, 1], vec![2, 3]));
        assert_eq!(p.warning, None);
        assert!(
            p.description.starts_with("client 0-1, server 2-3"),
            "{}",
            p.description
        );
    }

    #[test]
    fn too_few_cpus_share_and_say_so() {
        let p = plan(input(&[7], 1, 1)).unwrap();
        assert_eq!((p.client, p.server), (vec![7], vec![7]));
        let w = p.warning.unwrap();
        assert!(w.contains("2 measuring threads on 1 CPU(s) (7)"), "{w}");
        assert!(w.contains("client and server threads share"), "{w}");
        assert!(!w.contains('\n'), "one line");

        // Three CPUs, four threads: the server's second thread wraps onto CPU 0,
        // and client and server still start on different CPUs.
        let p = plan(input(&[0, 1, 2], 2, 2)).unwrap();
        assert_eq!((p.client, p.server), (vec![0, 1], vec![2, 0]));
        assert!(p.warning.is_some());
        assert!(
            p.description.starts_with("client 0-1, server 2,0"),
            "{}",
            p.description
        );

        // Two CPUs, two clients and two servers (a run planned for its widest
        // series): each server thread is apart from the client of its index.
        let p = plan(input(&[0, 1], 2, 2)).unwrap();
        assert_eq!((p.client, p.server), (vec![0, 1], vec![1, 0]));

        // One side only: sharing is still worth a warning, without the loopback remark.
        let p = plan(input(&[0, 1], 3, 0)).unwrap();
        assert_eq!((p.client, p.server), (vec![0, 1, 0], vec![]));
        let w = p.warning.unwrap();
        assert!(!w.contains("client and server"), "{w}");
    }

    #[test]
    fn numa_node_cpus_come_first_and_suffice_alone() {
        let numa = NumaCpus {
            node: 1,
            cpus: vec![4, 5, 6, 7],
        };
        let allowed = [0, 1, 2, 3, 4, 5, 6, 7];
        let p = plan(PlanInput {
            numa: Some(&numa),
            ..input(&allowed, 1, 1)
        })
        .unwrap();
        assert_eq!((p.client, p.server), (vec![4], vec![5]));
        assert_eq!(p.warning, None);
        assert_eq!(
            p.description,
            "client 4, server 5 (CPUs of NUMA node 1 of the device)"
        );
    }

    #[test]
    fn numa_node_too_small_spills_over_with_a_warning() {
        let numa = NumaCpus {
            node: 0,
            cpus: vec![0, 1],
        };
        // CPU 1 is not allowed (cgroup), so the node offers one CPU.
        let allowed = [0, 2, 3];
        let p = plan(PlanInput {
            numa: Some(&numa),
            ..input(&allowed, 1, 2)
        })
        .unwrap();
        assert_eq!((p.client, p.server), (vec![0], vec![2, 3]));
        let w = p.warning.unwrap();
        assert!(
            w.contains("NUMA node 0 has 1 usable CPU(s) for 3 measuring threads"),
            "{w}"
        );
        assert!(
            p.description.contains("NUMA node 0 of the device first"),
            "{}",
            p.description
        );
    }

    #[test]
    fn numa_node_with_no_allowed_cpu_falls_back_to_any() {
        let numa = NumaCpus {
            node: 1,
            cpus: vec![8, 9],
        };
        let p = plan(PlanInput {
            numa: Some(&numa),
            ..input(&[0, 1], 1, 1)
        })
        .unwrap();
        assert_eq!((p.client, p.server), (vec![0], vec![1]));
        assert!(p.warning.unwrap().contains("has 0 usable CPU(s)"));
    }

    #[test]
    fn the_users_list_wins_and_must_be_allowed() {
        let numa = NumaCpus {
            node: 0,
            cpus: vec![0, 1],
        };
        let user = [2, 3];
        let p = plan(PlanInput {
            numa: Some(&numa),
            user: Some(&user),
            ..input(&[0, 1, 2, 3], 1, 1)
        })
        .unwrap();
        assert_eq!((p.client, p.server), (vec![2], vec![3]));
        assert_eq!(p.description, "client 2, server 3 (--cpu 2-3)");
        assert_eq!(p.warning, None);

        let user = [1, 5, 6];
        let e = plan(PlanInput {
            user: Some(&user),
            ..input(&[0, 1, 2, 3], 1, 1)
        })
        .unwrap_err();
        assert_eq!(
            e,
            "--cpu 1,5-6: CPU 5-6 not available to this process (allowed: 0-3)"
        );

        let e = plan(PlanInput {
            user: Some(&[]),
            ..input(&[0, 1], 1, 1)
        })
        .unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn no_allowed_cpus_is_an_error_and_no_threads_is_fine() {
        assert!(plan(input(&[], 1, 0)).is_err());
        let p = plan(input(&[0], 0, 0)).unwrap();
        assert!(p.client.is_empty() && p.server.is_empty() && p.warning.is_none());
        assert!(
            p.description.starts_with("no measuring threads"),
            "{}",
            p.description
        );
    }

    #[test]
    fn numa_cpus_are_read_from_sysfs_and_absent_when_unknown() {
        let root = std::env::temp_dir().join(format!("rdma-bench-affinity-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dev = root.join("class/infiniband/mlx5_0/device");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::create_dir_all(root.join("devices/system/node/node1")).unwrap();
        std::fs::write(
            root.join("devices/system/node/node1/cpulist"),
            "8-11,24-27\n",
        )
        .unwrap();

        assert_eq!(device_numa_cpus(&root, "mlx5_0"), None, "no numa_node file");
        std::fs::write(dev.join("numa_node"), "-1\n").unwrap();
        assert_eq!(device_numa_cpus(&root, "mlx5_0"), None, "-1: unknown");
        std::fs::write(dev.join("numa_node"), "1\n").unwrap();
        assert_eq!(
            device_numa_cpus(&root, "mlx5_0"),
            Some(NumaCpus {
                node: 1,
                cpus: vec![8, 9, 10, 11, 24, 25, 26, 27]
            })
        );
        std::fs::write(dev.join("numa_node"), "2\n").unwrap();
        assert_eq!(
            device_numa_cpus(&root, "mlx5_0"),
            None,
            "node without cpulist"
        );
        assert_eq!(device_numa_cpus(&root, "rxe0"), None, "no such device");
        let _ = std::fs::remove_dir_all(&root);
    }
}
