//! The run conditions a file's figures were measured under, and the check
//! that refuses to compare files whose conditions differ (unless `--force`).

use crate::error::{Error, Result};
use crate::escape::printable;
use crate::results::{Record, ResultsDoc};

/// The conditions a file's figures were measured under. Files whose
/// conditions differ measure different things (one device in loopback vs
/// two hosts; a fixed count vs a fixed time; a guest vs hardware; a
/// microsecond clock vs a cycle counter), so `compare` refuses to ratio them
/// unless told to.
pub fn conditions(d: &ResultsDoc) -> Vec<(&'static str, String)> {
    let mut modes: Vec<&str> = if d.schema_version < 2 {
        // Schema 1 did not record -n or -D per point.
        vec![UNKNOWN]
    } else {
        d.results
            .iter()
            .map(|r| match r {
                Record::Latency(l) if l.live.forever => "until stopped (--forever)",
                Record::Throughput(t) if t.live.forever => "until stopped (--forever)",
                Record::Latency(l) if l.requested_s.is_some() => "duration (-D)",
                Record::Latency(_) => "iterations (-n)",
                Record::Throughput(t) if t.iters.is_some() => "iterations (-n)",
                Record::Throughput(_) => "duration (-D)",
            })
            .collect()
    };
    modes.sort_unstable();
    modes.dedup();
    vec![
        ("peer mode", d.peer.mode.clone()),
        ("iteration mode", modes.join(" and ")),
        (
            "environment",
            d.environment
                .clone()
                .unwrap_or_else(|| "none recorded".into()),
        ),
        ("clock source", d.clock_source()),
    ]
}

/// A condition an older file did not record: it matches anything.
const UNKNOWN: &str = "not recorded (schema 1)";

/// Refuses (exit 2) files whose run conditions differ from the first's,
/// naming the field.
pub(super) fn check_conditions(docs: &[(String, ResultsDoc)]) -> Result<()> {
    let Some((first_file, first)) = docs.first() else {
        return Ok(());
    };
    let base = conditions(first);
    for (file, d) in &docs[1..] {
        for ((field, a), (_, b)) in base.iter().zip(conditions(d)) {
            if *a != b && a != UNKNOWN && b != UNKNOWN {
                return Err(Error::usage(format!(
                    "compare: {field} differs: {} has '{}', {} has '{}' (their figures measure different things; --force compares them anyway)",
                    printable(first_file),
                    printable(a),
                    printable(file),
                    printable(&b)
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::compare::tests::doc;

    #[test]
    fn differing_run_conditions_are_refused_naming_the_field() {
        let a = doc("mlx5_0", 4123, &[(64, 1200.0)]);
        let mut b = doc("mlx5_0", 4123, &[(64, 1100.0)]);
        assert!(check_conditions(&[a.clone(), b.clone()]).is_ok());
        b.1.peer.mode = "tcp".into();
        let e = check_conditions(&[a.clone(), b.clone()]).unwrap_err();
        assert!(e.to_string().contains("peer mode differs"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let mut c = a.clone();
        if let Record::Latency(l) = &mut c.1.results[0] {
            l.requested_s = Some(1.0);
        }
        let e = check_conditions(&[a.clone(), c]).unwrap_err();
        assert!(e.to_string().contains("iteration mode differs"), "{e}");
        let mut d = a.clone();
        d.1.environment = Some("soft-RoCE (rxe) in a qemu guest".into());
        let e = check_conditions(&[a, d]).unwrap_err();
        assert!(e.to_string().contains("environment differs"), "{e}");
    }

    #[test]
    fn schema_1_peer_strings_read_as_modes() {
        let v1 = |peer: &str| -> crate::results::PeerDoc {
            let text = format!(r#"{{"peer": {}}}"#, serde_json::to_string(peer).unwrap());
            #[derive(serde::Deserialize)]
            struct P {
                #[serde(deserialize_with = "crate::results::peer_v1_or_v2")]
                peer: crate::results::PeerDoc,
            }
            serde_json::from_str::<P>(&text).unwrap().peer
        };
        assert_eq!(v1("loopback").mode, "loopback");
        let tcp = v1("192.0.2.1:18515");
        assert_eq!(
            (tcp.mode.as_str(), tcp.address.as_deref()),
            ("tcp", Some("192.0.2.1:18515"))
        );
        assert_eq!(v1("mpirun: rank 0 serving 2 client ranks").mode, "mpi");
    }
}
