//! `rdma-bench fabric`: every pair of hosts of a cluster measured, in
//! rounds in which no endpoint is in two pairs at once. This room holds
//! the pure parts, which need no device and no other host: the schedule
//! of rounds (`schedule`), the rule that finds slow pairs and the host
//! they share (`outliers`), and the one results document rank 0 writes
//! (`doc`). Launching, the rendezvous and the measurements are in
//! `cmd/fabric/`.

pub mod doc;
pub mod outliers;
pub mod schedule;
