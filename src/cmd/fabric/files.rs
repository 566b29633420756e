//! Rank 0's files in `--out`: fabric.json (the document), fabric.csv (one
//! row per pair and direction) and matrix-<figure>.csv (rows drive,
//! columns serve). Each is rewritten whole after every round.

use std::path::Path;

use crate::error::{Error, Result};
use crate::export::write_atomically;
use crate::fabric::doc::{FabricDoc, FabricEntry};

fn csv_bytes(rows: Vec<Vec<String>>) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.write_record(&r)
            .map_err(|e| Error::io("formatting CSV", std::io::Error::other(e)))?;
    }
    w.into_inner()
        .map_err(|e| Error::io("formatting CSV", std::io::Error::other(e.to_string())))
}

fn metric_names(doc: &FabricDoc) -> Vec<String> {
    doc.tests
        .iter()
        .flat_map(|t| t.metrics.iter().map(|m| m.name.clone()))
        .collect()
}

fn entry_row(e: &FabricEntry, metrics: &[String], doc: &FabricDoc) -> Vec<String> {
    let label = |i: u32| doc.endpoints[i as usize].label.clone();
    let (from, to) = (label(e.from.endpoint), label(e.to.endpoint));
    let slow: Vec<&str> = doc
        .verdicts
        .slow
        .iter()
        .filter(|s| s.from == from && s.to == to)
        .map(|s| s.metric.as_str())
        .collect();
    let mut row = vec![
        e.round.to_string(),
        e.from.host.clone(),
        e.from.device.clone(),
        e.from.gid.clone(),
        e.to.host.clone(),
        e.to.device.clone(),
        e.to.gid.clone(),
        e.state.clone(),
    ];
    row.extend(
        metrics
            .iter()
            .map(|m| e.metrics.get(m).map(|v| v.to_string()).unwrap_or_default()),
    );
    row.push(slow.join(" "));
    row.push((e.earlier.len() + 1).to_string());
    row.push(e.failed_host.clone().unwrap_or_default());
    row.push(e.error.clone().unwrap_or_default());
    row
}

pub fn write(dir: &Path, doc: &FabricDoc) -> Result<()> {
    let json = serde_json::to_vec_pretty(doc).expect("the fabric document serialises");
    write_atomically(&dir.join("fabric.json"), &json)?;
    let metrics = metric_names(doc);
    let mut head: Vec<String> = [
        "round",
        "from_host",
        "from_device",
        "from_gid",
        "to_host",
        "to_device",
        "to_gid",
        "state",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    head.extend(metrics.iter().cloned());
    head.extend(["slow", "attempts", "failed_host", "error"].map(String::from));
    let mut rows = vec![head];
    rows.extend(doc.entries.iter().map(|e| entry_row(e, &metrics, doc)));
    write_atomically(&dir.join("fabric.csv"), &csv_bytes(rows)?)?;
    let names: Vec<String> = doc.endpoints.iter().map(|e| e.label.clone()).collect();
    for m in &metrics {
        let mut rows = vec![std::iter::once(format!("{m}: from \\ to"))
            .chain(names.iter().cloned())
            .collect::<Vec<_>>()];
        for (fi, from) in names.iter().enumerate() {
            let mut row = vec![from.clone()];
            for ti in 0..names.len() {
                let cell = doc
                    .entries
                    .iter()
                    .find(|e| e.from.endpoint as usize == fi && e.to.endpoint as usize == ti)
                    .map(|e| match e.metrics.get(m) {
                        Some(v) => v.to_string(),
                        None if e.state != "ok" => "failed".into(),
                        None => String::new(),
                    })
                    .unwrap_or_default();
                row.push(cell);
            }
            rows.push(row);
        }
        write_atomically(&dir.join(format!("matrix-{m}.csv")), &csv_bytes(rows)?)?;
    }
    Ok(())
}
