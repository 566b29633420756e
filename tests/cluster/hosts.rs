//! The hosts of a soft-RoCE cluster (`scripts/softroce cluster`), as a test
//! on one of them sees them: this host, its peers, commands run on a peer
//! (the protocol of `scripts/softroce on`, spoken directly), its counters,
//! its `serve`, and the faults the test bed can put on the wire.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use super::common::{bin, text};

/// A cluster variable; missing means the test is not running in a cluster,
/// which is a failure, loudly.
fn var(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{name} is not set: cluster tests must run on a host of `scripts/softroce cluster` (see scripts/test)"
        ),
    }
}

/// This host's name (h1, h2, ...).
pub fn me() -> String {
    var("SOFTROCE_HOST")
}

/// Every host of the cluster and its address, in order.
pub fn hosts() -> Vec<(String, String)> {
    var("SOFTROCE_HOSTS")
        .split_whitespace()
        .map(|hv| {
            let (h, a) = hv
                .split_once('=')
                .expect("SOFTROCE_HOSTS holds NAME=ADDRESS");
            (h.to_string(), a.to_string())
        })
        .collect()
}

/// The RDMA device of every host (each has its own rxe0).
pub fn device() -> String {
    var("RDMA_BENCH_DEVICE")
}

/// This host's address on the wire.
pub fn my_addr() -> String {
    var("RDMA_BENCH_IPV4")
}

/// Another host of the cluster.
#[derive(Debug, Clone)]
pub struct Peer {
    pub name: String,
    pub addr: String,
}

/// The first host that is not this one.
pub fn peer() -> Peer {
    let me = me();
    let (name, addr) = hosts()
        .into_iter()
        .find(|(h, _)| *h != me)
        .expect("a cluster has another host");
    Peer { name, addr }
}

/// How long the kernel serves cached hw_counters, with room for its jiffy
/// rounding: a read this long after any other is fresh.
pub fn counter_settle() -> Duration {
    let path = format!(
        "/sys/class/infiniband/{}/ports/1/hw_counters/lifespan",
        device()
    );
    let ms: u64 = std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(10);
    Duration::from_millis(2 * ms + 11)
}

/// Parses `grep -r '' DIR` output: `DIR/NAME:VALUE` lines.
fn parse_counters(out: &str) -> BTreeMap<String, u64> {
    out.lines()
        .filter_map(|l| {
            let (path, v) = l.rsplit_once(':')?;
            let name = path.rsplit('/').next()?;
            if name == "lifespan" {
                return None;
            }
            Some((name.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// This host's device counters, read fresh by this test (not by
/// rdma-bench's code), straight from sysfs.
pub fn my_counters() -> BTreeMap<String, u64> {
    std::thread::sleep(counter_settle());
    let dir = format!("/sys/class/infiniband/{}/ports/1/hw_counters", device());
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_string();
            let v = std::fs::read_to_string(&p).ok()?.trim().parse().ok()?;
            (name != "lifespan").then_some((name, v))
        })
        .collect()
}

/// What grew between two readings.
pub fn delta(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v.wrapping_sub(*before.get(k).unwrap_or(&0))))
        .collect()
}

/// A word quoted for bash.
fn sh_quote(w: &str) -> String {
    format!("'{}'", w.replace('\'', "'\\''"))
}

/// A name for a job no other one has.
fn job_name(what: &str) -> String {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{what}-{}-{n}", std::process::id())
}

/// Writes `text` to `path` so that it appears whole (a rename).
fn write_whole(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap_or_else(|e| panic!("{}: {e}", tmp.display()));
    std::fs::rename(&tmp, path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Waits (at most `secs`) until `path` holds its line (written in one write).
fn await_whole(path: &Path, secs: u64) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(t) = std::fs::read_to_string(path) {
            if t.ends_with('\n') {
                return Some(t);
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Peer {
    // The job protocol of the peer's agent (`scripts/softroce agent`, in
    // scripts/lib/softroce-cluster.bash), spoken here directly: a job costs
    // the peer two forks and its command's exec, and this host none (each
    // process a TCG guest starts costs it a tenth of a second or more).

    fn job(&self, job: &str, ext: &str) -> PathBuf {
        jobs_dir(&self.name).join(format!("{job}.{ext}"))
    }

    /// Hands `args` to the peer's agent as job `job`, run in this working
    /// directory.
    fn submit(&self, job: &str, args: &[&str]) {
        let cwd = std::env::current_dir().expect("a working directory");
        let words: Vec<String> = args.iter().map(|a| sh_quote(a)).collect();
        let script = format!(
            "cd -- {} || exit 125\nexec {}\n",
            sh_quote(&cwd.to_string_lossy()),
            words.join(" ")
        );
        std::fs::create_dir_all(jobs_dir(&self.name)).expect("the jobs directory");
        write_whole(&self.job(job, "job"), &script);
    }

    /// Runs `args` on this peer and returns what it did.
    pub fn run(&self, args: &[&str]) -> Output {
        let job = job_name("run");
        self.submit(&job, args);
        self.wait(&job, 600)
    }

    /// Starts `args` on this peer in the background as job `job`.
    pub fn spawn(&self, job: &str, args: &[&str]) {
        self.submit(job, args);
        assert!(
            await_whole(&self.job(job, "pid"), 60).is_some(),
            "{args:?}: the agent on {} did not start it",
            self.name
        );
    }

    /// Waits up to `secs` for job `job` to end: its status and output.
    pub fn wait(&self, job: &str, secs: u64) -> Output {
        use std::os::unix::process::ExitStatusExt;
        let rc = await_whole(&self.job(job, "rc"), secs)
            .unwrap_or_else(|| panic!("job {job} on {} still running after {secs} s", self.name));
        let rc: i32 = rc.trim().parse().expect("an exit status");
        Output {
            status: std::process::ExitStatus::from_raw(rc << 8),
            stdout: std::fs::read(self.job(job, "out")).unwrap_or_default(),
            stderr: std::fs::read(self.job(job, "err")).unwrap_or_default(),
        }
    }

    /// Signals job `job` (TERM) and waits up to `secs` for it.
    pub fn kill(&self, job: &str, secs: u64) -> Output {
        self.ask_to_stop(job);
        self.wait(job, secs)
    }

    /// Asks the agent to send `job` SIGTERM; does not wait.
    fn ask_to_stop(&self, job: &str) {
        write_whole(&self.job(job, "kill"), "TERM\n");
    }

    /// Runs a shell command on this peer; a failure fails the test.
    pub fn sh(&self, script: &str) -> String {
        let out = self.run(&["bash", "-c", script]);
        let (stdout, stderr) = text(&out);
        assert!(
            out.status.success(),
            "on {}: `{script}` failed ({:?}): {stderr}{stdout}",
            self.name,
            out.status
        );
        stdout
    }

    /// The peer's device counters, read fresh by grep on the peer (one
    /// exec there). Fresh: this waits out the counters' cache first, and
    /// whatever read them on the peer (a serve at its window's edges) did
    /// so before the run that this reading follows had ended.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        std::thread::sleep(counter_settle());
        let files = format!("/sys/class/infiniband/{}/ports/1/hw_counters", device());
        let out = self.run(&["grep", "-r", "", &files]);
        let (stdout, stderr) = text(&out);
        assert!(
            out.status.success(),
            "reading {}'s counters: {stderr}",
            self.name
        );
        parse_counters(&stdout)
    }

    /// Starts `rdma-bench serve` on this peer at `port` (with `extra`
    /// options) and returns once it accepts connections.
    pub fn serve(&self, port: u16, extra: &[&str]) -> Serve {
        // A name of its own even when an earlier serve used this port: its
        // exit status, still in the jobs directory, must not read as this one's.
        let job = job_name(&format!("serve-{port}"));
        let b = bin();
        let port_s = port.to_string();
        let mut args = vec![
            b.to_str().unwrap(),
            "serve",
            "-d",
            "rxe0",
            "--bind",
            &self.addr,
            "--port",
            &port_s,
        ];
        args.extend_from_slice(extra);
        self.spawn(&job, &args);
        let serve = Serve {
            peer: self.clone(),
            job,
            port,
        };
        serve.await_listening();
        serve
    }

    /// Asks this machine for `what` (a fault the cluster harness or its wire
    /// carries out) on this peer, and waits until it is in force: the
    /// request files of `scripts/softroce wire` and `power-off`.
    fn request(&self, what: &str) {
        let dir = Path::new(&var("SOFTROCE_CLUSTER_DIR")).join("requests");
        // WHAT-HOST.ID: what the harness and the wire parse.
        let name = format!("{what}-{}.{}", self.name, job_name("t"));
        let hidden = dir.join(format!(".{name}"));
        std::fs::write(&hidden, "").unwrap_or_else(|e| panic!("{}: {e}", hidden.display()));
        std::fs::rename(&hidden, dir.join(&name)).expect("the request appears whole");
        let done = dir.join(format!("{name}.done"));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done.exists() {
            assert!(
                Instant::now() < deadline,
                "{what} {}: not done within 30 s",
                self.name
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A fault on the wire: `unplug` cuts this peer's cable, `plug` mends it.
    pub fn wire(&self, what: &str) {
        assert!(what == "unplug" || what == "plug", "{what}");
        self.request(what);
    }

    /// Kills this peer's guest at once, as a power failure would.
    pub fn power_off(&self) {
        self.request("power-off");
    }

    /// Puts `tc` qdisc `args` (e.g. `netem loss 3%`) on the peer's NIC, in
    /// place of whatever was there.
    pub fn netem(&self, args: &str) {
        let mut tc = vec!["tc", "qdisc", "replace", "dev", "eth0", "root"];
        tc.extend(args.split_whitespace());
        let out = self.run(&tc);
        assert!(
            out.status.success(),
            "{tc:?} on {}: {:?}",
            self.name,
            text(&out)
        );
    }

    /// Removes any qdisc put there by `netem`.
    pub fn clear_netem(&self) {
        let _ = self.run(&["tc", "qdisc", "del", "dev", "eth0", "root"]);
    }

    /// The active MTU of the peer's port, as `ibv_devinfo` says it.
    pub fn active_mtu(&self) -> u32 {
        let out = self.run(&["ibv_devinfo", "-d", "rxe0"]);
        text(&out)
            .0
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("active_mtu:")?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| {
                panic!(
                    "no active_mtu from {}'s ibv_devinfo: {:?}",
                    self.name,
                    text(&out)
                )
            })
    }
}

/// `serve` running on a peer; stopped (and waited for) when dropped.
pub struct Serve {
    pub peer: Peer,
    job: String,
    pub port: u16,
}

impl Serve {
    fn await_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let dir = jobs_dir(&self.peer.name);
        while std::net::TcpStream::connect((self.peer.addr.as_str(), self.port)).is_err() {
            if let Ok(rc) = std::fs::read_to_string(dir.join(format!("{}.rc", self.job))) {
                let err = std::fs::read_to_string(dir.join(format!("{}.err", self.job)));
                panic!(
                    "serve on {} exited ({}) before listening: {err:?}",
                    self.peer.name,
                    rc.trim()
                );
            }
            assert!(
                Instant::now() < deadline,
                "serve on {} never listened",
                self.peer.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What serve printed on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(jobs_dir(&self.peer.name).join(format!("{}.err", self.job)))
            .unwrap_or_default()
    }

    /// Whether the serve process is still running.
    pub fn running(&self) -> bool {
        !jobs_dir(&self.peer.name)
            .join(format!("{}.rc", self.job))
            .exists()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.running() {
            // Never panic here: a panic while a failed test unwinds aborts
            // the whole test binary, and the tests after it never run.
            self.peer.ask_to_stop(&self.job);
            if await_whole(&self.peer.job(&self.job, "rc"), 30).is_none() {
                eprintln!(
                    "job {} on {} still running 30 s after TERM",
                    self.job, self.peer.name
                );
            }
        }
    }
}

/// Where a host's jobs keep their output (the cluster's shared directory).
pub fn jobs_dir(host: &str) -> PathBuf {
    Path::new(&var("SOFTROCE_CLUSTER_DIR"))
        .join("jobs")
        .join(host)
}
