//! Quotas on what scale-up may add (upstream's `resourcequotas`): the
//! CapacityQuota API ([`types`]), its controller ([`controller`]), and
//! [`Quota`], one limit scale-up enforces: the cluster-wide one of
//! `--cores-total`/`--memory-total` (`cluster-wide`) and each valid
//! CapacityQuota (`CapacityQuota/<name>`, on the nodes its selector
//! matches). The tracking itself is `scaleup::limits`.

pub mod controller;
pub mod quota;
pub mod types;

pub use controller::QuotaController;
pub use quota::{NODES, Quota, node_resources};
pub use types::CapacityQuota;
