//! Flags that are accepted for compatibility but concern clouds or
//! features this autoscaler does not implement: one warning line each when
//! set to anything but the default.

use super::Flags;

impl Flags {
    /// One line per accepted flag that has no effect here (a cloud or a
    /// feature this autoscaler does not implement), when it is set to a
    /// value other than its default.
    pub fn warnings(&self) -> Vec<String> {
        let d = Self::default_values();
        let mut out = Vec::new();
        let mut ignored = |set: bool, flag: &str, why: &str| {
            if set {
                out.push(format!("--{flag} is accepted but has no effect: {why}"));
            }
        };
        let gce = "it concerns the GCE cloud provider";
        ignored(self.regional, "regional", gce);
        ignored(
            self.gce_concurrent_refreshes != 1,
            "gce-concurrent-refreshes",
            gce,
        );
        ignored(
            self.gce_mig_instances_min_refresh_wait_time
                != d.gce_mig_instances_min_refresh_wait_time,
            "gce-mig-instances-min-refresh-wait-time",
            gce,
        );
        ignored(
            !self.gce_expander_ephemeral_storage_support,
            "gce-expander-ephemeral-storage-support",
            gce,
        );
        ignored(
            self.bulk_mig_instances_listing_enabled,
            "bulk-mig-instances-listing-enabled",
            gce,
        );
        ignored(
            self.cloud_provider_gce_lb_src_cidrs != d.cloud_provider_gce_lb_src_cidrs,
            "cloud-provider-gce-lb-src-cidrs",
            gce,
        );
        ignored(
            self.cloud_provider_gce_l7lb_src_cidrs != d.cloud_provider_gce_l7lb_src_cidrs,
            "cloud-provider-gce-l7lb-src-cidrs",
            gce,
        );
        let nap = "node autoprovisioning is not implemented";
        ignored(
            self.node_autoprovisioning_enabled,
            "node-autoprovisioning-enabled",
            nap,
        );
        ignored(
            self.max_autoprovisioned_node_group_count != 15,
            "max-autoprovisioned-node-group-count",
            nap,
        );
        ignored(self.async_node_groups, "async-node-groups", nap);
        ignored(
            !self.grpc_expander_url.is_empty(),
            "grpc-expander-url",
            "the grpc expander is not implemented",
        );
        ignored(
            !self.grpc_expander_cert.is_empty(),
            "grpc-expander-cert",
            "the grpc expander is not implemented",
        );
        ignored(
            self.enable_dynamic_resource_allocation,
            "enable-dynamic-resource-allocation",
            "DRA is not implemented",
        );
        ignored(
            self.enable_provisioning_requests,
            "enable-provisioning-requests",
            "ProvisioningRequests are not implemented yet",
        );
        ignored(
            self.enable_proactive_scaleup,
            "enable-proactive-scaleup",
            "proactive scale-up is not implemented",
        );
        ignored(
            self.capacity_buffer_controller_enabled,
            "capacity-buffer-controller-enabled",
            "CapacityBuffers are not implemented",
        );
        ignored(
            self.capacity_buffer_pod_injection_enabled,
            "capacity-buffer-pod-injection-enabled",
            "CapacityBuffers are not implemented",
        );
        ignored(
            self.capacity_quotas_enabled,
            "capacity-quotas-enabled",
            "CapacityQuotas are not implemented",
        );
        ignored(
            !self.scheduler_config_file.is_empty(),
            "scheduler-config-file",
            "the default scheduler plugins are always used",
        );
        ignored(
            self.max_empty_bulk_delete != 10,
            "max-empty-bulk-delete",
            "removed upstream; use --max-scale-down-parallelism",
        );
        ignored(
            !self.lease_resource_name.is_empty(),
            "lease-resource-name",
            "removed upstream; use --leader-elect-resource-name",
        );
        ignored(
            !self.leader_elect_resource_namespace.is_empty(),
            "leader-elect-resource-namespace",
            "the lock lives in --namespace, as upstream",
        );
        ignored(
            self.scale_down_non_empty_candidates_count != 30,
            "scale-down-non-empty-candidates-count",
            "it has no effect upstream either",
        );
        ignored(
            self.scale_down_candidates_pool_ratio != 0.1,
            "scale-down-candidates-pool-ratio",
            "it has no effect upstream either",
        );
        ignored(
            self.scale_down_candidates_pool_min_count != 50,
            "scale-down-candidates-pool-min-count",
            "it has no effect upstream either",
        );
        let missing = "not implemented by this autoscaler yet";
        ignored(
            !self.node_deletion_batcher_interval.is_zero(),
            "node-deletion-batcher-interval",
            "nodes are deleted with one DeleteNodes call each; not implemented yet",
        );
        ignored(
            self.dynamic_node_delete_delay_after_taint_enabled,
            "dynamic-node-delete-delay-after-taint-enabled",
            missing,
        );
        ignored(
            self.node_removal_latency_tracking_enabled,
            "node-removal-latency-tracking-enabled",
            missing,
        );
        ignored(
            self.max_node_skip_eval_time_tracker_enabled,
            "max-node-skip-eval-time-tracker-enabled",
            missing,
        );
        ignored(
            self.enable_graceful_degradation,
            "enable-graceful-degradation",
            missing,
        );
        ignored(self.salvo_scale_up, "salvo-scale-up", missing);
        ignored(
            self.scaleup_simulation_for_skipped_node_groups_enabled,
            "scaleup-simulation-for-skipped-node-groups-enabled",
            missing,
        );
        ignored(
            self.enable_csi_node_aware_scheduling,
            "enable-csi-node-aware-scheduling",
            missing,
        );
        ignored(
            self.parallel_scale_up,
            "parallel-scale-up",
            "scale-ups of several groups run one after the other",
        );
        ignored(self.profiling, "profiling", "there is no pprof endpoint");
        ignored(
            self.debugging_snapshot_enabled,
            "debugging-snapshot-enabled",
            "use /decisions instead",
        );
        out
    }
}
