//! Processors (upstream's `processors`): the steps of the loop that
//! upstream lets a distribution replace or extend, gathered in
//! [`Processors`] (upstream's `AutoscalingProcessors`). The loop
//! (`crate::core`) runs them in this order:
//!
//! - [`nodeinfosprovider`]: the template node of every node group;
//! - [`pods`]: the pod-list processors, from the unschedulable pods to the
//!   pods scale-up should help; with `--enable-provisioning-requests`,
//!   [`provreq`]'s after them; with `--enable-proactive-scaleup`,
//!   [`podinjection`]'s first and last;
//! - [`nodegroups`]: the node groups scale-up may consider;
//! - [`status`]: what is told of the scale-up once it is done.

pub mod capacitybuffer;
pub mod nodegroups;
pub mod nodeinfosprovider;
pub mod podinjection;
pub mod pods;
pub mod provreq;
pub mod status;

use nodegroups::NodeGroupListProcessor;
use nodeinfosprovider::TemplateNodes;
use pods::PodListProcessors;
use status::{ScaleUpStatusProcessor, default_scale_up_status_processors};

/// Every processor of one autoscaler (upstream's `AutoscalingProcessors`).
pub struct Processors {
    /// Template nodes per group (upstream's `TemplateNodeInfoProvider`),
    /// with the copies of real nodes it caches across loops.
    pub template_nodes: TemplateNodes,
    /// From the unschedulable pods to the pods to help.
    pub pod_list: PodListProcessors,
    /// The node groups scale-up may consider.
    pub node_group_list: Vec<Box<dyn NodeGroupListProcessor>>,
    /// What is told of each scale-up.
    pub scale_up_status: Vec<Box<dyn ScaleUpStatusProcessor>>,
}

impl Default for Processors {
    /// Upstream's default processors.
    fn default() -> Self {
        Self {
            template_nodes: TemplateNodes::default(),
            pod_list: PodListProcessors::default(),
            node_group_list: Vec::new(),
            scale_up_status: default_scale_up_status_processors(),
        }
    }
}
