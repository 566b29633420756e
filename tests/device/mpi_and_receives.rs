//! An MPI launch of one server and two clients, and the lifetime of the
//! region posted receives point at.

use super::*;

// ---------------------------------------------------------------------------
// MPI (scripts/test builds the binary with --features mpi and names it)
// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs an RDMA device and an MPI build: run via scripts/test (soft-RoCE)"]
fn mpirun_one_server_two_clients() {
    let mpi_bin = std::env::var("RDMA_BENCH_MPI_BIN").expect(
        "RDMA_BENCH_MPI_BIN names an rdma-bench built with --features mpi (scripts/test sets it)",
    );
    let dir = scratch("mpi");
    let json = dir.join("mpi.json");
    let out = Command::new("mpirun")
        .args([
            "--oversubscribe",
            "-np",
            "3",
            &mpi_bin,
            "write",
            "--tput",
            "inbound",
            "-D",
            "0.3",
        ])
        .args([
            "-q",
            "1,2",
            "--quiet",
            "-d",
            &device(),
            "--json",
            json.to_str().unwrap(),
        ])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (Open MPI) is installed");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "mpirun failed: {stderr}{stdout}");
    let doc: ResultsDoc = serde_json::from_value(read_json(&json)).unwrap();
    assert_eq!(doc.peer.mode, "mpi", "{:?}", doc.peer);
    assert!(
        doc.peer
            .address
            .as_deref()
            .is_some_and(|a| a.contains("2 client ranks")),
        "{:?}",
        doc.peer
    );
    assert_eq!(doc.throughput().count(), 2, "one record per point");
    for r in doc.throughput() {
        assert_eq!(r.group_clients, 2);
        let names: Vec<&str> = r.clients.iter().map(|c| c.client.as_str()).collect();
        assert!(
            names.iter().any(|n| n.starts_with("rank 1 on ")),
            "{names:?}"
        );
        assert!(
            names.iter().any(|n| n.starts_with("rank 2 on ")),
            "{names:?}"
        );
        assert!(
            names.iter().all(|n| n.contains(&device())),
            "per-rank device: {names:?}"
        );
        assert!(r.clients.iter().all(|c| c.mops > 0.0));
        let sum: f64 = r.clients.iter().map(|c| c.mops).sum();
        assert!((r.aggregate_mops.unwrap() - sum).abs() < 1e-9);
    }
}

#[test]
#[ignore = "needs an RDMA device: run via scripts/test (soft-RoCE)"]
fn a_qp_keeps_the_region_of_posted_receives_alive() {
    use rdma_bench::bench::{DeviceChoice, Port};
    use rdma_bench::verbs::{
        Access, CompletionQueue, MemoryRegion, QueuePair, RecvList, SendList, SendOp, Transport,
        WorkCompletion,
    };
    use std::sync::Arc;

    const LEN: usize = 256;
    const OFF: usize = 128;
    let byte = |i: usize| (i as u8).wrapping_mul(7).wrapping_add(1);

    // Two RC QPs on the one device, connected to each other.
    let port = Port::open(&DeviceChoice {
        device: Some(device()),
        ib_port: 1,
        gid_index: None,
    })
    .expect("device opens");
    let cq_a = CompletionQueue::new(&port.ctx, 16).expect("CQ A");
    let cq_b = CompletionQueue::new(&port.ctx, 16).expect("CQ B");
    let build = |cq: &Arc<CompletionQueue>| {
        QueuePair::builder(&port.pd, Transport::Rc, cq, cq)
            .max_send_wr(4)
            .max_recv_wr(4)
            .build()
            .expect("QP created")
    };
    let (mut qp_a, mut qp_b) = (build(&cq_a), build(&cq_b));
    qp_a.to_init(&port.config, Access::LOCAL)
        .expect("A to INIT");
    qp_b.to_init(&port.config, Access::LOCAL)
        .expect("B to INIT");
    let (psn_a, psn_b) = (0x1234, 0x5678);
    let ep_a = qp_a.endpoint(port.lid, port.gid, psn_a);
    let ep_b = qp_b.endpoint(port.lid, port.gid, psn_b);
    qp_a.to_rts(&port.config, psn_a, &ep_b).expect("A to RTS");
    qp_b.to_rts(&port.config, psn_b, &ep_a).expect("B to RTS");

    // B posts a receive, then the caller drops every handle to its region.
    let recv_mr = MemoryRegion::new(&port.pd, 4096, Access::LOCAL).expect("MR B");
    let mut recvs = RecvList::new(&recv_mr, OFF, LEN as u32, 1, 77);
    qp_b.post_recv(&mut recvs).expect("receive posted");
    let weak = Arc::downgrade(&recv_mr);
    drop(recvs);
    drop(recv_mr);
    assert!(
        weak.upgrade().is_some(),
        "QP B must keep the region of its posted receive alive"
    );

    // A SENDs a known payload; it lands in the region nobody else holds.
    let send_mr = MemoryRegion::new(&port.pd, 4096, Access::LOCAL).expect("MR A");
    for i in 0..LEN {
        send_mr.write_u8(i, byte(i));
    }
    let mut send = SendList::new(1);
    send.set(0, SendOp::Send, &send_mr, 0, LEN as u32);
    send.set_signaled(0, true);
    qp_a.post_send(&mut send).expect("send posted");

    let poll_one = |cq: &CompletionQueue, what: &'static str| {
        let mut wcs = [WorkCompletion::default(); 4];
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let n = cq.poll(&mut wcs).expect("poll");
            if n > 0 {
                assert_eq!(n, 1, "{what}: one completion");
                wcs[0].check(what).expect("successful completion");
                return wcs[0].wr_id();
            }
            assert!(Instant::now() < deadline, "{what}: no completion in 30 s");
            std::thread::yield_now();
        }
    };
    assert_eq!(poll_one(&cq_b, "RECV"), 77, "B's receive completed");
    assert_eq!(poll_one(&cq_a, "SEND"), 0, "A's send completed");

    let mr = weak.upgrade().expect("region still alive");
    for i in 0..LEN {
        assert_eq!(mr.read_u8(OFF + i), byte(i), "payload byte {i}");
    }
    assert_eq!(mr.read_u8(OFF - 1), 0, "nothing written before the slot");
    assert_eq!(mr.read_u8(OFF + LEN), 0, "nothing written after the slot");
    drop(mr);

    // Destroying QP B releases the last reference.
    drop(qp_b);
    assert!(
        weak.upgrade().is_none(),
        "the region is freed once QP B is destroyed"
    );
}
