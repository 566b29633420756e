//! The Slurm of a `scripts/softroce cluster --slurm` (run on h1 of three
//! hosts): srun reaches every host's own rxe0, Open MPI's mpirun inside an
//! allocation carries the existing MPI mode across hosts (checked against
//! each host's own counters, read straight from sysfs), and sbatch --wait
//! runs a batch script whose output comes back.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use super::common::{read_json, text};
use super::hosts::{delta, device, hosts, me, my_counters, Peer};

/// A Slurm command under coreutils' timeout, so a hung step fails the test.
fn slurm(secs: u64, args: &[&str]) -> Output {
    assert!(
        std::env::var_os("SLURM_CONF").is_some(),
        "SLURM_CONF is not set: run on h1 of `scripts/softroce cluster --hosts 3 --slurm` (see scripts/test)"
    );
    Command::new("timeout")
        .arg(secs.to_string())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn ok(what: &str, out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what} failed ({:?}): {stderr}{stdout}",
        out.status
    );
    stdout
}

/// A file every host can write and this one read back.
fn shared(name: &str) -> PathBuf {
    let dir = PathBuf::from(std::env::var("SOFTROCE_CLUSTER_DIR").expect("SOFTROCE_CLUSTER_DIR"));
    dir.join(format!("slurm-test-{}-{name}", std::process::id()))
}

fn three_hosts() -> Vec<(String, String)> {
    let h = hosts();
    assert_eq!(h.len(), 3, "these tests want a cluster of 3 hosts: {h:?}");
    assert_eq!(me(), "h1", "these tests run on h1");
    h
}

#[test]
#[ignore = "needs the soft-RoCE cluster with --slurm: run via scripts/test"]
fn srun_runs_one_task_on_each_host_with_its_own_rxe0() {
    let h = three_hosts();
    let gid = format!("/sys/class/infiniband/{}/ports/1/gids/1", device());
    let script = format!("echo \"$SLURM_PROCID $(hostname) $(cat {gid})\"");
    let out = slurm(
        120,
        &["srun", "-N3", "--ntasks-per-node=1", "bash", "-c", &script],
    );
    let stdout = ok("srun -N3", &out);
    let mut seen: BTreeMap<u32, (String, String)> = BTreeMap::new();
    for l in stdout.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(w.len(), 3, "a line of rank, host, GID: {l:?}");
        let rank = w[0]
            .parse()
            .unwrap_or_else(|_| panic!("SLURM_PROCID in {l:?}"));
        assert!(
            seen.insert(rank, (w[1].into(), w[2].into())).is_none(),
            "rank twice: {stdout}"
        );
    }
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2],
        "{stdout}"
    );
    let mut names: Vec<&str> = seen.values().map(|(n, _)| n.as_str()).collect();
    names.sort();
    let mut want: Vec<&str> = h.iter().map(|(n, _)| n.as_str()).collect();
    want.sort();
    assert_eq!(names, want, "one task on each host: {stdout}");
    for (name, g) in seen.values() {
        let addr = &h.iter().find(|(n, _)| n == name).unwrap().1;
        let last: u32 = addr.rsplit('.').next().unwrap().parse().unwrap();
        assert!(
            g.ends_with(&format!("0a62:{last:04x}")),
            "{name}'s rxe0 GID {g} is its own address {addr}"
        );
    }
}

#[test]
#[ignore = "needs the soft-RoCE cluster with --slurm: run via scripts/test"]
fn mpirun_under_salloc_runs_the_mpi_mode_across_hosts() {
    let h = three_hosts();
    let mpi_bin = std::env::var("RDMA_BENCH_MPI_BIN")
        .expect("RDMA_BENCH_MPI_BIN: the --features mpi binary (scripts/test builds it)");
    let peers: Vec<Peer> = h[1..]
        .iter()
        .map(|(n, a)| Peer {
            name: n.clone(),
            addr: a.clone(),
        })
        .collect();
    let json = shared("mpi.json");
    let json_s = json.to_string_lossy().into_owned();
    let before_me = my_counters();
    let before: Vec<_> = peers.iter().map(|p| p.counters()).collect();
    // --map-by node: rank 0 (the server) on h1, one client on each other host.
    let out = slurm(
        240,
        &[
            "salloc",
            "-N3",
            "--ntasks-per-node=1",
            "mpirun",
            "-np",
            "3",
            "--map-by",
            "node",
            &mpi_bin,
            "write",
            "--tput",
            "inbound",
            "-s",
            "1024",
            "-D",
            "0.5",
            "-d",
            &device(),
            "--json",
            &json_s,
        ],
    );
    ok("salloc mpirun -np 3 write --tput", &out);
    let grown_me = delta(&before_me, &my_counters());
    let grown: Vec<_> = peers
        .iter()
        .zip(&before)
        .map(|(p, b)| delta(b, &p.counters()))
        .collect();

    let doc = read_json(&json);
    let text = doc.to_string();
    assert_eq!(doc["peer"]["mode"], "mpi", "{}", doc["peer"]);
    assert_eq!(
        doc["peer"]["host"], "h1",
        "rank 0 serves from h1: {}",
        doc["peer"]
    );
    // Inbound: both clients issue into rank 0 together, one group, and
    // each point holds both clients' figures and their sum.
    for r in doc["results"].as_array().expect("records") {
        assert_eq!(r["clients"].as_array().map(Vec::len), Some(2), "{r}");
        assert!(r["aggregate_mops"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    }
    for p in &peers {
        assert!(
            text.contains(&format!("on {} (", p.name)),
            "the results name client {}: {text}",
            p.name
        );
    }
    // The witness: h1's own rxe received what the two clients' own rxes
    // sent (RC WRITEs; h1 sends only ACKs back), each client sent some.
    let c =
        |m: &BTreeMap<String, u64>, k: &str| *m.get(k).unwrap_or_else(|| panic!("no {k} in {m:?}"));
    let sent: u64 = grown.iter().map(|g| c(g, "sent_pkts")).sum();
    for (p, g) in peers.iter().zip(&grown) {
        assert!(c(g, "sent_pkts") > 0, "{} sent nothing: {g:?}", p.name);
    }
    let rcvd = c(&grown_me, "rcvd_pkts");
    assert!(
        rcvd <= sent && rcvd * 100 >= sent * 99,
        "h1 received {rcvd} packets, the clients sent {sent}"
    );
}

#[test]
#[ignore = "needs the soft-RoCE cluster with --slurm: run via scripts/test"]
fn sbatch_wait_runs_a_batch_script_and_its_output_comes_back() {
    three_hosts();
    // The shipped fabric script's #SBATCH lines are a valid request.
    ok(
        "sbatch --test-only scripts/fabric.sbatch",
        &slurm(60, &["sbatch", "--test-only", "scripts/fabric.sbatch"]),
    );
    let script = shared("hostname.sbatch");
    let output = shared("hostname.out");
    std::fs::write(
        &script,
        "#!/bin/bash\n#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\nsrun hostname\n",
    )
    .expect("the batch script");
    let out_arg = format!("--output={}", output.display());
    ok(
        "sbatch --wait",
        &slurm(
            120,
            &["sbatch", "--wait", &out_arg, &script.to_string_lossy()],
        ),
    );
    let got = std::fs::read_to_string(&output).expect("the batch output file");
    let mut names: Vec<&str> = got.lines().collect();
    names.sort();
    assert_eq!(names, ["h1", "h2", "h3"], "{got}");
}
