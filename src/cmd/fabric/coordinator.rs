//! Rank 0: the ranks join, the schedule is drawn over their endpoints,
//! and each round's pairs are measured both ways, every rank doing one
//! order at a time. A rank that goes away fails what it was doing and
//! every later entry it is in; every other pair is still measured.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, TcpListener};
use std::time::{Duration, Instant};

use crate::cli::FabricArgs;
use crate::connect::{Control, TcpChannel};
use crate::error::{Error, Result};
use crate::fabric::doc::{
    EndpointRef, FabricAttempt, FabricDoc, FabricEndpoint, FabricEntry, FabricHost,
};
use crate::fabric::schedule::Schedule;

use super::wire::{Join, Measured, Order};

/// Rank 0's connection to one rank.
struct Link {
    ch: Option<TcpChannel>,
    host: String,
    /// Why the rank is out of the run, once it is.
    failed: Option<String>,
    /// The entry it is measuring, and by when it must say.
    busy: Option<(usize, Instant)>,
    queue: VecDeque<usize>,
}

impl Link {
    fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            self.failed = Some(why);
        }
        // A rank that is still there is told to stop, not left to find
        // its connection gone.
        if let Some(mut ch) = self.ch.take() {
            let _ = ch.send_value("done", &Order::Done);
        }
    }
}

/// Takes joins on `listener` until every rank has joined or `timeout`.
fn gather(
    listener: &TcpListener,
    ranks: u32,
    timeout: f64,
) -> Result<Vec<(Option<Join>, Option<TcpChannel>)>> {
    let mut got: Vec<(Option<Join>, Option<TcpChannel>)> =
        (0..ranks).map(|_| (None, None)).collect();
    let deadline = Instant::now() + Duration::from_secs_f64(timeout);
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("making the rendezvous listener non-blocking", e))?;
    while got.iter().any(|(j, _)| j.is_none()) && Instant::now() < deadline {
        if crate::abort::aborted() {
            return Err(Error::Interrupted);
        }
        let Ok((stream, from)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let _ = stream.set_nonblocking(false);
        let joined =
            TcpChannel::new(stream, Duration::from_secs_f64(timeout)).and_then(|mut ch| {
                ch.recv_value::<Join>(Duration::from_secs_f64(timeout))
                    .map(|j| (j, ch))
            });
        match joined {
            Ok((j, ch)) if j.rank < ranks && got[j.rank as usize].0.is_none() => {
                let r = j.rank as usize;
                got[r] = (Some(j), Some(ch));
            }
            Ok((j, _)) => eprintln!(
                "fabric: rank 0: ignored a join from {from} as rank {} of {} (a rank is joined once, below {ranks})",
                j.rank, j.ranks
            ),
            Err(e) => eprintln!("fabric: rank 0: a connection from {from} did not join: {e}"),
        }
    }
    Ok(got)
}

/// The address other ranks reach `ip`'s serve at: a rank that reached
/// rank 0 over loopback (rank 0's own) is given the address the other
/// ranks reached rank 0 at.
fn reachable(ip: IpAddr, rank_zero_seen_as: Option<IpAddr>) -> IpAddr {
    match rank_zero_seen_as {
        Some(other) if ip.is_loopback() => other,
        _ => ip,
    }
}

pub struct Plan<'a> {
    pub args: &'a FabricArgs,
    pub ranks: u32,
    pub tests: &'a [String],
    /// Σ of the throughput tests' durations, for each entry's deadline.
    pub measured_s: f64,
}

/// Runs the whole check and returns the document (verdicts not yet drawn).
/// `save` is called after every round with the document so far.
pub fn run(
    plan: &Plan,
    listener: &TcpListener,
    mut doc: FabricDoc,
    schedule_of: impl Fn(u32) -> Schedule,
    slow_of: &dyn Fn(&FabricDoc) -> Vec<usize>,
    save: &mut dyn FnMut(&FabricDoc) -> Result<()>,
) -> Result<FabricDoc> {
    let a = plan.args;
    let joins = gather(listener, plan.ranks, a.timeout)?;
    let rank_zero_seen_as = joins
        .iter()
        .filter_map(|(_, ch)| ch.as_ref())
        .filter_map(|ch| ch.local_addr().map(|s| s.ip()))
        .find(|ip| !ip.is_loopback());
    let mut links = Vec::new();
    for (r, (join, ch)) in joins.into_iter().enumerate() {
        let mut link = Link {
            ch,
            host: format!("rank {r}"),
            failed: None,
            busy: None,
            queue: VecDeque::new(),
        };
        match join {
            None => link.fail(format!(
                "rank {r} did not join within {} s (--timeout): it exited first, or cannot reach rank 0",
                a.timeout
            )),
            Some(j) => {
                link.host = j.host.clone();
                let peer_ip = link.ch.as_ref().and_then(|c| c.peer_ip());
                if let Some(e) = &j.error {
                    link.fail(e.clone());
                } else if j.tool_version != env!("RDMA_BENCH_VERSION") || j.tests != plan.tests {
                    link.fail(format!(
                        "started as rdma-bench {} with tests {:?}, not rank 0's {} with {:?}",
                        j.tool_version,
                        j.tests,
                        env!("RDMA_BENCH_VERSION"),
                        plan.tests
                    ));
                } else if let Some(ip) = peer_ip {
                    let ip = reachable(ip, rank_zero_seen_as);
                    for e in &j.endpoints {
                        doc.endpoints.push(FabricEndpoint {
                            index: doc.endpoints.len() as u32,
                            label: format!("{}/{}", j.host, e.device),
                            rank: r as u32,
                            host: j.host.clone(),
                            device: e.device.clone(),
                            port: e.port,
                            gid: e.gid.clone(),
                            active_mtu: e.active_mtu,
                            serve: std::net::SocketAddr::new(ip, e.serve_port).to_string(),
                        });
                    }
                }
            }
        }
        links.push(link);
    }
    // Two ranks on one host (srun --ntasks-per-node=2) get the rank in their names.
    let shared: Vec<bool> = doc
        .endpoints
        .iter()
        .map(|e| doc.endpoints.iter().filter(|x| x.label == e.label).count() > 1)
        .collect();
    for (e, shared) in doc.endpoints.iter_mut().zip(shared) {
        if shared {
            e.label = format!("{}#{}/{}", e.host, e.rank, e.device);
        }
    }
    let schedule = schedule_of(doc.endpoints.len() as u32);
    doc.covers = schedule.covers();
    doc.rounds = schedule.rounds();
    if !a.quiet {
        eprintln!(
            "fabric: {} ranks, {} endpoints; {}",
            plan.ranks,
            doc.endpoints.len(),
            doc.covers
        );
        for (r, l) in links.iter().enumerate() {
            if let Some(why) = &l.failed {
                eprintln!("fabric: rank {r} ({}) failed: {why}", l.host);
            }
        }
    }
    // A rank that neither answers nor closes its connection (a dead host is
    // noticed by the connection's --timeout) is failed after this long: ten
    // times what its tests should take, at 10 ms a latency sample, with a
    // --timeout of setup each. Its own waits are bounded far below it.
    let budget = Duration::from_secs_f64(
        10.0 * (plan.measured_s + (plan.tests.len() as f64 + 1.0) * a.timeout),
    );
    for round in 0..schedule.rounds() {
        let first = doc.entries.len();
        let pairs = schedule.round(round);
        for &(x, y) in &pairs {
            for (from, to) in [(x, y), (y, x)] {
                doc.entries.push(entry(&doc.endpoints, round, from, to));
            }
        }
        // The first direction of each pair now; the second once it is done.
        for i in (first..doc.entries.len()).step_by(2) {
            let r = doc.endpoints[doc.entries[i].from.endpoint as usize].rank as usize;
            links[r].queue.push_back(i);
        }
        drive(&mut doc, &mut links, first, budget);
        save(&doc)?;
        if !a.quiet {
            eprintln!(
                "{}",
                super::progress::round_line(&doc, round, schedule.rounds(), first)
            );
        }
    }
    recheck(&mut doc, &mut links, budget, a.recheck, slow_of, a.quiet);
    save(&doc)?;
    for l in links.iter_mut() {
        if let Some(ch) = l.ch.as_mut() {
            let _ = ch.send_value("done", &Order::Done);
        }
    }
    for (r, l) in links.iter().enumerate() {
        doc.hosts.push(FabricHost {
            rank: r as u32,
            host: l.host.clone(),
            state: if l.failed.is_some() { "failed" } else { "ok" }.into(),
            error: l.failed.clone(),
        });
    }
    Ok(doc)
}

/// Measures the entries `slow_of` names again, one at a time so that no
/// other pair shares their hosts, each up to `times` more times; a pair
/// whose host failed is left as it is. Ends when no slow entry has an
/// attempt left: a figure can only get better, so this is bounded.
fn recheck(
    doc: &mut FabricDoc,
    links: &mut [Link],
    budget: Duration,
    times: u32,
    slow_of: &dyn Fn(&FabricDoc) -> Vec<usize>,
    quiet: bool,
) {
    // Each rechecked entry's latest attempt as it was measured, before the
    // fold: the one that joins `earlier` when the entry is measured again.
    let mut last: HashMap<usize, FabricAttempt> = HashMap::new();
    loop {
        let due: Vec<usize> = slow_of(doc)
            .into_iter()
            .filter(|&i| doc.entries[i].earlier.len() < times as usize)
            .filter(|&i| {
                let e = &doc.entries[i];
                [e.from.endpoint, e.to.endpoint].iter().all(|&x| {
                    let r = doc.endpoints[x as usize].rank as usize;
                    links[r].failed.is_none()
                })
            })
            .collect();
        if due.is_empty() {
            return;
        }
        for i in due {
            let measured = doc.measure_again(i, last.remove(&i), |doc| {
                let e = &mut doc.entries[i];
                e.state = "pending".into();
                let r = doc.endpoints[e.from.endpoint as usize].rank as usize;
                links[r].queue.push_back(i);
                drive(doc, links, i, budget);
            });
            last.insert(i, measured);
            if !quiet {
                eprintln!("{}", super::progress::recheck_line(doc, i));
            }
        }
    }
}

fn entry(endpoints: &[FabricEndpoint], round: u32, from: u32, to: u32) -> FabricEntry {
    let r = |i: u32| {
        let e = &endpoints[i as usize];
        EndpointRef {
            endpoint: i,
            host: e.host.clone(),
            device: e.device.clone(),
            gid: e.gid.clone(),
        }
    };
    FabricEntry {
        round,
        from: r(from),
        to: r(to),
        state: "pending".into(),
        ..Default::default()
    }
}

/// Measures the round's entries from `first` on: hands each rank its next
/// order when it is free, takes what comes back, and fails what a rank
/// that went away (or did not answer in `budget`) was in.
fn drive(doc: &mut FabricDoc, links: &mut [Link], first: usize, budget: Duration) {
    loop {
        let mut moved = false;
        for r in 0..links.len() {
            // Hand out orders.
            while links[r].busy.is_none() {
                let Some(i) = links[r].queue.pop_front() else {
                    break;
                };
                let to = doc.endpoints[doc.entries[i].to.endpoint as usize].clone();
                let from = doc.entries[i].from.endpoint as usize;
                let to_rank = to.rank as usize;
                if let Some(why) = links[r]
                    .failed
                    .clone()
                    .or_else(|| links[to_rank].failed.clone())
                {
                    let blamed = if links[r].failed.is_some() {
                        r
                    } else {
                        to_rank
                    };
                    let host = links[blamed].host.clone();
                    finish(
                        doc,
                        links,
                        i,
                        failed(host.clone(), format!("not measured: {host} failed: {why}")),
                    );
                    moved = true;
                    continue;
                }
                let device = doc.endpoints[..from]
                    .iter()
                    .filter(|e| e.rank == r as u32)
                    .count() as u32;
                let order = Order::Measure {
                    entry: i as u32,
                    device,
                    serve: to.serve.clone(),
                    peer_host: to.host.clone(),
                };
                let sent = links[r]
                    .ch
                    .as_mut()
                    .map(|ch| ch.send_value("measure", &order));
                match sent {
                    Some(Ok(())) => links[r].busy = Some((i, Instant::now() + budget)),
                    Some(Err(e)) => {
                        links[r].fail(format!("its rank went away: {e}"));
                        links[r].queue.push_front(i);
                    }
                    None => {
                        links[r].fail("no connection to its rank".into());
                        links[r].queue.push_front(i);
                    }
                }
                moved = true;
            }
            // Take what came back.
            let Some((i, by)) = links[r].busy else {
                continue;
            };
            let polled = match links[r].ch.as_mut() {
                Some(ch) => ch.poll_value::<Measured>(),
                None => Err(Error::Interrupted),
            };
            match polled {
                Ok(Some(m)) if m.entry as usize == i => {
                    links[r].busy = None;
                    let to_rank = doc.endpoints[doc.entries[i].to.endpoint as usize].rank as usize;
                    let mut blame = None;
                    if m.error.is_some() {
                        // Is the other side's rank gone? Then it is to blame.
                        // (Read nothing: a message of its own stays for its turn. Its
                        // end, if it died, came before the driver noticed.)
                        let fd = links[to_rank].ch.as_ref().and_then(|c| c.hangup_fd());
                        if let Some(gone) = fd
                            .and_then(|fd| crate::sys::wait_hangup(fd, Duration::from_millis(100)))
                        {
                            let how = match gone {
                                crate::sys::Hangup::Closed => "closed its connection".to_string(),
                                crate::sys::Hangup::Failed(_, e) => e,
                            };
                            links[to_rank].fail(format!("its rank went away ({how})"));
                        }
                        blame = links[to_rank]
                            .failed
                            .as_ref()
                            .map(|why| (links[to_rank].host.clone(), why.clone()));
                    }
                    // The measuring side names its peer by address; when the
                    // peer's rank is gone, say so by host name too.
                    let error = match (&m.error, &blame) {
                        (Some(e), Some((host, why))) => Some(format!("{e}; {host} failed: {why}")),
                        (e, _) => e.clone(),
                    };
                    let blame = blame.map(|(host, _)| host);
                    finish(
                        doc,
                        links,
                        i,
                        Outcome {
                            measured: Some(m),
                            error,
                            blame,
                        },
                    );
                    moved = true;
                }
                Ok(Some(m)) => eprintln!(
                    "fabric: rank 0: {} answered for entry {}, not {i}; ignored",
                    links[r].host, m.entry
                ),
                Ok(None) if Instant::now() > by => {
                    let secs = budget.as_secs_f64();
                    let (rank, entry) = (
                        format!("no answer within {secs:.0} s"),
                        format!(": no result within {secs:.0} s"),
                    );
                    drop_rank(doc, links, r, i, rank, entry);
                    moved = true;
                }
                Ok(None) => {}
                Err(e) => {
                    let (rank, entry) = (
                        format!("its rank went away: {e}"),
                        format!(" went away while measuring: {e}"),
                    );
                    drop_rank(doc, links, r, i, rank, entry);
                    moved = true;
                }
            }
        }
        let open = doc.entries[first..].iter().any(|e| e.state == "pending");
        if !open {
            return;
        }
        if !moved {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Rank `r` is out of the run (`why`), and its entry `i` failed (its host's
/// name, then `what`).
fn drop_rank(
    doc: &mut FabricDoc,
    links: &mut [Link],
    r: usize,
    i: usize,
    why: String,
    what: String,
) {
    let host = links[r].host.clone();
    links[r].fail(why);
    links[r].busy = None;
    finish(doc, links, i, failed(host.clone(), format!("{host}{what}")));
}

/// How an entry ended: what it measured, if it got that far, and why it
/// failed and whom that blames, if it did.
struct Outcome {
    measured: Option<Measured>,
    error: Option<String>,
    blame: Option<String>,
}

fn failed(host: String, why: String) -> Outcome {
    Outcome {
        measured: None,
        error: Some(why),
        blame: Some(host),
    }
}

/// Records entry `i`'s outcome and queues the pair's other direction.
fn finish(doc: &mut FabricDoc, links: &mut [Link], i: usize, outcome: Outcome) {
    let e = &mut doc.entries[i];
    e.state = if outcome.error.is_some() {
        "failed"
    } else {
        "ok"
    }
    .into();
    e.error = outcome.error;
    e.failed_host = outcome.blame;
    if let Some(m) = outcome.measured {
        e.metrics = m.metrics;
        e.counters = m.counters;
        e.elapsed_s = m.elapsed_s;
    }
    // Entries come in pairs, (a→b) then (b→a), from index 0 on: an even
    // index is a pair's first direction. An entry measured again
    // (`recheck`) is measured alone.
    if i % 2 == 0 && doc.entries[i].earlier.is_empty() {
        let next = i + 1;
        let r = doc.endpoints[doc.entries[next].from.endpoint as usize].rank as usize;
        links[r].queue.push_back(next);
    }
}
