//! How `compare` matches points across files: the key a record is matched
//! on, built from the knobs it was run with (`point_key`), and the list of
//! those knobs as the reader sees it (`MATCHED_ON`).

use crate::results::{MemoryFields, PathFields, PostingFields, Record};

/// The knobs a point is matched on: what was asked for, never what was
/// observed (echo inlines whatever fits its QPs, so its `inline` is left
/// out; S is the requested period, not the effective one). Options absent
/// from older files take their defaults through serde, so old and new files
/// line up. This is prose for the reader (printed above the table, in the
/// options' own spelling) and is kept by hand: `point_key` builds the key
/// from the record's fields, and a test checks that every field of the
/// shared posting, path and memory runs joins it.
pub const MATCHED_ON: &str = "verb, metric or direction, transport, size, --inline (not for echo), -I SIZE as asked, --imm, --op, --req/--resp, -S as asked, --threads x -q, --postlist, --window, --rate (offered Mops, --burst), --under-load (the load as asked), --forever (not --interval, which only observes the window), --cm, --events, --post-api, --sge, --tclass/--sl/--flow-label/--mtu, --hugepages, --mr-per-qp, --region, --offsets, --bidirectional, --srq";

/// The parameters that identify a point, as a readable string (also the match key).
/// The QoS and path options as requested, only those set (an older file,
/// or a run without them, ran with the defaults): " tclass 96 mtu 1024".
fn path_key(p: &PathFields) -> String {
    let mut key = String::new();
    for (name, v) in [
        ("tclass", p.tclass.map(u32::from)),
        ("sl", p.sl.map(u32::from)),
        ("flow_label", p.flow_label),
        ("mtu", p.mtu),
    ] {
        if let Some(v) = v {
            key.push_str(&format!(" {name} {v}"));
        }
    }
    key
}

/// `--bidirectional` and `--srq` as requested, only those set (files
/// before them ran with neither): " bidirectional srq".
fn bidir_srq_key(bidirectional: bool, srq: bool) -> &'static str {
    match (bidirectional, srq) {
        (false, false) => "",
        (true, false) => " bidirectional",
        (false, true) => " srq",
        (true, true) => " bidirectional srq",
    }
}

/// The memory layout as requested, only what differs from the default (an
/// older file ran with it): " hugepages mr_per_qp region 4096 offsets random".
fn memory_key(m: &MemoryFields) -> String {
    let mut key = String::new();
    if m.hugepages {
        key.push_str(" hugepages");
    }
    if m.mr_per_qp {
        key.push_str(" mr_per_qp");
    }
    if let Some(r) = m.region {
        key.push_str(&format!(" region {r}"));
    }
    if m.offsets != "fixed" {
        key.push_str(&format!(" offsets {}", m.offsets));
    }
    key
}

/// `--cm` joins the key; GID-connected points (and older files, which have
/// no `connection`) add nothing, so they line up as before.
fn cm_key(connection: &str) -> &'static str {
    if connection == "cm" {
        " cm"
    } else {
        ""
    }
}

/// How the payload was posted, as asked: `--inline` (not for echo, which
/// inlines whatever fits its QPs), `-I SIZE` (files before it, and runs
/// without it: no limit), `--imm` and `--op`: " inline inline_size 64 imm fadd".
fn payload_key(verb: &str, p: &PostingFields) -> String {
    let mut k = String::new();
    if p.inline && verb != "echo" {
        k.push_str(" inline");
    }
    if let Some(n) = p.inline_size {
        k.push_str(&format!(" inline_size {n}"));
    }
    if p.imm {
        k.push_str(" imm");
    }
    if let Some(o) = &p.op {
        k.push_str(&format!(" {o}"));
    }
    k
}

/// A non-default `--sge`, `--events` and a non-default `--post-api` in the
/// key (absent from a file written before them: 1 SGE, no events,
/// classic), so old files line up: " sge 4 events post-api ex".
fn posting_key(p: &PostingFields) -> String {
    let mut k = String::new();
    if p.sge != 1 {
        k.push_str(&format!(" sge {}", p.sge));
    }
    if p.events {
        k.push_str(" events");
    }
    if p.post_api != crate::spec::PostApi::Classic {
        k.push_str(" post-api ");
        k.push_str(p.post_api.name());
    }
    k
}

/// The offered load as asked: `--under-load`'s load for latency (" load
/// 10%"), and for throughput `--rate` as the process's offered Mops with
/// its burst (" rate 0.05 burst 1"). Absent (older files, unloaded runs):
/// nothing, so those line up with each other.
fn load_key(l: &crate::results::LatencyRecord) -> String {
    l.load
        .as_ref()
        .map(|load| format!(" load {load}"))
        .unwrap_or_default()
}

fn rate_key(t: &crate::results::TputRecord) -> String {
    match (t.offered_mops, t.burst) {
        (Some(m), b) => format!(
            " rate {m}{}",
            b.map(|b| format!(" burst {b}")).unwrap_or_default()
        ),
        (None, _) => String::new(),
    }
}

pub fn point_key(r: &Record) -> (String, &'static str, f64) {
    match r {
        Record::Latency(l) => (
            format!(
                "latency {} {} {}{}{}{}{} size {}",
                l.verb,
                l.metric,
                l.transport,
                payload_key(&l.verb, &l.posting),
                posting_key(&l.posting),
                path_key(&l.path) + &memory_key(&l.memory),
                cm_key(&l.connection),
                l.size
            ) + &load_key(l)
                + if l.live.forever { " forever" } else { "" },
            "p50_ns",
            l.stats.p50_ns,
        ),
        Record::Throughput(t) => (
            format!(
                "tput {} {} {}{}{}{}{}{} size {} S {} qps {}x{} postlist {} window {}",
                t.verb,
                t.direction,
                t.transport,
                payload_key(&t.verb, &t.posting),
                match (&t.req, &t.resp) {
                    (Some(a), Some(b)) => format!(" {a}/{b}"),
                    _ => String::new(),
                },
                posting_key(&t.posting),
                path_key(&t.path) + &memory_key(&t.memory) + bidir_srq_key(t.bidirectional, t.srq),
                cm_key(&t.connection),
                t.size,
                t.signal_period,
                t.threads,
                t.qps,
                t.postlist,
                t.window
            ) + &rate_key(t)
                + if t.live.forever { " forever" } else { "" },
            "mops",
            t.mops,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::compare::tests::doc;
    use crate::results::{ResultsDoc, TputRecord};

    #[test]
    fn bidirectional_and_srq_join_the_tput_key_only_when_set() {
        let v = serde_json::json!({
            "kind": "throughput", "verb": "send", "direction": "outbound", "transport": "rc",
            "size": 64, "inline": false, "imm": false, "op": null, "req": null, "resp": null,
            "signal_period": 64, "qps": 1, "postlist": 1, "window": 128, "threads": 1,
            "warmup_s": 0.2, "ops": 10, "elapsed_s": 1.0, "mops": 1.0, "gbps": 0.5,
            "mib_s": 61.0, "sent": 10, "received": 10, "lost": 0, "responses": null,
            "completions": 1, "per_thread": [], "per_qp_ops": [10], "group_clients": 1,
            "aggregate_mops": null, "clients": []
        });
        // A file written before the options existed reads as neither.
        let old: Record = serde_json::from_value(v).unwrap();
        let key = point_key(&old).0;
        assert!(
            !key.contains("bidirectional") && !key.contains("srq"),
            "{key}"
        );
        let mut both = old.clone();
        if let Record::Throughput(t) = &mut both {
            t.bidirectional = true;
            t.srq = true;
        }
        let k2 = point_key(&both).0;
        assert!(k2.contains(" bidirectional srq size 64"), "{k2}");
        let mut srq = old.clone();
        if let Record::Throughput(t) = &mut srq {
            t.srq = true;
        }
        let k3 = point_key(&srq).0;
        assert!(
            k3.contains(" srq size") && !k3.contains("bidirectional"),
            "{k3}"
        );
        assert_ne!(key, k3);
    }

    /// Every knob of the runs both records share (posting, path, memory)
    /// joins the key when set, on either kind of record: a new field in one
    /// of those structs that `compare` does not match on fails here.
    #[test]
    fn every_shared_knob_joins_the_key_when_set() {
        let (_, d) = doc("rxe0", 0, &[(64, 1000.0)]);
        let records = [
            serde_json::to_value(&d.results[0]).unwrap(),
            serde_json::to_value(Record::Throughput(TputRecord::example())).unwrap(),
        ];
        let knobs = [
            PostingFields::COLUMNS,
            PathFields::COLUMNS,
            MemoryFields::COLUMNS,
        ]
        .concat();
        for v in &records {
            let plain = point_key(&serde_json::from_value(v.clone()).unwrap()).0;
            for knob in &knobs {
                // The first of these values the field takes that is not what
                // the plain record has.
                let set = [
                    serde_json::json!(true),
                    serde_json::json!(7),
                    serde_json::json!("ex"),
                ]
                .into_iter()
                .filter(|x| v.get(*knob) != Some(x))
                .find_map(|x| {
                    let mut w = v.clone();
                    w.as_object_mut().unwrap().insert(knob.to_string(), x);
                    serde_json::from_value::<Record>(w).ok()
                })
                .unwrap_or_else(|| panic!("no value to set {knob} to"));
                let key = point_key(&set).0;
                assert_ne!(key, plain, "{knob} set does not change the key");
            }
        }
    }

    #[test]
    fn the_memory_layout_joins_the_key_only_when_not_the_default() {
        let (_, a) = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let mut r = a.results[0].clone();
        let old = point_key(&r).0;
        if let Record::Latency(l) = &mut r {
            l.memory.hugepages = true;
            l.memory.region = Some(4096);
            l.memory.offsets = "random".into();
        }
        let new = point_key(&r).0;
        assert!(
            new.contains(" hugepages region 4096 offsets random "),
            "{new}"
        );
        // A file written before these options reads as the default layout.
        let mut v = serde_json::to_value(&a.results[0]).unwrap();
        for k in ["hugepages", "mr_per_qp", "region", "offsets"] {
            v.as_object_mut().unwrap().remove(k);
        }
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&back).0, old);
    }

    #[test]
    fn events_and_post_api_join_the_key_only_when_not_default() {
        let (_, a) = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let mut r = a.results[0].clone();
        let old = point_key(&r).0;
        assert!(
            !old.contains("events") && !old.contains("post-api"),
            "{old}"
        );
        if let Record::Latency(l) = &mut r {
            l.posting.events = true;
            l.posting.post_api = crate::spec::PostApi::Ex;
        }
        let new = point_key(&r).0;
        assert!(new.contains(" events post-api ex "), "{new}");
        // A file written before either existed reads as no events, classic.
        let mut v = serde_json::to_value(&a.results[0]).unwrap();
        v.as_object_mut().unwrap().remove("events");
        v.as_object_mut().unwrap().remove("post_api");
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&back).0, old);
    }

    #[test]
    fn inline_size_joins_the_key_as_asked_and_old_files_have_none() {
        let (_, a) = doc("mlx5_0", 4123, &[(16, 1200.0)]);
        let mut r = a.results[0].clone();
        let old = point_key(&r).0;
        assert!(!old.contains("inline"), "{old}");
        if let Record::Latency(l) = &mut r {
            l.posting.inline = true;
            l.posting.inline_size = Some(64);
        }
        let new = point_key(&r).0;
        assert!(new.contains(" inline inline_size 64 "), "{new}");
        // --inline (no limit) and -I 64 at the same size are different runs.
        if let Record::Latency(l) = &mut r {
            l.posting.inline_size = None;
        }
        assert_ne!(point_key(&r).0, new);
        // A file from before -I has no inline_size: no limit.
        let mut v = serde_json::to_value(&a.results[0]).unwrap();
        assert!(v.get("inline_size").is_none(), "absent when not asked");
        v.as_object_mut().unwrap().remove("inline_size");
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&back).0, old);
    }

    #[test]
    fn sge_joins_the_key_only_when_not_one() {
        let (_, a) = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let mut r = a.results[0].clone();
        let old = point_key(&r).0;
        assert!(!old.contains("sge"), "{old}");
        if let Record::Latency(l) = &mut r {
            l.posting.sge = 4;
        }
        let new = point_key(&r).0;
        assert!(new.contains(" sge 4 "), "{new}");
        assert_ne!(old, new);
        // A file written before --sge existed reads as sge 1.
        let mut v = serde_json::to_value(&a.results[0]).unwrap();
        v.as_object_mut().unwrap().remove("sge");
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&back).0, old);
    }

    #[test]
    fn the_load_as_asked_joins_the_key() {
        let (_, d) = doc("rxe0", 0, &[(64, 1000.0)]);
        let plain = point_key(&d.results[0]).0;
        let mut a = d.results[0].clone();
        if let Record::Latency(l) = &mut a {
            l.load = Some("10%".into());
            l.offered_mops = Some(0.5);
            l.achieved_mops = Some(0.49);
        }
        let loaded = point_key(&a).0;
        assert_eq!(loaded, format!("{plain} load 10%"));
        // The offered Mops of a percentage differ between devices: not in the key.
        let mut b = a.clone();
        if let Record::Latency(l) = &mut b {
            l.offered_mops = Some(2.0);
        }
        assert_eq!(point_key(&b).0, loaded);
        let v = serde_json::to_value(&d.results[0]).unwrap();
        assert!(v.get("load").is_none(), "absent in an unloaded run: {v}");
    }

    #[test]
    fn path_options_join_the_key_only_when_requested() {
        let (_, d) = doc("rxe0", 0, &[(64, 1000.0)]);
        let plain = point_key(&d.results[0]).0;
        assert_eq!(plain, "latency write half_rtt rc size 64");
        // An older file (no such fields) keys like a run without the options.
        let old: ResultsDoc = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(point_key(&old.results[0]).0, plain);
        let mut q = d.clone();
        if let Record::Latency(l) = &mut q.results[0] {
            l.path.tclass = Some(96);
            l.path.mtu = Some(1024);
        }
        assert_eq!(
            point_key(&q.results[0]).0,
            "latency write half_rtt rc tclass 96 mtu 1024 size 64"
        );
        let v = serde_json::to_value(&d.results[0]).unwrap();
        assert!(v.get("tclass").is_none(), "absent when not requested: {v}");
    }

    #[test]
    fn cm_joins_the_key_and_older_files_count_as_gid() {
        let (_, d) = doc("rxe0", 0, &[(64, 1000.0)]);
        let gid = d.results[0].clone();
        let mut cm = gid.clone();
        if let Record::Latency(l) = &mut cm {
            l.connection = "cm".into();
        }
        assert!(point_key(&cm).0.contains(" cm "), "{}", point_key(&cm).0);
        assert_ne!(point_key(&gid).0, point_key(&cm).0);
        // A record from before --cm has no `connection`: it reads as "gid"
        // and lines up with a GID-connected point of a newer file.
        let mut v = serde_json::to_value(&gid).unwrap();
        v.as_object_mut().unwrap().remove("connection");
        let old: Record = serde_json::from_value(v).unwrap();
        assert_eq!(point_key(&old).0, point_key(&gid).0);
    }
}
