//! `rdma-bench report`'s findings, end to end, on results files a test
//! makes from a committed NIC-cache run: a known drop across region sizes
//! (each size its own series, as the built-in profile measures them) is a
//! cliff named with its rule and a flat curve is none; a point whose 95%
//! interval is wide is named with the spread rule and a tight one is not;
//! an error counter that grew during a point is named and a quiet one is not.
//! (Cliffs along QPs and the B/A table: ../cli_report.rs.)
use std::path::{Path, PathBuf};

use super::findings;
use crate::common::{read_json, run, scratch, text};
use serde_json::{json, Value};

const NIC_CACHE_FILE: &str = "results/nic-cache-rxe0-vm-qemu-20261130T023511Z.json";

/// The committed run's "random offsets" series (one point per region size,
/// 4 KiB to 256 MiB), point i at `mops(i)` Mops with four `--interval`
/// figures `spread(i)` apart around it, and no device counter moved.
fn regions(mops: impl Fn(usize) -> f64, spread: impl Fn(usize) -> f64) -> Value {
    let mut doc = read_json(&Path::new(env!("CARGO_MANIFEST_DIR")).join(NIC_CACHE_FILE));
    let results = doc["results"].as_array_mut().unwrap();
    results.retain(|r| r["offsets"] == "random" && !r["series"].as_str().unwrap().contains("QP"));
    assert_eq!(results.len(), 5, "five region sizes");
    for (i, r) in results.iter_mut().enumerate() {
        let (m, d) = (mops(i), spread(i));
        r["mops"] = m.into();
        r["interval_s"] = 0.25.into();
        r["intervals"] = [1.0 - d, 1.0 + d, 1.0 - d / 2.0, 1.0 + d / 2.0]
            .iter()
            .enumerate()
            .map(|(k, f)| {
                json!({"index": k, "start_s": 0.25 * k as f64, "elapsed_s": 0.25,
                    "ops": 1000, "mops": m * f})
            })
            .collect();
        for (_, v) in r["device_counters"].as_object_mut().unwrap().iter_mut() {
            *v = 0.into();
        }
    }
    doc
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
    p
}

fn page(dir: &Path, input: &Path) -> String {
    let html = dir.join("page.html");
    let o = run(&[
        "report",
        input.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    std::fs::read_to_string(html).unwrap()
}

#[test]
fn a_known_drop_across_region_sizes_is_a_cliff_with_its_rule_and_a_flat_one_is_none() {
    let dir = scratch("findings-region");
    // Flat at 1 Mops to 16 MiB, 0.4 at 256 MiB; intervals ±1%.
    let steep = write(
        &dir,
        "steep.json",
        &regions(|i| if i == 4 { 0.4 } else { 1.0 }, |_| 0.01),
    );
    let html = page(&dir, &steep);
    let cliffs = findings(&html, "cliff");
    assert_eq!(cliffs.len(), 1, "{cliffs:?}");
    assert!(
        cliffs[0].contains("Mops falls 60% as region size grows from 16 MiB to 256 MiB"),
        "{}",
        cliffs[0]
    );
    assert!(
        cliffs[0].contains("random offsets, 16 MiB region → random offsets, 256 MiB region"),
        "both series of the step are named: {}",
        cliffs[0]
    );
    assert!(
        html.contains("1 point(s) found by the rule: a step of region size, between NIC-cache points alike in all else, where Mops falls by more than 25%"),
        "the rule is said above what it found"
    );
    let flat = write(
        &dir,
        "flat.json",
        &regions(|i| 1.0 - 0.05 * i as f64, |_| 0.01),
    );
    let html = page(&dir, &flat);
    assert!(findings(&html, "cliff").is_empty());
    assert!(html.contains("None: no rule above found anything"));
}

#[test]
fn a_wide_interval_is_named_with_the_spread_rule_and_a_tight_one_is_not() {
    let dir = scratch("findings-spread");
    // Point 2 (1 MiB) has intervals ±30% apart; the others ±1%.
    let wide = write(
        &dir,
        "wide.json",
        &regions(|_| 1.0, |i| if i == 2 { 0.3 } else { 0.01 }),
    );
    let html = page(&dir, &wide);
    let spread = findings(&html, "spread");
    assert_eq!(spread.len(), 1, "{spread:?}");
    assert!(
        spread[0].contains("random offsets, 1 MiB region")
            && spread[0].contains("the 95% interval of mops is ±"),
        "{}",
        spread[0]
    );
    assert!(
        html.contains("1 point(s) found by the rule: a point whose 95% interval (t interval over the --interval figures) is wider than ±10% of its value"),
        "the rule is said above what it found"
    );
    let tight = write(&dir, "tight.json", &regions(|_| 1.0, |_| 0.01));
    assert!(findings(&page(&dir, &tight), "spread").is_empty());
}

#[test]
fn an_error_counter_that_grew_is_a_finding_and_a_quiet_one_is_not() {
    let dir = scratch("findings-counters");
    let quiet = regions(|_| 1.0, |_| 0.01);
    let mut moved = quiet.clone();
    let r = &mut moved["results"][3]["device_counters"];
    r["rcvd_rnr_err"] = 7.into();
    r["sent_pkts"] = 1000.into();
    let html = page(&dir, &write(&dir, "moved.json", &moved));
    let counters = findings(&html, "counter");
    assert_eq!(counters.len(), 1, "{counters:?}");
    assert!(
        counters[0].contains("device counter rcvd_rnr_err grew by 7 over 1 of 1 points"),
        "{}",
        counters[0]
    );
    assert!(
        html.contains("found by the rule: a device counter whose name says error, retry, RNR"),
        "the rule is said above what it found"
    );
    let html = page(&dir, &write(&dir, "quiet.json", &quiet));
    assert!(findings(&html, "counter").is_empty());
}
