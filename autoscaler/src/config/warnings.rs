//! Flags that are accepted for compatibility but concern clouds or
//! features this autoscaler does not implement: one warning line each when
//! set to anything but the default. Also the values upstream overrides
//! when they contradict another flag, with upstream's warning.

use super::flags::Flags;

/// An accepted flag that has no effect here: whether it is set to anything
/// but its default, its name, and why it has no effect.
type Ignored = (bool, &'static str, &'static str);

const GCE: &str = "it concerns the GCE cloud provider";
const AUTOPROVISIONING: &str = "node autoprovisioning is not implemented";

impl Flags {
    /// One line per accepted flag that has no effect here (a cloud or a
    /// feature this autoscaler does not implement), when it is set to a
    /// value other than its default.
    pub fn warnings(&self) -> Vec<String> {
        let d = Self::default_values();
        [
            self.gce_flags(&d),
            self.unimplemented_features(),
            self.superseded(),
        ]
        .into_iter()
        .flatten()
        .filter(|(set, _, _)| *set)
        .map(|(_, flag, why)| format!("--{flag} is accepted but has no effect: {why}"))
        .chain(self.overrides())
        .collect()
    }

    /// `--max-startup-time` as upstream uses it: at least the longest of
    /// `--max-inactivity` and `--max-failing-time`.
    pub fn effective_max_startup_time(&self) -> std::time::Duration {
        self.max_startup_time
            .max(self.max_inactivity)
            .max(self.max_failing_time)
    }

    /// `--scheduler-verbosity` as CA 1.37 uses it: at most `-v`.
    pub fn effective_scheduler_verbosity(&self) -> u32 {
        self.scheduler_verbosity.min(self.verbosity)
    }

    /// Upstream's warnings for the values it overrides (its
    /// `createAutoscalingOptions`).
    fn overrides(&self) -> Vec<String> {
        let mut out = Vec::new();
        let startup = self.effective_max_startup_time();
        if startup != self.max_startup_time {
            out.push(format!(
                "--max-startup-time needs to be at least as high as --max-failing-time and --max-inactivity, overriding it to the highest value out of them: {}",
                simclock::format_go_duration(startup)
            ));
        }
        if self.scheduler_verbosity > self.verbosity {
            out.push(format!(
                "--scheduler-verbosity should be at most as high as -v flag, overriding it to: {}",
                self.verbosity
            ));
        }
        out
    }

    /// The GCE provider's flags.
    fn gce_flags(&self, d: &Flags) -> Vec<Ignored> {
        vec![
            (self.regional, "regional", GCE),
            (
                self.gce_concurrent_refreshes != 1,
                "gce-concurrent-refreshes",
                GCE,
            ),
            (
                self.gce_mig_instances_min_refresh_wait_time
                    != d.gce_mig_instances_min_refresh_wait_time,
                "gce-mig-instances-min-refresh-wait-time",
                GCE,
            ),
            (
                !self.gce_expander_ephemeral_storage_support,
                "gce-expander-ephemeral-storage-support",
                GCE,
            ),
            (
                self.bulk_mig_instances_listing_enabled,
                "bulk-mig-instances-listing-enabled",
                GCE,
            ),
            (
                self.cloud_provider_gce_lb_src_cidrs != d.cloud_provider_gce_lb_src_cidrs,
                "cloud-provider-gce-lb-src-cidrs",
                GCE,
            ),
            (
                self.cloud_provider_gce_l7lb_src_cidrs != d.cloud_provider_gce_l7lb_src_cidrs,
                "cloud-provider-gce-l7lb-src-cidrs",
                GCE,
            ),
        ]
    }

    /// Features this autoscaler does not implement: node autoprovisioning,
    /// the grpc expander, DRA,
    /// CapacityBuffers and CapacityQuotas, scheduler plugins.
    fn unimplemented_features(&self) -> Vec<Ignored> {
        vec![
            (
                self.node_autoprovisioning_enabled,
                "node-autoprovisioning-enabled",
                AUTOPROVISIONING,
            ),
            (
                self.max_autoprovisioned_node_group_count != 15,
                "max-autoprovisioned-node-group-count",
                AUTOPROVISIONING,
            ),
            (
                self.async_node_groups,
                "async-node-groups",
                AUTOPROVISIONING,
            ),
            (
                !self.grpc_expander_url.is_empty(),
                "grpc-expander-url",
                "the grpc expander is not implemented",
            ),
            (
                !self.grpc_expander_cert.is_empty(),
                "grpc-expander-cert",
                "the grpc expander is not implemented",
            ),
        ]
    }

    /// Flags removed upstream or without effect there either.
    fn superseded(&self) -> Vec<Ignored> {
        vec![
            (
                self.max_empty_bulk_delete != 10,
                "max-empty-bulk-delete",
                "removed upstream; use --max-scale-down-parallelism",
            ),
            (
                !self.lease_resource_name.is_empty(),
                "lease-resource-name",
                "removed upstream; use --leader-elect-resource-name",
            ),
            (
                !self.leader_elect_resource_namespace.is_empty(),
                "leader-elect-resource-namespace",
                "the lock lives in --namespace, as upstream",
            ),
            (
                self.scale_down_non_empty_candidates_count != 30,
                "scale-down-non-empty-candidates-count",
                "it has no effect upstream either",
            ),
            (
                self.scale_down_candidates_pool_ratio != 0.1,
                "scale-down-candidates-pool-ratio",
                "it has no effect upstream either",
            ),
            (
                self.scale_down_candidates_pool_min_count != 50,
                "scale-down-candidates-pool-min-count",
                "it has no effect upstream either",
            ),
        ]
    }
}
