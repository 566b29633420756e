//! `profile --resume` says what is left of its written plan before it measures.

use super::{dry_run_profile, write};
use crate::common::{self, run, text};

#[test]
fn profile_resume_prints_what_is_left_of_its_plan_first() {
    let (dir, _, plan) = dry_run_profile("profile-resume-plan", "10m");
    let out = dir.join("p");
    // Two of the first series' four points measured before an interruption.
    let mut doc = common::sample_results();
    let first = doc["results"][0].clone();
    doc["results"] = [8, 64]
        .iter()
        .map(|&size| {
            let mut r = first.clone();
            r["series"] = "WRITE [pass 1/3]".into();
            r["size"] = size.into();
            r
        })
        .collect();
    write(&out, "profile-rxe0-host-20261204T000000Z.json", &doc);
    let o = run(&[
        "profile",
        "--resume",
        "--dry-run",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}{stderr}");
    let first = stdout.lines().next().unwrap_or_default();
    let counts: Vec<u64> = first
        .strip_prefix("# profile --resume: ")
        .and_then(|l| l.split(" points left, about ").next())
        .map(|l| l.split(" of ").map(|n| n.parse().unwrap()).collect())
        .unwrap_or_default();
    // Three passes of the built-in set (its under-load series runs two
    // points a pass: `50%` reuses the `max` point's saturated rate).
    assert_eq!(counts, [166, 168], "{stdout}");
    assert!(plan["passes"] == 3 && first.ends_with(" left"), "{first}");
    let row = stdout
        .lines()
        .find(|l| l.contains("WRITE [pass 1/3]"))
        .expect("the first series is listed");
    assert!(row.contains(" 2/4 "), "{row}");
    assert!(
        !stdout.contains("# profile plan: "),
        "the plan as first printed is not repeated: {stdout}"
    );
}
