//! Who this process is among the ranks, and where rank 0 is: from the
//! launcher's environment (srun, mpirun) or from --rank/--ranks/--rendezvous.
//! rdma-bench never logs in to a host itself.

use crate::cli::FabricArgs;
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    /// "slurm", "mpi" or "explicit".
    pub kind: &'static str,
    pub rank: u32,
    pub ranks: u32,
    /// Rank 0's HOST:PORT; `None` when only MPI itself can say (the mpi
    /// feature broadcasts it).
    pub rendezvous: Option<String>,
}

/// The launcher's variables a rank is told its place by, most specific
/// first: under `salloc mpirun` the Slurm variables describe mpirun's own
/// daemons, not the ranks, so MPI's win.
const MPI_RANK: &[(&str, &str)] = &[
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("PMIX_RANK", "PMIX_SIZE"),
];

pub fn detect(args: &FabricArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<Engine> {
    let rendezvous = args.rendezvous.as_deref().map(|r| with_port(r, args.port));
    let number = |name: &str, v: String| -> Result<u32> {
        v.trim().parse().map_err(|_| {
            Error::usage(format!(
                "fabric: ${name} is '{v}', not a rank number (is this the launcher's environment?)"
            ))
        })
    };
    let (kind, rank, ranks) = if let (Some(rank), Some(ranks)) = (args.rank, args.ranks) {
        ("explicit", rank, ranks)
    } else if let Some((rn, rv, nn, nv)) = MPI_RANK
        .iter()
        .find_map(|(r, n)| Some((*r, env(r)?, *n, env(n)?)))
    {
        ("mpi", number(rn, rv)?, number(nn, nv)?)
    } else if let (Some(r), Some(n)) = (env("SLURM_PROCID"), env("SLURM_NTASKS")) {
        (
            "slurm",
            number("SLURM_PROCID", r)?,
            number("SLURM_NTASKS", n)?,
        )
    } else {
        return Err(Error::usage(
            "fabric: no launcher found: start one per host with srun or mpirun, or give --rank, --ranks and --rendezvous",
        ));
    };
    if ranks == 0 || rank >= ranks {
        return Err(Error::usage(format!(
            "fabric: rank {rank} of {ranks} ranks: a rank is 0 .. ranks-1"
        )));
    }
    let rendezvous = match rendezvous {
        Some(r) => Some(r),
        None => match env("SLURM_STEP_NODELIST").or_else(|| env("SLURM_JOB_NODELIST")) {
            Some(list) if kind == "slurm" => Some(with_port(
                &first_host(&list).ok_or_else(|| {
                    Error::usage(format!(
                        "fabric: cannot read the first host of $SLURM_JOB_NODELIST '{list}'; give --rendezvous HOST"
                    ))
                })?,
                args.port,
            )),
            _ if kind == "explicit" => {
                return Err(Error::usage(
                    "--rendezvous: needed with --rank/--ranks (rank 0's host)",
                ))
            }
            _ => None,
        },
    };
    Ok(Engine {
        kind,
        rank,
        ranks,
        rendezvous,
    })
}

/// HOST or HOST:PORT (and [V6]:PORT) with the default port added.
fn with_port(target: &str, port: u16) -> String {
    let has_port = match target.rsplit_once(':') {
        Some((host, p)) => p.parse::<u16>().is_ok() && (!host.contains(':') || host.ends_with(']')),
        None => false,
    };
    if has_port {
        target.to_string()
    } else if target.contains(':') && !target.starts_with('[') {
        format!("[{target}]:{port}")
    } else {
        format!("{target}:{port}")
    }
}

/// The first host of a Slurm host list: `h1`, `h[1-3,7]`, `node[001-004],gpu1`
/// → `h1`, `h1`, `node001`. Slurm starts rank 0 on the first node of the step.
pub fn first_host(list: &str) -> Option<String> {
    let list = list.trim();
    let end = list.find([',', '[']).unwrap_or(list.len());
    let prefix = &list[..end];
    if list[end..].starts_with('[') {
        let inner = &list[end + 1..list[end..].find(']')? + end];
        let first = inner.split([',', '-']).next()?;
        if first.is_empty() || !first.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let rest_start = list[end..].find(']')? + end + 1;
        // A suffix after the bracket (h[1-2]-ib) belongs to the name.
        let suffix: String = list[rest_start..]
            .chars()
            .take_while(|c| *c != ',')
            .collect();
        Some(format!("{prefix}{first}{suffix}"))
    } else {
        (!prefix.is_empty()).then(|| prefix.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn args(extra: &[&str]) -> FabricArgs {
        let mut argv = vec!["rdma-bench", "fabric"];
        argv.extend_from_slice(extra);
        match crate::cli::parse_from(argv).unwrap().command {
            crate::cli::Command::Fabric(a) => a,
            _ => unreachable!(),
        }
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn slurm_gives_the_rank_and_rank_zeros_host() {
        let e = detect(
            &args(&[]),
            &env(&[
                ("SLURM_PROCID", "2"),
                ("SLURM_NTASKS", "3"),
                ("SLURM_JOB_NODELIST", "h[1-3]"),
            ]),
        )
        .unwrap();
        assert_eq!(
            e,
            Engine {
                kind: "slurm",
                rank: 2,
                ranks: 3,
                rendezvous: Some("h1:18516".into())
            }
        );
    }

    #[test]
    fn mpi_wins_over_the_slurm_of_its_daemons() {
        let e = detect(
            &args(&["--rendezvous", "h1:9000"]),
            &env(&[
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "3"),
                ("OMPI_COMM_WORLD_RANK", "1"),
                ("OMPI_COMM_WORLD_SIZE", "3"),
            ]),
        )
        .unwrap();
        assert_eq!((e.kind, e.rank, e.ranks), ("mpi", 1, 3));
        assert_eq!(e.rendezvous.as_deref(), Some("h1:9000"));
        let bare = detect(&args(&[]), &env(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")])).unwrap();
        assert_eq!(bare.rendezvous, None);
    }

    #[test]
    fn explicit_ranks_need_a_rendezvous_and_a_sane_rank() {
        let e = detect(&args(&["--rank", "0", "--ranks", "2"]), &env(&[])).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--rendezvous"), "{e}");
        let e = detect(
            &args(&["--rank", "2", "--ranks", "2", "--rendezvous", "a"]),
            &env(&[]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("rank 2 of 2"), "{e}");
        let e = detect(&args(&[]), &env(&[])).unwrap_err();
        assert!(e.to_string().contains("srun or mpirun"), "{e}");
        let e = detect(
            &args(&[]),
            &env(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "3")]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("$SLURM_PROCID is 'x'"), "{e}");
    }

    #[test]
    fn first_hosts_of_slurm_lists() {
        for (list, first) in [
            ("h1", Some("h1")),
            ("h[1-3]", Some("h1")),
            ("node[001-004,9],gpu1", Some("node001")),
            ("a,b", Some("a")),
            ("h[2,5]-ib", Some("h2-ib")),
            ("h[x]", None),
            ("", None),
            ("h[", None),
        ] {
            assert_eq!(first_host(list).as_deref(), first, "{list}");
        }
    }

    #[test]
    fn ports_are_added_where_missing() {
        assert_eq!(with_port("h1", 7), "h1:7");
        assert_eq!(with_port("h1:9", 7), "h1:9");
        assert_eq!(with_port("::1", 7), "[::1]:7");
        assert_eq!(with_port("[::1]:9", 7), "[::1]:9");
    }
}
