//! Experiment-file parsing: refusals with file, line and key, and bounded fuzzing.

use super::*;

const GOOD: &str = r#"
name = "t"
description = "two series"
[defaults]
iters = 100
[[series]]
label = "READ"
verb = "read"
size = "2..64"
[[series]]
label = "WRITE tput"
verb = "write"
metric = "throughput"
direction = "inbound"
signal_period = [1, 64]
qps = 4
"#;

#[test]
fn a_good_file_becomes_series_with_points() {
    let e = parse("good.toml", GOOD).unwrap();
    assert_eq!(e.name, "t");
    assert_eq!(e.series.len(), 2);
    assert_eq!(e.series[0].label, "READ");
    assert_eq!(e.series[0].plan.points(), 6);
    assert_eq!(e.series[1].plan.points(), 2);
    assert_eq!(e.points(), 8);
    match &e.series[0].plan {
        Plan::Latency(s) => assert_eq!(s.iters, 100, "defaults apply"),
        _ => panic!("READ is a latency series"),
    }
}

fn refused(text: &str, needles: &[&str]) {
    let e = match parse("x.toml", text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e,
    };
    assert_eq!(e.exit_code(), 2);
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "'{msg}' lacks '{n}'");
    }
}

#[test]
fn an_mpi_experiment_prints_launcher_lines() {
    let text = "name = \"m\"\nlauncher = \"mpi\"\nranks = 3\n[[series]]\nlabel = \"W\"\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nqps = [1, 4]\n";
    let e = parse("m.toml", text).unwrap();
    assert_eq!(e.launcher, Launcher::Mpi { ranks: 3 });
    let lines = e.launch_lines(Path::new("results"), &[]);
    assert_eq!(
        lines[1],
        "mpirun -np 3 rdma-bench write --tput=inbound --qps=1,4 --json results/m-1.json"
    );
    assert!(lines[2].starts_with("srun -n 3 rdma-bench write --tput=inbound"));
    refused(
        "name = \"m\"\nlauncher = \"mpi\"\n[[series]]\nverb = \"read\"\n",
        &["x.toml:2:", "ranks"],
    );
    refused(
        "name = \"m\"\nlauncher = \"slurm\"\nranks = 2\n[[series]]\nverb = \"read\"\n",
        &["x.toml:2:", "key 'launcher'"],
    );
    refused(
        "name = \"m\"\nranks = 2\n[[series]]\nverb = \"read\"\n",
        &["x.toml:2:", "key 'ranks'"],
    );
}

#[test]
fn a_file_level_cpu_list_pins_the_run() {
    let text = "name = \"m\"\ncpu = \"0,2-3\"\nlauncher = \"mpi\"\nranks = 2\n[[series]]\nlabel = \"R\"\nverb = \"read\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n";
    let e = parse("m.toml", text).unwrap();
    assert_eq!(e.cpu, Some(vec![0, 2, 3]));
    assert!(
        e.launch_lines(Path::new("results"), &[])[1].contains(" --cpu=0,2-3 "),
        "{:?}",
        e.launch_lines(Path::new("results"), &[])
    );
    assert_eq!(
        parse("m.toml", "name = \"m\"\n[[series]]\nverb = \"read\"\n")
            .unwrap()
            .cpu,
        None
    );
    refused(
        "name = \"m\"\ncpu = \"3-1\"\n[[series]]\nverb = \"read\"\n",
        &["x.toml:2:", "key 'cpu'", "backwards"],
    );
}

#[test]
fn every_shipped_config_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-configs");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let e = load(&path, &RunContext::default()).unwrap_or_else(|e| panic!("{e}"));
            assert!(e.points() > 0, "{}", path.display());
            n += 1;
        }
    }
    assert!(n >= 8, "the eight shipped experiments are there ({n})");
}

#[test]
fn errors_name_file_line_and_key() {
    refused(
        "name = \"t\"\n[[series]]\nverb = \"read\"\nsizes = 4\n",
        &["x.toml:4:", "unknown key 'sizes'"],
    );
    refused(
        "name = \"t\"\nbogus = 1\n[[series]]\nverb = \"read\"\n",
        &["x.toml:2:", "bogus"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"fly\"\n",
        &["x.toml:3:", "key 'verb'"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nsignal_period = 4\npostlist = 8\n",
        &["x.toml:7:", "key 'postlist'", "--postlist 8"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"read\"\ntransport = \"uc\"\n",
        &["x.toml:4:", "key 'transport'"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"read\"\nsize = \"x\"\n",
        &["x.toml:4:", "key 'size'"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"read\"\niters = -3\n",
        &["x.toml:4:", "key 'iters'"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"atomic\"\nop = \"mul\"\n",
        &["x.toml:4:", "key 'op'"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"write\"\ndirection = \"inbound\"\n",
        &["x.toml:4:", "key 'direction'"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"write\"\nmetric = \"speed\"\n",
        &["x.toml:4:", "key 'metric'"],
    );
    refused(
        "name = \"a b\"\n[[series]]\nverb = \"read\"\n",
        &["x.toml:1:", "key 'name'"],
    );
    refused("name = \"t\"\n", &["x.toml", "series"]);
    refused(
        "name = \"t\"\n[[series]]\nverb = \"write\"\ninline = 3\n",
        &["x.toml:4:", "key 'inline'"],
    );
    refused(
        "name = \"t\"\n[[series]]\nverb = \"write\"\nmetric = \"throughput\"\n",
        &["x.toml:4:", "key 'direction'"],
    );
    refused("name = \"t\"\n[[series]\n", &["x.toml:2:"]);
    refused(
        "name = \"t\"\n[defaults]\nlabel = \"x\"\n[[series]]\nverb = \"read\"\n",
        &["x.toml:3:", "'label' in [defaults]"],
    );
}

mod fuzz {
    use super::parse;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any text is either a valid experiment or a one-line usage error; never a panic.
        #[test]
        fn any_text_parses_or_is_refused(text in "\\PC{0,300}") {
            if let Err(e) = parse("f.toml", &text) {
                prop_assert_eq!(e.exit_code(), 2);
                prop_assert!(e.to_string().starts_with("f.toml"));
            }
        }

        /// Plausible files with random keys and values: same guarantee.
        #[test]
        fn random_series_parse_or_are_refused(
            key in "(size|iters|qps|postlist|signal_period|window|transport|op|inline|verb|bogus)",
            value in "(1|0|-1|\"2..64\"|\"rc,uc\"|\"x\"|true|3.5|\\[1, 2\\]|\"fadd\")",
            verb in "(read|write|send|echo|atomic|fly)",
            metric in "(latency|throughput|)",
        ) {
            let metric_line = if metric.is_empty() { String::new() } else { format!("metric = \"{metric}\"\ndirection = \"inbound\"\n") };
            let text = format!("name = \"p\"\n[[series]]\nverb = \"{verb}\"\n{metric_line}{key} = {value}\n");
            if let Err(e) = parse("p.toml", &text) {
                prop_assert_eq!(e.exit_code(), 2);
                prop_assert!(e.to_string().starts_with("p.toml:"), "{}", e);
            }
        }
    }
}

#[test]
fn qos_and_path_keys_reach_the_spec_in_latency_and_throughput() {
    let text = "name = \"q\"\n[defaults]\ntclass = 96\nmtu = 512\n[[series]]\nlabel = \"L\"\nverb = \"write\"\nsl = 3\n[[series]]\nlabel = \"T\"\nverb = \"send\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nflow_label = 1048575\n";
    let e = parse("q.toml", text).unwrap();
    match &e.series[0].plan {
        Plan::Latency(s) => assert_eq!(
            s.path,
            crate::spec::PathSpec {
                tclass: Some(96),
                sl: Some(3),
                flow_label: None,
                mtu: Some(512),
                connection: crate::spec::Connection::Gid,
                path_mtu: None,
            }
        ),
        _ => panic!("L is a latency series"),
    }
    match &e.series[1].plan {
        Plan::Tput(s, _) => assert_eq!(
            s.path,
            crate::spec::PathSpec {
                tclass: Some(96),
                sl: None,
                flow_label: Some(0xF_FFFF),
                mtu: Some(512),
                connection: crate::spec::Connection::Gid,
                path_mtu: None,
            }
        ),
        _ => panic!("T is a throughput series"),
    }
    refused(
        "name = \"q\"\n[[series]]\nverb = \"write\"\ntclass = 256\n",
        &["x.toml:4", "key 'tclass'", "must be 0..=255"],
    );
    refused(
        "name = \"q\"\n[[series]]\nverb = \"write\"\n\nflow_label = 1048576\n",
        &["x.toml:5", "key 'flow_label'", "must be 0..=1048575"],
    );
    refused(
        "name = \"q\"\n[[series]]\nverb = \"write\"\nmtu = \"1500\"\n",
        &["x.toml:4", "key 'mtu'", "whole number"],
    );
}

#[test]
fn bidirectional_and_srq_keys_reach_the_throughput_spec() {
    // A [defaults] srq skips the latency series it does not apply to.
    let text = "name = \"b\"\n[defaults]\nsrq = true\n[[series]]\nlabel = \"L\"\nverb = \"send\"\n[[series]]\nlabel = \"T\"\nverb = \"send\"\nmetric = \"throughput\"\ndirection = \"outbound\"\nbidirectional = true\n";
    let e = parse("b.toml", text).unwrap();
    assert!(matches!(&e.series[0].plan, Plan::Latency(_)));
    match &e.series[1].plan {
        Plan::Tput(s, _) => assert!(s.bidirectional && s.srq),
        _ => panic!("T is a throughput series"),
    }
    refused(
        "name = \"b\"\n[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nbidirectional = true\n",
        &["x.toml", "key 'bidirectional'", "use --tput outbound -b"],
    );
    refused(
        "name = \"b\"\n[[series]]\nverb = \"send\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nsrq = 1\n",
        &["x.toml:6", "key 'srq'", "true or false"],
    );
}

#[test]
fn memory_layout_keys_reach_the_throughput_spec() {
    let text = "name = \"m\"\n[defaults]\nregion = \"1m\"\noffsets = \"random\"\n[[series]]\nlabel = \"T\"\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\nmr_per_qp = true\n[[series]]\nlabel = \"B\"\nverb = \"read\"\nmetric = \"throughput\"\ndirection = \"outbound\"\nregion = 4096\noffsets = \"sequential\"\n";
    let e = parse("m.toml", text).unwrap();
    let memory = |i: usize| match &e.series[i].plan {
        Plan::Tput(s, _) => s.memory,
        _ => panic!("series {i} is a throughput series"),
    };
    assert_eq!(
        memory(0),
        crate::spec::MemorySpec {
            hugepages: false,
            mr_per_qp: true,
            region: Some(1 << 20),
            offsets: crate::spec::Offsets::Random,
        }
    );
    assert_eq!(memory(1).region, Some(4096));
    assert_eq!(memory(1).offsets, crate::spec::Offsets::Sequential);
    assert!(!memory(1).mr_per_qp);
    refused(
        "name = \"m\"\n[[series]]\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\noffsets = \"zigzag\"\n",
        &["x.toml:6", "key 'offsets'"],
    );
}

#[test]
fn cm_key_reaches_latency_and_throughput_specs() {
    let text = "name = \"c\"\n[defaults]\ncm = true\n[[series]]\nlabel = \"L\"\nverb = \"write\"\n[[series]]\nlabel = \"T\"\nverb = \"read\"\nmetric = \"throughput\"\ndirection = \"inbound\"\n[[series]]\nlabel = \"G\"\nverb = \"write\"\ncm = false\n";
    let e = parse("c.toml", text).unwrap();
    let connection = |i: usize| match &e.series[i].plan {
        Plan::Latency(s) => s.path.connection,
        Plan::Tput(s, _) => s.path.connection,
        _ => panic!("latency or throughput series"),
    };
    assert_eq!(connection(0), crate::spec::Connection::Cm);
    assert_eq!(connection(1), crate::spec::Connection::Cm);
    assert_eq!(connection(2), crate::spec::Connection::Gid);
    refused(
        "name = \"c\"\n[[series]]\nverb = \"write\"\ncm = 1\n",
        &["x.toml:4", "key 'cm'", "true or false"],
    );
}

#[test]
fn events_and_post_api_keys_reach_the_spec_in_latency_and_throughput() {
    use crate::spec::PostApi;
    let text = "name = \"e\"\n[defaults]\npost_api = \"ex\"\nevents = true\n[[series]]\nlabel = \"L\"\nverb = \"send\"\n[[series]]\nlabel = \"T\"\nverb = \"write\"\nmetric = \"throughput\"\ndirection = \"inbound\"\npost_api = \"classic\"\n[[series]]\nlabel = \"E\"\nverb = \"echo\"\n[[series]]\nlabel = \"ET\"\nverb = \"echo\"\nmetric = \"throughput\"\nreq = \"send\"\nresp = \"send\"\ntransport = \"ud\"\n";
    let e = parse("e.toml", text).unwrap();
    match &e.series[0].plan {
        Plan::Latency(s) => assert!(s.events && s.post_api == PostApi::Ex, "{s:?}"),
        _ => panic!("L is a latency series"),
    }
    match &e.series[1].plan {
        // [defaults] events reaches inbound/outbound throughput too.
        Plan::Tput(s, _) => assert!(s.events && s.post_api == PostApi::Classic, "{s:?}"),
        _ => panic!("T is a throughput series"),
    }
    // A [defaults] events skips echo, where it does not apply.
    match &e.series[2].plan {
        Plan::Latency(s) => assert!(!s.events && s.post_api == PostApi::Ex, "{s:?}"),
        _ => panic!("E is a latency series"),
    }
    // Echo throughput takes it with SEND requests and responses...
    match &e.series[3].plan {
        Plan::Tput(s, _) => assert!(s.events && s.post_api == PostApi::Ex, "{s:?}"),
        _ => panic!("ET is a throughput series"),
    }
    // ...and refuses it where a WRITE carries either.
    refused(
        "name = \"e\"\n[[series]]\nverb = \"echo\"\nmetric = \"throughput\"\nevents = true\n",
        &["--events needs --req send --resp send"],
    );
    refused(
        "name = \"e\"\n[[series]]\nverb = \"write\"\npost_api = \"fast\"\n",
        &["x.toml:4", "post_api"],
    );
    refused(
        "name = \"e\"\n[[series]]\nverb = \"write\"\nevents = 1\n",
        &["x.toml:4", "key 'events'", "true or false"],
    );
    refused(
        "name = \"e\"\n[[series]]\nverb = \"write\"\nevents = true\n",
        &["--events: a write ping-pong"],
    );
}

#[test]
fn under_load_and_rate_keys_reach_their_options() {
    let text = r#"
name = "t"
[defaults]
qps = 2
under_load = ["10%", "max"]
[[series]]
label = "WRITE"
verb = "write"
completion = true
burst = 2
[[series]]
label = "paced"
verb = "write"
metric = "throughput"
direction = "inbound"
under_load = []
rate = 0.5
"#;
    // An empty list is not a list of loads.
    assert!(parse("x.toml", text).is_err());
    let text = text.replace("under_load = []\n", "").replace(
        "[defaults]\nqps = 2\nunder_load = [\"10%\", \"max\"]\n",
        "[defaults]\nqps = 2\n",
    );
    let text = text.replace(
        "completion = true\n",
        "completion = true\nunder_load = [\"10%\", \"max\"]\n",
    );
    let e = parse("x.toml", &text).unwrap();
    match &e.series[0].plan {
        Plan::UnderLoad(s) => {
            assert_eq!(s.loads.len(), 2);
            assert_eq!(s.burst, Some(2));
            assert_eq!(
                s.background.points[0].qps, 2,
                "[defaults] qps reaches the background"
            );
        }
        _ => panic!("an under-load series"),
    }
    match &e.series[1].plan {
        Plan::Tput(s, _) => assert_eq!(s.rate.map(|r| r.mops), Some(0.5)),
        _ => panic!("a throughput series"),
    }
    let bad = text.replace("rate = 0.5", "rate = \"fast\"");
    refused(&bad, &["key 'rate'", "expected a number"]);
}

#[test]
fn every_shared_record_knob_is_an_experiment_key() {
    use crate::results::{MemoryFields, PathFields, PostingFields};
    for field in [
        PostingFields::COLUMNS,
        PathFields::COLUMNS,
        MemoryFields::COLUMNS,
    ]
    .concat()
    {
        assert!(super::is_option_key(field), "{field} is not a key");
    }
    // Each key appears once (a second entry's kind would never be read).
    for (i, (key, _)) in super::OPTIONS.iter().enumerate() {
        assert!(
            !super::option_keys().skip(i + 1).any(|k| k == *key),
            "{key} twice"
        );
    }
}
