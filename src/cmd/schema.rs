//! `rdma-bench schema`: the results files' JSON Schema on stdout.

use crate::error::Result;

pub fn run() -> Result<()> {
    let text = crate::results::json_schema();
    crate::output::print_line(text.trim_end())
}
