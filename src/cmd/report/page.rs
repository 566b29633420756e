//! The report as one HTML file: inline style, inline SVG figures, the raw
//! results as embedded JSON, one small inline script (it only measures what
//! drew, for the browser test), and a content security policy that lets
//! the page fetch nothing at all.

use std::fmt::Write;

use serde_json::json;

use super::{Analysed, Profile, Ratio};
use crate::analysis::figures::{by_series_of, Figure};
use crate::analysis::findings::Rules;
use crate::analysis::uncertainty::Change;
use crate::results::{Record, ResultsDoc};

pub struct Page<'a> {
    pub profiles: &'a [Profile],
    pub analysed: &'a [Analysed],
    /// Per profile after the first: its ratios to the first.
    pub ratios: &'a [Vec<Ratio>],
    pub figures: &'a [(Figure, String)],
    pub differing: &'a [String],
    pub rules: &'a Rules,
    pub noise: f64,
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}.rb-measured td{overflow-wrap:anywhere}\
th{background:#f3f3f3}td.num,td.rb-headline{text-align:right;font-variant-numeric:tabular-nums}\
.warn{background:#fde8e8;border:2px solid #c0392b;color:#8b1a1a;padding:.6em 1em;font-weight:bold;font-size:1.1em}\
.iv{color:#777;font-size:.85em}.better{color:#1e7d32;font-weight:bold}.worse{color:#b71c1c;font-weight:bold}\
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto;display:block}figcaption{font-size:.92em;color:#333;margin-top:.3em}\
.rule{color:#555;font-size:.88em}code{background:#f3f3f3;padding:0 .2em}";

/// Measures each figure once laid out: for the browser test, nothing else.
const SCRIPT: &str = "window.addEventListener('load',function(){\
document.querySelectorAll('figure.rb-figure').forEach(function(f){\
var s=f.querySelector('svg');var r=s?s.getBoundingClientRect():{width:0,height:0};\
f.dataset.drawnWidth=Math.round(r.width);f.dataset.drawnHeight=Math.round(r.height);\
f.dataset.drawnElements=s?s.querySelectorAll('*').length:0;});\
document.body.dataset.rbReady='1';});";

const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

/// Text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

pub fn render(p: &Page) -> String {
    let mut h = String::new();
    let title = p
        .profiles
        .iter()
        .map(|x| x.label.as_str())
        .collect::<Vec<_>>()
        .join(" vs ");
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\
<meta name=\"viewport\" content=\"width=device-width\">\
<title>rdma-bench report: {}</title><style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    let _ = writeln!(h, "<h1>rdma-bench report: {}</h1>", esc(&title));
    let _ = writeln!(
        h,
        "<p>Made by rdma-bench {} from {} results file(s). Every number below is read from the results files embedded at the end of this page.</p>",
        env!("CARGO_PKG_VERSION"),
        p.profiles.iter().map(|x| x.files.len()).sum::<usize>()
    );
    soft_banner(&mut h, p.profiles);
    facts(&mut h, p.profiles);
    if !p.differing.is_empty() {
        let _ = writeln!(h, "<p class=\"warn\">Run conditions differ (--force): the profiles measure different things.</p><ul>");
        for d in p.differing {
            let _ = writeln!(h, "<li>{}</li>", esc(d));
        }
        h.push_str("</ul>\n");
    }
    headlines(&mut h, p);
    if !p.ratios.is_empty() {
        ratios(&mut h, p);
    }
    findings(&mut h, p);
    figures(&mut h, p);
    raw(&mut h, p);
    let _ = write!(h, "<script>{SCRIPT}</script>\n</body></html>\n");
    h
}

/// A software device or a virtual machine is said as loudly as the plots say it.
fn soft_banner(h: &mut String, profiles: &[Profile]) {
    for pr in profiles {
        let Some((_, d)) = pr.files.first() else {
            continue;
        };
        let soft = d.device.name.starts_with("rxe") || d.device.name.starts_with("siw");
        let env = d.environment.as_deref().unwrap_or("");
        if soft || !env.is_empty() {
            let what = if soft {
                "soft-RoCE (a software device), not hardware"
            } else {
                "not bare hardware"
            };
            let _ = writeln!(
                h,
                "<p class=\"warn\">{}: {what}{}. Its figures show the software and the machine it ran on, not a NIC.</p>",
                esc(&pr.label),
                if env.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", esc(env))
                }
            );
        }
    }
}

/// What the header says of a field a file written before it lacks.
const NOT_RECORDED: &str = "not recorded";

/// The limits `rdma-bench devices` shows, on one line.
fn capabilities(c: &crate::results::DeviceCaps) -> String {
    format!(
        "max_qp {} · max_qp_wr {} · max_cqe {} · max_sge {} · max_qp_rd_atom {} · max_qp_init_rd_atom {} · max_srq {} · max_srq_wr {} · atomics {}",
        c.max_qp,
        c.max_qp_wr,
        c.max_cqe,
        c.max_sge,
        c.max_qp_rd_atom,
        c.max_qp_init_rd_atom,
        c.max_srq,
        c.max_srq_wr,
        c.atomic_cap
    )
}

fn facts(h: &mut String, profiles: &[Profile]) {
    type Fact = fn(&ResultsDoc) -> String;
    let rows: &[(&str, Fact)] = &[
        ("device", |d| d.device.name.clone()),
        ("model", |d| {
            crate::device_name::human_name(
                &d.device.name,
                d.device.vendor_id,
                d.device.vendor_part_id,
            )
        }),
        ("firmware", |d| d.device.fw_ver.clone()),
        ("driver", |d| {
            d.device
                .driver
                .clone()
                .unwrap_or_else(|| NOT_RECORDED.into())
        }),
        ("hardware version", |d| d.device.hw_ver.to_string()),
        ("port, GID index", |d| {
            format!("{}, {}", d.device.port, d.device.gid_index)
        }),
        ("port state, LID", |d| {
            match (&d.device.port_state, d.device.lid) {
                (Some(state), Some(lid)) => format!("{state}, {lid}"),
                _ => NOT_RECORDED.into(),
            }
        }),
        ("GID", |d| d.device.gid.clone()),
        ("link layer", |d| d.device.link_layer.clone()),
        ("active MTU", |d| format!("{} B", d.device.active_mtu)),
        ("link speed", |d| format!("{} Gb/s", d.device.speed_gbps)),
        ("max inline (RC)", |d| format!("{} B", d.device.max_inline)),
        ("capabilities", |d| {
            d.device
                .capabilities
                .as_ref()
                .map(capabilities)
                .unwrap_or_else(|| NOT_RECORDED.into())
        }),
        ("host", |d| d.host.hostname.clone()),
        ("CPU", |d| d.host.cpu_model.clone()),
        ("kernel", |d| d.host.kernel.clone()),
        ("environment", |d| {
            d.environment
                .clone()
                .unwrap_or_else(|| "(none recorded)".into())
        }),
        ("peer", |d| {
            let p = &d.peer;
            let at = p
                .address
                .as_ref()
                .map(|a| format!(", {a}"))
                .unwrap_or_default();
            match (&p.host, &p.device) {
                (Some(host), Some(dev)) if p.mode != "loopback" => {
                    format!("{}: {dev} on {host}{at}", p.mode)
                }
                (Some(host), _) => format!("{} ({host}{at})", p.mode),
                _ => format!("{}{at}", p.mode),
            }
        }),
        ("clock", |d| {
            let ghz = d
                .clock
                .ghz
                .map(|g| format!(", {g:.3} GHz"))
                .unwrap_or_default();
            format!("{}{ghz}, read {:.0} ns", d.clock.source, d.clock.read_ns)
        }),
        ("measured", |d| d.started_utc.clone()),
        ("tool", |d| format!("{} {}", d.tool, d.tool_version)),
        ("peak RSS", |d| {
            d.peak_rss_kib
                .map(|k| format!("{} MiB", k / 1024))
                .unwrap_or_else(|| "-".into())
        }),
    ];
    h.push_str("<h2>What was measured</h2>\n<p>As each results file records it (the device's driver, capabilities and port state as <code>rdma-bench devices</code> reads them; <em>not recorded</em> where a file was written before they were recorded).</p>\n<table class=\"rb-measured\"><tr><th></th>");
    for pr in profiles {
        let _ = write!(h, "<th>{}</th>", esc(&pr.label));
    }
    h.push_str("</tr>\n");
    for (name, f) in rows {
        let _ = write!(h, "<tr><th>{name}</th>");
        for pr in profiles {
            let mut vals: Vec<String> = pr.files.iter().map(|(_, d)| f(d)).collect();
            vals.dedup();
            let _ = write!(h, "<td>{}</td>", esc(&vals.join(" | ")));
        }
        h.push_str("</tr>\n");
    }
    let _ = write!(h, "<tr><th>points</th>");
    for pr in profiles {
        let _ = write!(h, "<td>{}</td>", pr.records().count());
    }
    h.push_str("</tr></table>\n");
}

fn headlines(h: &mut String, p: &Page) {
    h.push_str("<h2>Headline numbers</h2>\n<p>Latency is each latency series at its smallest payload; throughput is each series' peak. The grey interval is the value's 95% interval: for latency percentiles from the order statistics of the point's histogram, for throughput from the t interval of its <code>--interval</code> figures; for a minimum and a CPU cost, from the t interval over the point's passes; none is shown where the data gives none (a minimum or a CPU cost measured in one pass has none).</p>\n<table id=\"rb-headlines\"><tr><th>figure</th>");
    for pr in p.profiles {
        let _ = write!(h, "<th>{}</th>", esc(&pr.label));
    }
    h.push_str("</tr>\n");
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for a in p.analysed {
        for hl in &a.headlines {
            if !keys.iter().any(|(k, _)| *k == hl.key) {
                keys.push((&hl.key, &hl.label));
            }
        }
    }
    for (key, label) in keys {
        let _ = write!(h, "<tr><th>{}</th>", esc(label));
        for (i, a) in p.analysed.iter().enumerate() {
            match a.headlines.iter().find(|x| x.key == key) {
                Some(hl) => {
                    let iv = hl
                        .interval
                        .map(|iv| {
                            format!(
                                " <span class=\"iv\">[{:.*}, {:.*}]</span>",
                                hl.digits, iv.lo, hl.digits, iv.hi
                            )
                        })
                        .unwrap_or_default();
                    let _ = write!(
                        h,
                        "<td class=\"rb-headline\" data-key=\"{}\" data-profile=\"{i}\">{}{iv}</td>",
                        esc(key),
                        esc(&hl.shown())
                    );
                }
                None => h.push_str("<td>-</td>"),
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

fn ratios(h: &mut String, p: &Page) {
    let base = &p.profiles[0].label;
    for (j, rs) in p.ratios.iter().enumerate() {
        let b = &p.profiles[j + 1].label;
        let count = |c: Change| rs.iter().filter(|r| r.judged.change == c).count();
        let _ = writeln!(
            h,
            "<h2>{} / {}</h2>\n<p>B/A per headline number. A ratio's interval is [B.lo/A.hi, B.hi/A.lo], which holds the true ratio whenever both values' 95% intervals hold theirs; it is called better or worse only where it excludes 1 and the ratio is more than {:.0}% from 1 (--noise). Of {} ratios: {} better, {} worse, {} no significant difference, {} within noise, {} not judged (no interval).</p>",
            esc(b),
            esc(base),
            p.noise * 100.0,
            rs.len(),
            count(Change::Better),
            count(Change::Worse),
            count(Change::NoDifference),
            count(Change::WithinNoise),
            count(Change::NotJudged)
        );
        let _ = writeln!(h, "<table class=\"rb-ratios\"><tr><th>figure</th><th>A</th><th>B</th><th>B/A</th><th>95% interval</th><th>verdict</th></tr>");
        for r in rs {
            let class = match r.judged.change {
                Change::Better => " class=\"better\"",
                Change::Worse => " class=\"worse\"",
                _ => "",
            };
            let iv = r
                .judged
                .interval
                .map(|i| format!("{:.3} – {:.3}", i.lo, i.hi))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                h,
                "<tr data-key=\"{}\" data-field=\"{}\"><th>{}</th><td class=\"num\">{:.4} {u}</td><td class=\"num\">{:.4} {u}</td><td class=\"num rb-ratio\">{:.3}</td><td class=\"num\">{iv}</td><td{class}>{}</td></tr>",
                esc(&r.key),
                r.field,
                esc(&r.label),
                r.a,
                r.b,
                r.judged.ratio,
                r.judged.words(),
                u = r.unit
            );
        }
        h.push_str("</table>\n");
    }
}

fn findings(h: &mut String, p: &Page) {
    let _ = writeln!(
        h,
        "<h2>Findings</h2>\n<p class=\"rule\">Rules: a cliff is a step of a swept knob where throughput (Gb/s against payload size, else Mops) falls by more than {:.0}% (--cliff), or latency rises by more than that and by more than the payload grew; a point is too wide to trust when its 95% interval is wider than ±{:.0}% of its value (--spread); a device counter of errors or retries that grew during a point is listed.</p>",
        p.rules.cliff * 100.0,
        p.rules.spread * 100.0
    );
    for (pr, a) in p.profiles.iter().zip(p.analysed) {
        let _ = writeln!(h, "<h3>{}</h3>", esc(&pr.label));
        if a.findings.is_empty() {
            h.push_str("<p>None: no rule above found anything.</p>\n");
            continue;
        }
        // Grouped by the rule that found them, the rule said once.
        let mut rules: Vec<&str> = Vec::new();
        for f in &a.findings {
            if !rules.contains(&f.rule.as_str()) {
                rules.push(&f.rule);
            }
        }
        for rule in rules {
            let mine: Vec<_> = a.findings.iter().filter(|f| f.rule == rule).collect();
            let _ = writeln!(
                h,
                "<p class=\"rule\">{} point(s) found by the rule: {}</p>\n<ul class=\"rb-findings\">",
                mine.len(),
                esc(rule)
            );
            for f in mine {
                let kind = serde_json::to_value(&f.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                let _ = writeln!(
                    h,
                    "<li data-kind=\"{kind}\"><b>{kind}</b>, {}: {}</li>",
                    esc(&f.series),
                    esc(&f.what)
                );
            }
            h.push_str("</ul>\n");
        }
    }
}

fn figures(h: &mut String, p: &Page) {
    h.push_str("<h2>Figures</h2>\n");
    // Every file's series, grouped once for all the figures' captions.
    let docs = p
        .profiles
        .iter()
        .flat_map(|pr| pr.files.iter().map(|(_, d)| d));
    let series = by_series_of(docs);
    let clock = p
        .profiles
        .first()
        .and_then(|pr| pr.files.first())
        .map(|(_, d)| d.clock.source.clone())
        .unwrap_or_default();
    for (f, svg) in p.figures {
        let mine: Vec<&Record> = series
            .iter()
            .filter(|s| s.figure == Some(*f))
            .flat_map(|s| s.records.iter().copied())
            .collect();
        let _ = writeln!(
            h,
            "<figure class=\"rb-figure\" data-figure=\"{}\" id=\"fig-{}\">{svg}<figcaption><b>{}.</b> {}</figcaption></figure>",
            f.id(),
            f.id(),
            esc(&f.title()),
            esc(&super::captions::caption(*f, &mine, &clock))
        );
    }
}

fn raw(h: &mut String, p: &Page) {
    let profiles: Vec<_> = p
        .profiles
        .iter()
        .zip(p.analysed)
        .map(|(pr, a)| {
            json!({
                "label": pr.label,
                "files": pr.files.iter().map(|(path, doc)| json!({"path": path, "doc": doc})).collect::<Vec<_>>(),
                "headlines": a.headlines,
                "findings": a.findings,
            })
        })
        .collect();
    let headlines: Vec<_> = p
        .analysed
        .iter()
        .enumerate()
        .flat_map(|(i, a)| {
            a.headlines.iter().map(move |hl| {
                let mut v = serde_json::to_value(hl).expect("headlines serialise");
                v["profile"] = json!(i);
                v
            })
        })
        .collect();
    let data = json!({"report_version": 1, "profiles": profiles, "headlines": headlines});
    // `<` only occurs inside JSON strings, where \u003c reads back the same.
    let text = serde_json::to_string(&data)
        .expect("the report data serialises")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let _ = writeln!(
        h,
        "<h2>Raw results</h2>\n<p>The results files this page was made from are embedded in it, whole, in the element <code>#rb-data</code> (JSON: <code>profiles[].files[].doc</code> is each file as rdma-bench wrote it; the headline numbers and findings are beside them). To get them back: <code>python3 -c 'import json,re,sys; t=open(sys.argv[1]).read(); print(json.dumps(json.loads(re.search(r\"id=.rb-data.>(.*?)&lt;/script\", t, re.S).group(1)), indent=1))' page.html</code>.</p>\n<script type=\"application/json\" id=\"rb-data\">{text}</script>"
    );
}
