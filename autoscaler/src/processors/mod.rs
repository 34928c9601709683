//! Processors (upstream's `processors`): the steps of the loop that
//! upstream lets a distribution replace or extend, gathered in
//! [`Processors`] (upstream's `AutoscalingProcessors`). The loop
//! (`crate::core`) runs them in this order:
//!
//! - [`customresources`]: before the cluster state is counted, the nodes
//!   whose DRA devices are not published yet, or whose CSI drivers are not
//!   registered yet (unready), and how far ready nodes' devices are from
//!   their templates';
//! - [`nodeinfosprovider`]: the template node of every node group;
//! - [`pods`]: the pod-list processors, from the unschedulable pods to the
//!   pods scale-up should help; with `--enable-provisioning-requests`,
//!   [`provreq`]'s after them; with `--enable-proactive-scaleup`,
//!   [`podinjection`]'s first and last;
//! - [`nodegroups`]: the node groups scale-up may consider;
//! - [`status`]: what is told of the scale-up once it is done.

pub mod capacitybuffer;
pub mod customresources;
pub mod nodegroups;
pub mod nodeinfosprovider;
pub mod podinjection;
pub mod pods;
pub mod provreq;
pub mod status;

use std::sync::Arc;

use nodegroups::NodeGroupListProcessor;
use nodeinfosprovider::TemplateNodes;
use pods::PodListProcessors;
use status::{ScaleUpStatusProcessor, default_scale_up_status_processors};

use crate::cache::ClusterCache;
use crate::capacitybuffer::BufferPodInjection;
use crate::simulator::dynamicresources::comparator::NodeResourcesComparator;

/// Every processor of one autoscaler (upstream's `AutoscalingProcessors`).
pub struct Processors {
    /// Template nodes per group (upstream's `TemplateNodeInfoProvider`),
    /// with the copies of real nodes it caches across loops.
    pub template_nodes: TemplateNodes,
    /// Ready nodes' devices against their templates' (upstream's DRA
    /// custom-resources processor's comparator).
    pub dra_comparator: NodeResourcesComparator,
    /// From the unschedulable pods to the pods to help.
    pub pod_list: PodListProcessors,
    /// The node groups scale-up may consider.
    pub node_group_list: Vec<Box<dyn NodeGroupListProcessor>>,
    /// What is told of each scale-up.
    pub scale_up_status: Vec<Box<dyn ScaleUpStatusProcessor>>,
}

impl Processors {
    /// `--capacity-buffer-pod-injection-enabled`: the buffers' fake pods
    /// first in the pod-list chain, and their status processor first.
    pub fn add_buffer_injection(&mut self, injection: Arc<BufferPodInjection>) {
        self.pod_list
            .add_first(Box::new(capacitybuffer::CapacityBufferPodListProcessor(
                injection.clone(),
            )));
        self.scale_up_status.insert(
            0,
            Box::new(capacitybuffer::FakePodsScaleUpStatusProcessor(injection)),
        );
    }

    /// `--enable-proactive-scaleup`: the controllers' missing pods first in
    /// the chain (before the buffers', as upstream wires them), the
    /// `--pod-injection-limit` last, and the fake pods' status processor
    /// first.
    pub fn add_proactive_scale_up(&mut self, cache: Arc<ClusterCache>, limit: usize) {
        self.pod_list
            .add_first(Box::new(podinjection::PodInjectionPodListProcessor(cache)));
        self.pod_list
            .add(Box::new(podinjection::EnforceInjectedPodsLimitProcessor {
                limit,
            }));
        self.scale_up_status
            .insert(0, Box::new(podinjection::FakePodsScaleUpStatusProcessor));
    }
}

impl Default for Processors {
    /// Upstream's default processors.
    fn default() -> Self {
        Self {
            template_nodes: TemplateNodes::default(),
            dra_comparator: NodeResourcesComparator::default(),
            pod_list: PodListProcessors::default(),
            node_group_list: Vec::new(),
            scale_up_status: default_scale_up_status_processors(),
        }
    }
}
