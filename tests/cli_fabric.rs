//! `rdma-bench fabric`'s bad input: refused in one line naming the option,
//! exit 2, before any device or other host is touched.

mod common;

use common::refused;

#[test]
fn fabric_refuses_bad_input_in_one_line() {
    let explicit = [
        "fabric",
        "--rank",
        "0",
        "--ranks",
        "3",
        "--rendezvous",
        "127.0.0.1",
    ];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = explicit.to_vec();
        v.extend_from_slice(extra);
        v
    };
    refused(
        &with(&["--pairs", "random:x"]),
        &["--pairs 'random:x'", "random:3"],
    );
    refused(
        &with(&["--pairs", "star"]),
        &["--pairs 'star'", "all, ring or random:K"],
    );
    refused(
        &with(&["--tests", "lat,jitter"]),
        &["--tests 'jitter'", "lat, bw, rate"],
    );
    refused(&with(&["--tests", "lat,lat"]), &["--tests", "twice"]);
    refused(&with(&["--tolerance", "-5"]), &["--tolerance -5"]);
    refused(
        &with(&["--expect", "p50<1us"]),
        &["--expect 'p50<1us'", "lat_p50"],
    );
    refused(&with(&["--expect", "gbps>=1us"]), &["--expect 'gbps>=1us'"]);
    refused(&with(&["--lat-size", "0"]), &["fabric test lat"]);
    refused(&with(&["-D", "0"]), &["fabric test bw"]);
    refused(
        &[
            "fabric",
            "--rank",
            "3",
            "--ranks",
            "3",
            "--rendezvous",
            "h1",
        ],
        &["rank 3 of 3"],
    );
    refused(
        &["fabric", "--rank", "0", "--ranks", "2"],
        &["--rendezvous"],
    );
}

#[test]
fn fabric_outside_a_launcher_says_how_to_start_it() {
    let out = std::process::Command::new(common::bin())
        .arg("fabric")
        .env_remove("SLURM_PROCID")
        .env_remove("SLURM_NTASKS")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("PMI_RANK")
        .env_remove("PMIX_RANK")
        .output()
        .unwrap();
    let (_, stderr) = common::text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("srun or mpirun"), "{stderr}");
}
