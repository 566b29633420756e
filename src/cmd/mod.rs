//! One module per subcommand: each turns parsed arguments into a run and
//! returns an `Error` for `main` to report.

pub mod devices;
pub mod latency;
pub mod serve;

use crate::bench::DeviceChoice;
use crate::cli::DeviceArgs;

impl From<&DeviceArgs> for DeviceChoice {
    fn from(a: &DeviceArgs) -> Self {
        DeviceChoice {
            device: a.device.clone(),
            ib_port: a.ib_port,
            gid_index: a.gid_index,
        }
    }
}
