//! Command-line flags: the FAQ's parameter table is the contract (names,
//! defaults, syntax), plus the flags of newer upstream releases (docs/reference/ca-rules.md §15)
//! so that newer manifests work too.
//!
//! Parsing follows Go's `flag`/`pflag` conventions: `--flag=value` or
//! `--flag value`, booleans as `--flag` or `--flag=false`, one or two dashes,
//! `_` and `-` equivalent in names ([`normalize_args`]); repeatable flags
//! accumulate; durations are Go durations (`10m0s`). Every bad value is an
//! error that names the flag, reported before anything starts
//! ([`Flags::validate`]). Flags that only concern clouds or features this
//! autoscaler does not implement are accepted and named in one warning line
//! each ([`Flags::warnings`]).

mod flags;
pub mod goflags;
pub mod help;
pub mod provider;
pub mod reference;
pub mod scheduler;
mod validate;
mod warnings;

pub use flags::{Flags, ValueError};
pub use goflags::normalize_args;
pub use validate::{
    DrainPriority, ExpanderName, FlagError, GpuLimit, MinMax, NodeGroupSpec, Validated,
    parse_expanders, parse_node_group_spec,
};

#[cfg(test)]
mod tests;
