//! Human names for NICs, from the vendor and part ids the verbs report, so a
//! comparison reads "ConnectX-6 vs ConnectX-7" rather than "4123 vs 4129".
//!
//! The only copy of the table: results files record `model` from here, and
//! the plotting scripts read it from the file. `driver` names the kernel
//! driver behind a device, for `devices` and the results file alike.

use std::path::Path;

/// Vendor ids the kernel's software providers report (rdma_rxe: RXE_VENDOR_ID,
/// siw: SIW_VENDOR_ID, ASCII "bmt"), for devices given a custom name.
const RXE_VENDOR_ID: u32 = 0xffffff;
const SIW_VENDOR_ID: u32 = 0x626d74;

/// Why `s` cannot name an RDMA device (None: it can). One rule for `-d` and
/// `$RDMA_BENCH_DEVICE`.
pub fn refusal(s: &str) -> Option<&'static str> {
    if s.is_empty() {
        return Some("empty device name");
    }
    if s.len() > 64 || s.contains('/') || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Some(
            "not a device name (at most 64 characters, no '/', spaces or control characters)",
        );
    }
    None
}

/// "ConnectX-6 (0x2c9:4123)" and the like; soft devices by their driver name.
pub fn human_name(device: &str, vendor_id: u32, part_id: u32) -> String {
    let model = model(device, vendor_id, part_id);
    match model {
        Some(m) => format!("{m} ({vendor_id:#x}:{part_id})"),
        None => format!("{device} ({vendor_id:#x}:{part_id})"),
    }
}

/// The model name ("ConnectX-6"), or None when the ids are not known.
pub fn model(device: &str, vendor: u32, part: u32) -> Option<&'static str> {
    if device.starts_with("rxe") || vendor == RXE_VENDOR_ID {
        return Some("soft-RoCE (rxe)");
    }
    if device.starts_with("siw") || vendor == SIW_VENDOR_ID {
        return Some("Soft-iWARP (siw)");
    }
    match vendor {
        // Mellanox, now NVIDIA.
        0x02c9 => Some(match part {
            4099 => "ConnectX-3",
            4103 => "ConnectX-3 Pro",
            4113 => "Connect-IB",
            4115 => "ConnectX-4",
            4117 => "ConnectX-4 Lx",
            4119 => "ConnectX-5",
            4121 => "ConnectX-5 Ex",
            4123 => "ConnectX-6",
            4125 => "ConnectX-6 Dx",
            4127 => "ConnectX-6 Lx",
            4129 => "ConnectX-7",
            4131 => "ConnectX-8",
            41682 => "BlueField",
            41686 => "BlueField-2",
            41692 => "BlueField-3",
            _ => "Mellanox/NVIDIA NIC",
        }),
        0x8086 => Some(match part {
            0x1591..=0x1593 | 0x159b => "Intel E810",
            _ => "Intel NIC",
        }),
        0x14e4 => Some("Broadcom NetXtreme-E"),
        0x1d0f => Some(match part {
            0xefa0 => "AWS EFA (gen 1)",
            0xefa1 => "AWS EFA (gen 2)",
            0xefa2 => "AWS EFA (gen 3)",
            _ => "AWS EFA",
        }),
        _ => None,
    }
}

/// The kernel driver behind `device`: for the software providers, the module
/// their vendor id says (`rdma_rxe`, `siw`), because sysfs gives them no
/// driver of their own (rxe registers with no bus device at all; siw under its
/// netdev's, whose driver is the NIC's); otherwise the driver bound to the bus
/// device the RDMA device hangs off, the name of the
/// `/sys/class/infiniband/DEV/device/driver` link (`mlx5_core` for mlx5_N:
/// the PCI function's driver, which mlx5_ib sits on). None when sysfs has no
/// such link.
pub fn driver(device: &str, vendor: u32) -> Option<String> {
    driver_under(Path::new("/sys/class/infiniband"), device, vendor)
}

/// `driver` with the sysfs class directory given, for tests.
pub fn driver_under(class_dir: &Path, device: &str, vendor: u32) -> Option<String> {
    match vendor {
        RXE_VENDOR_ID => return Some("rdma_rxe".into()),
        SIW_VENDOR_ID => return Some("siw".into()),
        _ => {}
    }
    // A name `-d` accepted cannot climb out of the class directory.
    if refusal(device).is_some() {
        return None;
    }
    let link = std::fs::read_link(class_dir.join(device).join("device/driver")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::{driver_under, human_name, model};

    #[test]
    fn drivers_are_the_soft_modules_or_the_bus_devices_link() {
        let dir = std::env::temp_dir().join(format!("rb-driver-{}", std::process::id()));
        let dev = dir.join("mlx5_0/device");
        std::fs::create_dir_all(&dev).unwrap();
        let _ = std::fs::remove_file(dev.join("driver"));
        std::os::unix::fs::symlink("../../../bus/pci/drivers/mlx5_core", dev.join("driver"))
            .unwrap();
        assert_eq!(
            driver_under(&dir, "mlx5_0", 0x02c9).as_deref(),
            Some("mlx5_core")
        );
        // rxe has no bus device; siw's would name the NIC's driver.
        assert_eq!(
            driver_under(&dir, "rxe0", 0xffffff).as_deref(),
            Some("rdma_rxe")
        );
        assert_eq!(
            driver_under(&dir, "mlx5_0", 0x626d74).as_deref(),
            Some("siw")
        );
        assert_eq!(driver_under(&dir, "irdma0", 0x8086), None);
        assert_eq!(driver_under(&dir, "../mlx5_0", 0x02c9), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn known_parts_get_names_and_keep_raw_ids() {
        assert_eq!(
            human_name("mlx5_0", 0x02c9, 4123),
            "ConnectX-6 (0x2c9:4123)"
        );
        assert_eq!(
            human_name("mlx4_0", 0x02c9, 4099),
            "ConnectX-3 (0x2c9:4099)"
        );
        assert_eq!(
            human_name("mlx5_2", 0x02c9, 41686),
            "BlueField-2 (0x2c9:41686)"
        );
        assert_eq!(
            human_name("irdma0", 0x8086, 0x1592),
            "Intel E810 (0x8086:5522)"
        );
        assert_eq!(
            human_name("efa_0", 0x1d0f, 0xefa1),
            "AWS EFA (gen 2) (0x1d0f:61345)"
        );
        assert_eq!(
            human_name("rxe0", 0xffffff, 0),
            "soft-RoCE (rxe) (0xffffff:0)"
        );
        assert_eq!(
            human_name("siw0", 0x626d74, 0),
            "Soft-iWARP (siw) (0x626d74:0)"
        );
        assert_eq!(human_name("foo0", 0x1234, 7), "foo0 (0x1234:7)");
    }

    #[test]
    fn soft_devices_with_custom_names_are_known_by_vendor_id() {
        assert_eq!(model("roce_a", 0xffffff, 0), Some("soft-RoCE (rxe)"));
        assert_eq!(model("iw_b", 0x626d74, 0), Some("Soft-iWARP (siw)"));
        assert_eq!(model("foo0", 0x1234, 7), None);
    }
}
