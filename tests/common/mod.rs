//! Helpers shared by the integration tests: running the built binary and
//! reading what it wrote.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rdma-bench"))
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("the rdma-bench binary runs")
}

pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A fresh scratch directory under the system temp dir, named after this
/// test process. A test's files stay there after it ends, so a failure can be
/// looked at; the first call of a process removes the ones left by test
/// processes that are no longer running, so they never pile up.
pub fn scratch(name: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(remove_dead_processes_scratch);
    let dir = std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

const SCRATCH_PREFIX: &str = "rdma-bench-test-";

/// Removes `rdma-bench-test-<pid>-*` directories whose process has exited.
fn remove_dead_processes_scratch() {
    let tmp = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().filter(|p| p.parse::<u32>().is_ok()) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Where `read_json` collects results documents instead of validating each
/// at once: python3 with jsonschema takes tens of seconds to start in the
/// TCG guest, so scripts/test sets this (a `--out` directory of the guest)
/// and validates everything collected in one host-side call afterwards.
pub const VALIDATE_DIR_VAR: &str = "RDMA_BENCH_VALIDATE_DIR";

/// Reads a JSON file; an rdma-bench results document (`"tool": "rdma-bench"`)
/// must also validate against the committed schema, so every test that
/// reads results checks the schema for free: now, or, with
/// `$RDMA_BENCH_VALIDATE_DIR` set, by whoever validates that directory.
pub fn read_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    if value.get("tool").and_then(|t| t.as_str()) == Some("rdma-bench") {
        match std::env::var_os(VALIDATE_DIR_VAR) {
            Some(dir) if !dir.is_empty() => {
                static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Guests number their processes alike: the host's name too.
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                let name = format!(
                    "{}-{}-{n}-{}",
                    host.trim(),
                    std::process::id(),
                    path.file_name().unwrap_or_default().to_string_lossy()
                );
                let to = Path::new(&dir).join(name);
                std::fs::write(&to, &bytes)
                    .unwrap_or_else(|e| panic!("collecting {} for validation: {e}", to.display()));
            }
            _ => validate_results(&[path]),
        }
    }
    value
}

/// Validates results files against schema/results.schema.json with
/// python3's jsonschema (`scripts/validate-results`); a failure names the
/// file, the JSON path and the rule broken.
pub fn validate_results(paths: &[&Path]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/validate-results");
    let out = Command::new("python3")
        .arg(&script)
        .args(paths)
        .output()
        .unwrap_or_else(|e| panic!("python3 {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "results do not validate against schema/results.schema.json (python3 needs jsonschema: scripts/install-deps):\n{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Runs the binary with a deadline, so a hang fails the test instead of
/// stalling the suite. Stdout and stderr are drained while it runs.
pub fn run_within(args: &[&str], secs: u64) -> Output {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the rdma-bench binary runs");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Asserts the contract for bad input: exit 2 within 10 s, one line on
/// stderr containing every needle, nothing on stdout, no panic. Returns stderr.
pub fn refused(args: &[&str], needles: &[&str]) -> String {
    let out = run_within(args, 10);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {stderr}"
    );
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: '{stderr}' lacks '{n}'");
    }
    assert!(stdout.is_empty(), "{args:?}: printed to stdout: {stdout}");
    stderr
}

/// A committed results file, as JSON to derive test inputs from.
pub fn sample_results() -> serde_json::Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("results/ is committed")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("atomics") || n.starts_with("smoke")
        })
        .collect();
    files.sort();
    read_json(files.first().expect("a small committed results file"))
}

/// Writes `sample_results()` changed by `f` to `dir/name`.
pub fn results_file(dir: &Path, name: &str, f: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut v = sample_results();
    f(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    path
}

/// Makes a named pipe (FIFO) at `path`.
pub fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(st.success(), "mkfifo {}", path.display());
}

/// A run of the binary watched while it goes: its stdout line by line (to
/// wait for a line rather than sleep), its results file, and its end.
pub struct Live {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    pub json: PathBuf,
}

impl Live {
    /// Starts `rdma-bench ARGS --json <scratch file>`.
    pub fn start(name: &str, args: &[&str]) -> Live {
        use std::io::BufRead;
        use std::process::Stdio;
        let json = scratch(name).join("r.json");
        let mut child = Command::new(bin())
            .args(args)
            .arg("--json")
            .arg(&json)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rdma-bench runs");
        let (tx, lines) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        Live {
            child,
            lines,
            stderr,
            json,
        }
    }

    /// The process id (to signal it).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits (at most `secs`) for a stdout line with `needle`.
    pub fn await_line(&self, needle: &str, secs: u64) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => {}
                Err(_) => panic!("no line with '{needle}' within {secs} s"),
            }
        }
    }

    /// Waits (at most `secs`) until the results file holds `n` records
    /// (it is written whole, by a rename, after every point).
    pub fn await_records(&self, n: usize, secs: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while self.records() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "{n} records not written within {secs} s"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    fn records(&self) -> usize {
        std::fs::read(&self.json)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("results")?.as_array().map(Vec::len))
            .unwrap_or(0)
    }

    /// Waits for the end (at most `secs`, else kills it and fails): its
    /// status, its stderr, and when it ended.
    pub fn end(mut self, secs: u64) -> (std::process::ExitStatus, String, std::time::Instant) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("still running after {secs} s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let ended = std::time::Instant::now();
        (status, self.stderr.join().unwrap(), ended)
    }
}

/// Waits (at most `secs`) until this host listens on TCP `port`, read from
/// /proc/net/tcp: a probe connection would be taken for the client by a
/// server that serves one (perftest).
pub fn await_tcp_listener(port: u16, secs: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let hex = format!(":{port:04X}");
    let listening = || {
        ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .any(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.len() > 3 && w[1].ends_with(&hex) && w[3] == "0A"
                })
        })
    };
    while !listening() {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing listened on TCP port {port} within {secs} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `--validate` on latency points: the WRs a clean point must have checked, from counts the checks do not
/// share: ping-pong, each side every message it received; a SEND sink every
/// receive; READ and atomics every WR the client sent; a WRITE target (with
/// or without an immediate) the last WR's payload, after the point.
pub fn latency_validation_witness(r: &rdma_bench::results::LatencyRecord) -> u64 {
    let received = || r.server_received.expect("the server counted");
    match (r.metric.as_str(), r.verb.as_str()) {
        ("completion", "write") => 1,
        ("completion", "send") => received(),
        ("completion", _) => r.sent,
        _ => r.sent + received(),
    }
}

pub fn assert_validated_clean(what: &str, doc: &rdma_bench::results::ResultsDoc) {
    assert!(doc.latency().count() > 0, "{what}: no records");
    for r in doc.latency() {
        let v = r
            .checks
            .validation
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: no validation in {r:?}"));
        let at = format!("{what} size {}: {v:?}", r.size);
        assert_eq!((v.corrupt_wrs, v.corrupt_bytes), (0, 0), "{at}");
        assert_eq!(v.first_corrupt, None, "{at}");
        assert!(r.sent > 20, "{at}: the point ran past its warm-up");
        assert_eq!(v.validated_wrs, latency_validation_witness(r), "{at}");
        let per_wr = if r.verb == "atomic" {
            8
        } else {
            u64::from(r.size)
        };
        assert_eq!(v.validated_bytes, v.validated_wrs * per_wr, "{at}");
        assert!(!v.how.is_empty(), "{at}");
        if let Some(n) = r.server_received {
            assert_eq!(n, r.sent, "{at}: the server saw every message");
        }
        assert_eq!(r.verify_failures, 0, "{at}");
    }
}

/// The results file `profile --out DIR` wrote (any JSON file but its plan).
pub fn profile_results_in(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name().is_some_and(|n| n != "profile-plan.json")
        })
}
