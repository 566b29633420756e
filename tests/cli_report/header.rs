//! The report header: the driver, port state and capabilities a results file recorded, and "not recorded" for one without them.

use super::{committed, page, write, QPS_FILE};
use crate::common::scratch;

/// The cell of the header row `name` ("What was measured"), one profile.
fn fact(html: &str, name: &str) -> String {
    let row = format!("<tr><th>{name}</th><td>");
    let at = html.find(&row).unwrap_or_else(|| panic!("no {name} row"));
    let rest = &html[at + row.len()..];
    rest[..rest.find("</td>").unwrap()].to_string()
}

#[test]
fn the_header_shows_the_recorded_driver_and_capabilities_and_says_when_none_are() {
    let dir = scratch("report-device");
    // The committed file predates them: each row says so.
    let old = write(&dir, "old.json", &committed(QPS_FILE));
    let html = page(&dir, &[&old], &[]);
    for row in ["driver", "capabilities", "port state, LID"] {
        assert_eq!(fact(&html, row), "not recorded", "{row}");
    }
    let mut doc = committed(QPS_FILE);
    doc["device"]["driver"] = "rdma_rxe".into();
    doc["device"]["port_state"] = "active".into();
    doc["device"]["lid"] = 0.into();
    doc["device"]["capabilities"] = serde_json::json!({
        "max_qp": 1048560, "max_qp_wr": 16384, "max_cqe": 32767, "max_sge": 32,
        "max_qp_rd_atom": 128, "max_qp_init_rd_atom": 128, "max_srq": 917503,
        "max_srq_wr": 16384, "atomic_cap": "global"
    });
    let new = write(&dir, "new.json", &doc);
    let html = page(&dir, &[&new], &[]);
    assert_eq!(fact(&html, "driver"), "rdma_rxe");
    assert_eq!(fact(&html, "port state, LID"), "active, 0");
    let caps = fact(&html, "capabilities");
    for part in [
        "max_qp 1048560",
        "max_qp_wr 16384",
        "max_cqe 32767",
        "max_qp_rd_atom 128",
        "max_srq_wr 16384",
        "atomics global",
    ] {
        assert!(caps.contains(part), "{part} missing from {caps}");
    }
    assert!(html.contains("capabilities and port state as <code>rdma-bench devices</code>"));
}
