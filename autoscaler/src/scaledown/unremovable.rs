//! Why a node is not removed (upstream's `simulator.UnremovableReason`):
//! the reasons the planner, selection and the status report share. Their
//! names are rendered only here.

use crate::simulator::drainability::BlockingReason;

/// Why a node is not removed: upstream's reason, with the details that
/// some reasons carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unremovable {
    /// A reason without details.
    Because(UnremovableReason),
    /// `BlockedByPod` with the pod and its reason.
    BlockedByPod {
        /// `namespace/name`.
        pod: String,
        /// The blocking reason.
        reason: BlockingReason,
    },
    /// `UnexpectedError` with what failed.
    UnexpectedError(String),
}

impl From<UnremovableReason> for Unremovable {
    fn from(r: UnremovableReason) -> Self {
        Self::Because(r)
    }
}

ca_names! {
    /// Every `UnremovableReason` upstream 1.36 and 1.37 have, in their
    /// order: their names are the labels of `unremovable_nodes_count`, all
    /// of which are reported every loop.
    pub enum UnremovableReason {
        /// No reason.
        NoReason,
        /// The scale-down-disabled annotation.
        ScaleDownDisabledAnnotation,
        /// Unready and `--scale-down-unready-enabled=false`.
        ScaleDownUnreadyDisabled,
        /// In no node group.
        NotAutoscaled,
        /// Unneeded for less than the unneeded time.
        NotUnneededLongEnough,
        /// Unready for less than the unready time.
        NotUnreadyLongEnough,
        /// The group is at min size.
        NodeGroupMinSizeReached,
        /// The group's deletion count is reached.
        NodeGroupMaxDeletionCountReached,
        /// An atomic group's scale-down failed.
        AtomicScaleDownFailed,
        /// Removal would go below `--cores-total` or `--memory-total` min.
        MinimalResourceLimitExceeded,
        /// Being deleted.
        CurrentlyBeingDeleted,
        /// Utilization above the threshold.
        NotUnderutilized,
        /// Unneeded for another reason.
        NotUnneededOtherReason,
        /// Found unremovable recently; not checked again yet.
        RecentlyUnremovable,
        /// Its pods fit nowhere else.
        NoPlaceToMovePods,
        /// A pod blocks the removal.
        BlockedByPod,
        /// Something failed.
        UnexpectedError,
        /// No node info.
        NoNodeInfo,
        /// An on-completion pod blocks the removal.
        BlockedByOnCompletionPod,
    }
}

impl UnremovableReason {
    /// The `reason` label of `unremovable_nodes_count`: upstream prints the
    /// reason with `fmt.Sprintf("%v", reason)`, which from CA 1.37 (the
    /// type's `String` method) is its name, `BlockedByPod`; 1.36 printed its
    /// number, `15` (docs/reference/ca-rules.md §2.5).
    pub fn metric_label(self) -> &'static str {
        self.as_str()
    }

    /// Whether the reason delays a removal (upstream's `isBlocker`): any
    /// but no reason and the waits for the unneeded or unready time.
    pub fn is_blocker(self) -> bool {
        !matches!(
            self,
            Self::NoReason | Self::NotUnneededLongEnough | Self::NotUnreadyLongEnough
        )
    }
}

impl Unremovable {
    /// Upstream's name (the metric label).
    pub fn as_str(&self) -> &'static str {
        self.reason().as_str()
    }

    /// The reason without its details.
    pub fn reason(&self) -> UnremovableReason {
        match self {
            Self::Because(r) => *r,
            Self::BlockedByPod { .. } => UnremovableReason::BlockedByPod,
            Self::UnexpectedError(_) => UnremovableReason::UnexpectedError,
        }
    }

    /// The text the decision record gives: the name, and for
    /// `BlockedByPod` the pod and its reason (`BlockedByPod: ns/pod
    /// NotReplicated`).
    pub fn text(&self) -> String {
        match self {
            Self::BlockedByPod { pod, reason } => format!("BlockedByPod: {pod} {reason}"),
            other => other.as_str().to_string(),
        }
    }

    /// Reads [`Self::text`] back (an `UnexpectedError`'s details are not
    /// in the text).
    pub fn from_text(text: &str) -> Option<Self> {
        if let Some(rest) = text.strip_prefix("BlockedByPod: ") {
            let (pod, reason) = rest.rsplit_once(' ')?;
            let reason = *BlockingReason::ALL.iter().find(|r| r.as_str() == reason)?;
            let pod = pod.to_string();
            return Some(Self::BlockedByPod { pod, reason });
        }
        let reason = *UnremovableReason::ALL.iter().find(|r| r.as_str() == text)?;
        Some(match reason {
            UnremovableReason::UnexpectedError => Self::UnexpectedError(String::new()),
            r => Self::Because(r),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_reason_reads_back_from_its_text() {
        let mut all: Vec<Unremovable> = UnremovableReason::ALL
            .iter()
            .filter(|r| **r != UnremovableReason::UnexpectedError)
            .map(|r| Unremovable::Because(*r))
            .collect();
        all.push(Unremovable::UnexpectedError(String::new()));
        all.extend(
            BlockingReason::ALL
                .iter()
                .map(|r| Unremovable::BlockedByPod {
                    pod: "team a/p 1".into(),
                    reason: *r,
                }),
        );
        for u in all {
            assert_eq!(Unremovable::from_text(&u.text()), Some(u.clone()), "{u:?}");
        }
        assert_eq!(
            Unremovable::BlockedByPod {
                pod: "ns/p".into(),
                reason: BlockingReason::NotReplicated
            }
            .text(),
            "BlockedByPod: ns/p NotReplicated"
        );
        assert_eq!(Unremovable::from_text("Tired"), None);
        assert_eq!(Unremovable::from_text("BlockedByPod: ns/p Tired"), None);
    }
}
