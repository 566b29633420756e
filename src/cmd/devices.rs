//! `rdma-bench devices`: every device and port, with what limits a benchmark.

use serde::Serialize;

use crate::cli::DevicesArgs;
use crate::device_name;
use crate::error::Result;
use crate::output::print_line;
use crate::verbs::{
    device_names, probe_max_inline, CompletionQueue, Context, DeviceAttr, GidEntry, PortAttr,
    ProtectionDomain, Transport,
};

#[derive(Serialize)]
pub struct DeviceReport {
    pub name: String,
    /// The kernel driver behind it (`device_name::driver`, as results record it).
    pub driver: Option<String>,
    #[serde(flatten)]
    pub attr: DeviceAttr,
    /// Largest inline payload granted to an RC QP, probed by creating QPs.
    pub max_inline: u32,
    pub ports: Vec<PortReport>,
}

#[derive(Serialize)]
pub struct PortReport {
    pub port: u8,
    #[serde(flatten)]
    pub attr: PortAttr,
    pub gids: Vec<GidEntry>,
}

pub fn collect() -> Result<Vec<DeviceReport>> {
    let mut out = Vec::new();
    for name in device_names()? {
        let ctx = Context::open(&name)?;
        let attr = ctx.query_device()?;
        let pd = ProtectionDomain::new(&ctx)?;
        let cq = CompletionQueue::new(&ctx, 4)?;
        let max_inline = probe_max_inline(&pd, &cq, Transport::Rc);
        let mut ports = Vec::new();
        for port in 1..=attr.phys_port_cnt {
            ports.push(PortReport {
                port,
                attr: ctx.query_port(port)?,
                gids: ctx.gid_table(port)?,
            });
        }
        out.push(DeviceReport {
            driver: device_name::driver(&name, attr.vendor_id),
            name,
            attr,
            max_inline,
            ports,
        });
    }
    Ok(out)
}

pub fn run(args: &DevicesArgs) -> Result<()> {
    let devices = collect()?;
    if args.json {
        print_line(&serde_json::to_string_pretty(&devices).expect("device reports serialise"))?;
        return Ok(());
    }
    if devices.is_empty() {
        print_line("no RDMA devices")?;
    }
    for d in &devices {
        let a = &d.attr;
        print_line(&format!(
            "{}: vendor {:#x} part {} fw {} driver {} | max_inline {} B | atomic_cap {:?} | max_qp {} max_qp_wr {} max_cqe {} max_qp_rd_atom {}",
            d.name, a.vendor_id, a.vendor_part_id, a.fw_ver, d.driver.as_deref().unwrap_or("-"), d.max_inline, a.atomic_cap,
            a.max_qp, a.max_qp_wr, a.max_cqe, a.max_qp_rd_atom
        ))?;
        for p in &d.ports {
            let pa = &p.attr;
            print_line(&format!(
                "  port {}: {:?} {:?} active_mtu {} speed {} Gb/s lid {}",
                p.port, pa.state, pa.link_layer, pa.active_mtu, pa.speed_gbps, pa.lid
            ))?;
            for g in &p.gids {
                let v4 = g
                    .gid
                    .ipv4()
                    .map(|ip| format!(" ({ip})"))
                    .unwrap_or_default();
                print_line(&format!(
                    "    gid[{}] {:?} {}{}",
                    g.index, g.kind, g.gid, v4
                ))?;
            }
        }
    }
    Ok(())
}
