//! The Job controller: pods until enough have succeeded (or too many
//! failed), and the Job's status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::json;

use super::controller::Controllers;
use super::pods::owner_ref;

impl Controllers {
    pub(super) async fn reconcile_job(&mut self, k: &str) {
        let Some(job) = self.jobs.get(k).cloned() else {
            return;
        };
        if job.metadata.deletion_timestamp.is_some() {
            return;
        }
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let spec = job.spec.clone().unwrap_or_default();
        let status = job.status.clone().unwrap_or_default();
        let done = status
            .conditions
            .iter()
            .flatten()
            .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
        let owned = self.owned(&ns, &uid);
        let succeeded = owned.iter().filter(|p| p.phase() == "Succeeded").count() as i32;
        let failed = owned.iter().filter(|p| p.phase() == "Failed").count() as i32;
        let active = owned.iter().filter(|p| p.is_active()).count() as i32;
        let ready = owned.iter().filter(|p| p.is_active() && p.ready).count() as i32;
        let parallelism = spec.parallelism.unwrap_or(1);
        let completions = spec.completions;
        let complete = match completions {
            Some(c) => succeeded >= c,
            None => succeeded >= 1 && active == 0,
        };
        if !done && !complete {
            let remaining = completions.map_or(parallelism, |c| c - succeeded);
            let want_active = parallelism.min(remaining);
            let owner = owner_ref(&job);
            for _ in active..want_active {
                let meta = ObjectMeta {
                    generate_name: Some(format!("{}-", job.name_any())),
                    owner_references: Some(vec![owner.clone()]),
                    ..ObjectMeta::default()
                };
                self.create_pod(&ns, &spec.template, meta).await;
            }
        }
        let now = self.clock.rfc3339();
        let mut patch = json!({"active": if complete { 0 } else { active }, "succeeded": succeeded, "failed": failed, "ready": ready});
        if status.start_time.is_none() {
            patch["startTime"] = json!(now);
        }
        if complete && !done {
            patch["completionTime"] = json!(now);
            patch["conditions"] = json!([
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
            ]);
        }
        let same = status.succeeded.unwrap_or(0) == succeeded
            && status.failed.unwrap_or(0) == failed
            && status.active.unwrap_or(0) == patch["active"].as_i64().unwrap_or(0) as i32
            && status.ready.unwrap_or(0) == ready
            && status.start_time.is_some()
            && (!complete || done);
        if !same {
            self.patch_status(&job, patch).await;
        }
    }
}
