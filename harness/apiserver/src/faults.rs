//! Fault injection: the API server misbehaving on purpose, as a real one
//! does under load or during an upgrade, for the clients under test.
//!
//! A [`Rule`] picks requests by verb and resource (`pods/eviction` names a
//! subresource) and gives a share of them a [`Fault`]: an error (500, 429
//! with `Retry-After`, 409), a timeout (held, then 504), added latency, or,
//! for watches, a 410 Gone at once or a stream that sends nothing. Open
//! watches can also be cut ([`Faults::cut_watches`]). Which requests are hit
//! is deterministic: a rule of rate `r` hits the k-th matching request when
//! `ceil(k * r)` grows (the first matching request is always hit), so a run
//! injects the same faults each time.
//!
//! Faults apply only to requests from outside the testbed (over TLS, or
//! through [`crate::ApiServer::client_under_test`]): the testbed's own
//! scheduler, controllers and kwok keep a healthy server, as the control
//! plane's components would behind a flaky load balancer in front of the
//! autoscaler. Every fault injected is counted by kind.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::rbac::Attributes;

/// What a matching request gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Fault {
    /// 500 InternalError.
    InternalError,
    /// 429 TooManyRequests with a `Retry-After` header.
    #[serde(rename_all = "camelCase")]
    TooManyRequests {
        /// The `Retry-After` value, in seconds.
        retry_after_seconds: u64,
    },
    /// 409 Conflict: the object has been modified.
    Conflict,
    /// Held this long, then 504 Timeout.
    Timeout {
        /// How long the request hangs, in milliseconds.
        millis: u64,
    },
    /// Served, this much later.
    Latency {
        /// Added latency in milliseconds.
        millis: u64,
    },
    /// A watch answered with an `ERROR` event, 410 Expired, at once.
    WatchGone,
    /// A watch held open that sends nothing, then ends as a watch ends at
    /// its timeout: after `millis`, or at the watch's own timeout when that
    /// comes first or `millis` is not given.
    WatchStall {
        /// How long the watch stays silent, in milliseconds.
        #[serde(default)]
        millis: Option<u64>,
    },
}

impl Fault {
    /// The name counts are kept under.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::InternalError => "500",
            Fault::TooManyRequests { .. } => "429",
            Fault::Conflict => "409",
            Fault::Timeout { .. } => "timeout",
            Fault::Latency { .. } => "latency",
            Fault::WatchGone => "410",
            Fault::WatchStall { .. } => "stalled watch",
        }
    }

    /// Whether this fault is for watches only.
    fn watch_only(&self) -> bool {
        matches!(self, Fault::WatchGone | Fault::WatchStall { .. })
    }
}

/// Which requests get a fault, and how many of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The verb (`create`, `patch`, `watch`, ...; `write` for `create`,
    /// `update`, `patch`, `delete` and `deletecollection`); any when absent.
    #[serde(default)]
    pub verb: Option<String>,
    /// The resource, `resource/subresource` for a subresource; any when
    /// absent.
    #[serde(default)]
    pub resource: Option<String>,
    /// The fault.
    pub fault: Fault,
    /// The share of matching requests hit, in (0, 1].
    #[serde(default = "one")]
    pub rate: f64,
    /// At most this many faults from this rule; unlimited when absent.
    #[serde(default)]
    pub times: Option<u64>,
}

fn one() -> f64 {
    1.0
}

impl Rule {
    /// Checks the rule's values, naming the field that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rate > 0.0 && self.rate <= 1.0) {
            return Err(format!(
                "rate: {} is not in (0, 1] (the share of matching requests hit)",
                self.rate
            ));
        }
        if self.fault.watch_only() && self.verb.as_deref().is_some_and(|v| v != "watch") {
            return Err(format!(
                "fault: {} applies to watches only, not to verb {:?}",
                self.fault.name(),
                self.verb.as_deref().unwrap_or_default()
            ));
        }
        Ok(())
    }

    fn matches(&self, attrs: &Attributes) -> bool {
        let resource = match &attrs.subresource {
            Some(s) => format!("{}/{s}", attrs.resource),
            None => attrs.resource.clone(),
        };
        self.verb
            .as_deref()
            .is_none_or(|v| v == attrs.verb || (v == "write" && is_write(attrs.verb)))
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && (!self.fault.watch_only() || attrs.verb == "watch")
    }
}

/// A rule with what it has done so far.
#[derive(Debug)]
struct Armed {
    rule: Rule,
    matched: u64,
    injected: u64,
}

impl Armed {
    /// Counts a matching request; whether it gets the fault.
    fn hit(&mut self) -> bool {
        if self.rule.times.is_some_and(|t| self.injected >= t) {
            return false;
        }
        let before = (self.matched as f64 * self.rule.rate).ceil();
        self.matched += 1;
        let after = (self.matched as f64 * self.rule.rate).ceil();
        if after > before {
            self.injected += 1;
            true
        } else {
            false
        }
    }
}

/// The server's faults: rules, counts, and the signal that cuts watches.
#[derive(Debug)]
pub struct Faults {
    rules: Mutex<Vec<Armed>>,
    injected: Mutex<BTreeMap<String, u64>>,
    /// Bumped to cut open watches: the count and the resource (all when
    /// `None`).
    cuts: watch::Sender<(u64, Option<String>)>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            rules: Mutex::default(),
            injected: Mutex::default(),
            cuts: watch::Sender::new((0, None)),
        }
    }
}

/// What the faults are now: the rules and every fault injected so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The rules in force.
    pub rules: Vec<Rule>,
    /// Faults injected, by [`Fault::name`] (and `"watch cut"`).
    pub injected: BTreeMap<String, u64>,
}

impl Report {
    /// All faults injected.
    pub fn total(&self) -> u64 {
        self.injected.values().sum()
    }
}

impl Faults {
    /// Adds a rule, after the ones already in force (the first rule a
    /// request matches and hits decides its fault).
    pub fn add(&self, rule: Rule) -> Result<(), String> {
        rule.validate()?;
        lock(&self.rules).push(Armed {
            rule,
            matched: 0,
            injected: 0,
        });
        Ok(())
    }

    /// Replaces every rule.
    pub fn set(&self, rules: Vec<Rule>) -> Result<(), String> {
        for (i, r) in rules.iter().enumerate() {
            r.validate().map_err(|e| format!("rules[{i}].{e}"))?;
        }
        *lock(&self.rules) = rules
            .into_iter()
            .map(|rule| Armed {
                rule,
                matched: 0,
                injected: 0,
            })
            .collect();
        Ok(())
    }

    /// Removes the first rule equal to `rule`; the others keep their
    /// counts, so a rate carries on where it was. Whether one was there.
    pub fn remove(&self, rule: &Rule) -> bool {
        let mut rules = lock(&self.rules);
        match rules.iter().position(|a| a.rule == *rule) {
            Some(i) => {
                rules.remove(i);
                true
            }
            None => false,
        }
    }

    /// Removes every rule (the counts stay).
    pub fn clear(&self) {
        lock(&self.rules).clear();
    }

    /// The fault for a request, if a rule hits it (and counts it).
    pub fn check(&self, attrs: &Attributes) -> Option<Fault> {
        let mut rules = lock(&self.rules);
        let fault = rules
            .iter_mut()
            .find_map(|a| (a.rule.matches(attrs) && a.hit()).then(|| a.rule.fault.clone()))?;
        drop(rules);
        self.count(fault.name(), 1);
        Some(fault)
    }

    /// Ends every open watch on `resource` (all resources when `None`);
    /// clients see the stream close and watch again.
    pub fn cut_watches(&self, resource: Option<&str>) {
        self.cuts.send_modify(|(n, r)| {
            *n += 1;
            *r = resource.map(str::to_string);
        });
    }

    /// A receiver that tells a watch stream when it is cut.
    pub fn cuts(&self) -> watch::Receiver<(u64, Option<String>)> {
        self.cuts.subscribe()
    }

    /// Counts `n` faults of kind `name`.
    pub fn count(&self, name: &str, n: u64) {
        *lock(&self.injected).entry(name.to_string()).or_default() += n;
    }

    /// The rules and counts.
    pub fn report(&self) -> Report {
        Report {
            rules: lock(&self.rules).iter().map(|a| a.rule.clone()).collect(),
            injected: lock(&self.injected).clone(),
        }
    }
}

/// Whether a verb changes objects.
fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The name cut watches are counted under.
pub const WATCH_CUT: &str = "watch cut";

/// Marks a request (an `http::Request` extension) as coming from a
/// client under test, so that faults apply to it; the name is the client's
/// in the log of writes ([`crate::writes`]).
#[derive(Debug, Clone)]
pub struct UnderTest(pub std::sync::Arc<str>);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn attrs(verb: &'static str, resource: &str, sub: Option<&str>) -> Attributes {
        Attributes {
            verb,
            group: String::new(),
            resource: resource.into(),
            subresource: sub.map(str::to_string),
            namespace: "default".into(),
            name: "x".into(),
        }
    }

    #[test]
    fn the_write_verb_matches_every_change_and_no_read() {
        let f = Faults::default();
        f.add(Rule {
            verb: Some("write".into()),
            resource: None,
            fault: Fault::InternalError,
            rate: 1.0,
            times: None,
        })
        .unwrap();
        for verb in ["create", "update", "patch", "delete", "deletecollection"] {
            assert!(f.check(&attrs(verb, "pods", None)).is_some(), "{verb}");
        }
        for verb in ["get", "list", "watch"] {
            assert!(f.check(&attrs(verb, "pods", None)).is_none(), "{verb}");
        }
    }

    #[test]
    fn removing_a_rule_leaves_the_others_where_they_were() {
        let f = Faults::default();
        let quarter = Rule {
            verb: Some("patch".into()),
            resource: Some("nodes".into()),
            fault: Fault::InternalError,
            rate: 0.25,
            times: None,
        };
        let slow = Rule {
            verb: None,
            resource: None,
            fault: Fault::Latency { millis: 10 },
            rate: 1.0,
            times: None,
        };
        f.add(quarter.clone()).unwrap();
        f.add(slow.clone()).unwrap();
        // The quarter rule hits its first request.
        assert_eq!(
            f.check(&attrs("patch", "nodes", None)),
            Some(Fault::InternalError)
        );
        assert!(f.remove(&slow));
        assert!(!f.remove(&slow), "already gone");
        let hits: Vec<bool> = (0..4)
            .map(|_| f.check(&attrs("patch", "nodes", None)).is_some())
            .collect();
        assert_eq!(
            hits,
            [false, false, false, true],
            "the quarter rule carries on from its second request"
        );
        assert_eq!(f.report().rules, [quarter]);
    }

    #[test]
    fn a_rate_hits_that_share_of_matching_requests_deterministically() {
        let f = Faults::default();
        f.add(Rule {
            verb: Some("patch".into()),
            resource: Some("nodes".into()),
            fault: Fault::InternalError,
            rate: 0.25,
            times: None,
        })
        .unwrap();
        let hits: Vec<bool> = (0..8)
            .map(|_| f.check(&attrs("patch", "nodes", None)).is_some())
            .collect();
        assert_eq!(hits, [true, false, false, false, true, false, false, false]);
        assert!(
            f.check(&attrs("get", "nodes", None)).is_none(),
            "other verb"
        );
        assert!(
            f.check(&attrs("patch", "nodes", Some("status"))).is_none(),
            "a subresource is another resource"
        );
        assert_eq!(f.report().injected["500"], 2);
    }

    #[test]
    fn times_limits_a_rule_and_subresources_are_named() {
        let f = Faults::default();
        f.add(Rule {
            verb: Some("create".into()),
            resource: Some("pods/eviction".into()),
            fault: Fault::TooManyRequests {
                retry_after_seconds: 1,
            },
            rate: 1.0,
            times: Some(2),
        })
        .unwrap();
        let a = attrs("create", "pods", Some("eviction"));
        assert!(f.check(&a).is_some());
        assert!(f.check(&a).is_some());
        assert!(f.check(&a).is_none(), "only twice");
        assert_eq!(f.report().total(), 2);
    }

    #[test]
    fn bad_rules_are_refused_naming_the_field() {
        let f = Faults::default();
        let bad_rate = Rule {
            verb: None,
            resource: None,
            fault: Fault::Conflict,
            rate: 1.5,
            times: None,
        };
        assert!(f.add(bad_rate.clone()).unwrap_err().starts_with("rate:"));
        let watch_on_patch = Rule {
            verb: Some("patch".into()),
            fault: Fault::WatchGone,
            rate: 1.0,
            ..bad_rate
        };
        let e = f.set(vec![watch_on_patch]).unwrap_err();
        assert!(e.starts_with("rules[0].fault:"), "{e}");
        let parsed: Result<Vec<Rule>, _> =
            serde_json::from_str(r#"[{"fault": {"kind": "explode"}}]"#);
        assert!(parsed.unwrap_err().to_string().contains("unknown variant"));
    }
}
