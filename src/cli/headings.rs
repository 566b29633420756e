//! The help headings the measuring subcommands' options are grouped under.

pub const CONNECTION: &str = "Connection";
pub const SIZES: &str = "Sizes and iterations";
pub const OPERATION: &str = "Operation";
pub const POSTING: &str = "Posting";
pub const PATH: &str = "Path";
pub const MEMORY: &str = "Memory";
pub const SHAPE: &str = "Throughput shape";
pub const RATE: &str = "Rate and load";
pub const LIVE: &str = "Live reporting";
pub const CHECKS: &str = "Checks";
pub const OUTPUT: &str = "Output";
