//! The API server misbehaving ([`apiserver::faults`]) and the safety
//! invariants watched over the whole scenario ([`crate::invariants`]).
//!
//! Faults hit only the autoscaler under test (in-process through its own
//! client, or a binary over TLS), never the testbed's scheduler,
//! controllers or kwok. They need the embedded API server: on a cluster in
//! a container these scenarios are skipped.

use std::time::Duration;

use apiserver::faults::{Fault, Faults, Rule};
use cucumber::{given, then, when};

use crate::world::{CaWorld, StepResult};

fn fault_of(code: &str) -> Result<Fault, String> {
    match code {
        "500" => Ok(Fault::InternalError),
        "429" => Ok(Fault::TooManyRequests {
            retry_after_seconds: 1,
        }),
        "409" => Ok(Fault::Conflict),
        other => Err(format!("no such fault {other:?}: use 500, 429 or 409")),
    }
}

/// The cluster's faults (starting the cluster first).
async fn faults(w: &mut CaWorld) -> Result<&Faults, String> {
    let r = w.running().await?;
    let api = r
        .cluster
        .api_server()
        .ok_or("API faults need the embedded API server")?;
    Ok(&api.server().faults)
}

/// Adds a rule for `verb` requests on `resource` (`"any"`: all) to the
/// cluster's API server: a `rate` share of them, the first `times` only
/// when given.
async fn inject(
    w: &mut CaWorld,
    (verb, resource): (&str, &str),
    fault: Fault,
    rate: f64,
    times: Option<u64>,
) -> StepResult {
    let any = |s: &str| (s != "any").then(|| s.to_string());
    let rule = Rule {
        verb: any(verb),
        resource: any(resource),
        fault,
        rate,
        times,
    };
    faults(w).await?.add(rule)
}

#[given(regex = r#"^the API server answers (\d+)% of "(\S+)" requests on "(\S+)" with (\d{3})$"#)]
#[when(regex = r#"^the API server answers (\d+)% of "(\S+)" requests on "(\S+)" with (\d{3})$"#)]
async fn share_fails(
    w: &mut CaWorld,
    percent: u32,
    verb: String,
    resource: String,
    code: String,
) -> StepResult {
    let rate = f64::from(percent) / 100.0;
    inject(w, (&verb, &resource), fault_of(&code)?, rate, None).await
}

/// Creates, updates, patches and deletes of every resource.
#[given(regex = r"^the API server answers (\d+)% of writes with (\d{3})$")]
#[when(regex = r"^the API server answers (\d+)% of writes with (\d{3})$")]
async fn share_of_writes_fails(w: &mut CaWorld, percent: u32, code: String) -> StepResult {
    let rate = f64::from(percent) / 100.0;
    inject(w, ("write", "any"), fault_of(&code)?, rate, None).await
}

/// Every request of the autoscaler held for a while (scenario seconds),
/// then served: the rule is taken away again when the time has passed.
#[when(regex = r"^the API server holds every request for (\d+) seconds$")]
async fn stall(w: &mut CaWorld, seconds: u64) -> StepResult {
    let hold = Duration::from_secs(seconds);
    let real = w.running().await?.real(hold);
    let millis = u64::try_from(real.as_millis()).unwrap_or(u64::MAX);
    let rule = Rule {
        verb: None,
        resource: None,
        fault: Fault::Latency { millis },
        rate: 1.0,
        times: None,
    };
    faults(w).await?.add(rule.clone())?;
    w.pass(hold).await?;
    faults(w).await?.remove(&rule);
    Ok(())
}

/// Cuts every open watch at each interval for the whole time.
#[when(regex = r"^the API server cuts every watch every (\d+) seconds for (\d+) minutes?$")]
async fn cut_watches_often(w: &mut CaWorld, seconds: u64, minutes: u64) -> StepResult {
    if seconds == 0 {
        return Err("cutting watches every 0 seconds: give an interval".into());
    }
    for _ in 0..(minutes * 60 / seconds) {
        w.pass(Duration::from_secs(seconds)).await?;
        faults(w).await?.cut_watches(None);
    }
    Ok(())
}

#[given(
    regex = r#"^the API server answers the next (\d+) "(\S+)" requests? on "(\S+)" with (\d{3})$"#
)]
#[when(
    regex = r#"^the API server answers the next (\d+) "(\S+)" requests? on "(\S+)" with (\d{3})$"#
)]
async fn next_fail(
    w: &mut CaWorld,
    times: u64,
    verb: String,
    resource: String,
    code: String,
) -> StepResult {
    inject(w, (&verb, &resource), fault_of(&code)?, 1.0, Some(times)).await
}

#[given(
    regex = r#"^the API server times out the next (\d+) "(\S+)" requests? on "(\S+)" after (\d+) seconds$"#
)]
#[when(
    regex = r#"^the API server times out the next (\d+) "(\S+)" requests? on "(\S+)" after (\d+) seconds$"#
)]
async fn next_time_out(
    w: &mut CaWorld,
    times: u64,
    verb: String,
    resource: String,
    seconds: u64,
) -> StepResult {
    // Scenario seconds: a binary's real time is scaled.
    let hold = w.running().await?.real(Duration::from_secs(seconds));
    let millis = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX);
    let fault = Fault::Timeout { millis };
    inject(w, (&verb, &resource), fault, 1.0, Some(times)).await
}

#[given(regex = r"^the API server adds (\d+) ms to every request$")]
#[when(regex = r"^the API server adds (\d+) ms to every request$")]
async fn latency(w: &mut CaWorld, millis: u64) -> StepResult {
    inject(w, ("any", "any"), Fault::Latency { millis }, 1.0, None).await
}

#[given(regex = r#"^the API server answers the next (\d+) watch(?:es)? on "(\S+)" with 410 Gone$"#)]
#[when(regex = r#"^the API server answers the next (\d+) watch(?:es)? on "(\S+)" with 410 Gone$"#)]
async fn gone_watches(w: &mut CaWorld, times: u64, resource: String) -> StepResult {
    inject(w, ("watch", &resource), Fault::WatchGone, 1.0, Some(times)).await
}

/// Without a duration the watch stays silent until its own timeout, which a
/// client sets in real time (client-go: 5 to 10 minutes), whatever the time
/// scale of a binary.
#[given(
    regex = r#"^the API server stalls the next (\d+) watch(?:es)? on "(\S+)"(?: for (\d+) minutes?)?$"#
)]
#[when(
    regex = r#"^the API server stalls the next (\d+) watch(?:es)? on "(\S+)"(?: for (\d+) minutes?)?$"#
)]
async fn stalled_watches(
    w: &mut CaWorld,
    times: u64,
    resource: String,
    minutes: String,
) -> StepResult {
    let millis = match minutes.parse::<u64>() {
        Ok(m) => {
            // Scenario minutes: a binary's real time is scaled.
            let real = w.running().await?.real(Duration::from_secs(m * 60));
            Some(u64::try_from(real.as_millis()).unwrap_or(u64::MAX))
        }
        Err(_) => None,
    };
    let fault = Fault::WatchStall { millis };
    inject(w, ("watch", &resource), fault, 1.0, Some(times)).await
}

#[given(
    regex = r#"^the API server delays the next (\d+) watch(?:es)? on "(\S+)" by (\d+) seconds?$"#
)]
#[when(
    regex = r#"^the API server delays the next (\d+) watch(?:es)? on "(\S+)" by (\d+) seconds?$"#
)]
async fn delayed_watches(
    w: &mut CaWorld,
    times: u64,
    resource: String,
    seconds: u64,
) -> StepResult {
    let real = w.running().await?.real(Duration::from_secs(seconds));
    let millis = u64::try_from(real.as_millis()).unwrap_or(u64::MAX);
    inject(
        w,
        ("watch", &resource),
        Fault::Latency { millis },
        1.0,
        Some(times),
    )
    .await
}

#[when(regex = r#"^the API server cuts every watch(?: on "(\S+)")?$"#)]
async fn cut_watches(w: &mut CaWorld, resource: String) -> StepResult {
    let resource = (!resource.is_empty()).then_some(resource);
    faults(w).await?.cut_watches(resource.as_deref());
    Ok(())
}

#[when("the API server injects no more faults")]
async fn no_more_faults(w: &mut CaWorld) -> StepResult {
    let r = w.running().await?;
    if let Some(api) = r.cluster.api_server() {
        api.server().faults.clear();
    }
    Ok(())
}

#[given(regex = r"^the API server keeps the last (\d+) changes of each resource for watches$")]
async fn tiny_window(w: &mut CaWorld, changes: usize) -> StepResult {
    let r = w.running().await?;
    let api = r
        .cluster
        .api_server()
        .ok_or("a watch window needs the embedded API server")?;
    api.server()
        .store
        .set_window(apiserver::WindowPolicy::changes(changes));
    Ok(())
}

#[then(
    regex = r"^the API server answered at least (\d+) watch(?:es)? of the autoscaler with 410 Gone$"
)]
async fn expired_at_least(w: &mut CaWorld, least: u64) -> StepResult {
    let r = w.running().await?;
    let api = r
        .cluster
        .api_server()
        .ok_or("a watch window needs the embedded API server")?;
    let expired = api.server().expired_watches();
    if expired < least {
        return Err(format!(
            "the API server answered {expired} of the autoscaler's watches with 410 Gone (window expired), fewer than {least}"
        ));
    }
    Ok(())
}

#[then(regex = r"^the API server injected at least (\d+) faults?$")]
async fn injected_at_least(w: &mut CaWorld, least: u64) -> StepResult {
    let report = faults(w).await?.report();
    if report.total() < least {
        return Err(format!(
            "the API server injected {} faults ({:?}), fewer than {least}: the rule never matched the autoscaler's requests",
            report.total(),
            report.injected
        ));
    }
    Ok(())
}

#[given("the safety invariants are observed throughout")]
async fn observe(w: &mut CaWorld) -> StepResult {
    if w.running.is_some() {
        return Err(
            "the safety invariants must be observed from the start, before the cluster runs".into(),
        );
    }
    w.observe = true;
    Ok(())
}

#[then("no safety invariant was violated")]
async fn no_violation(w: &mut CaWorld) -> StepResult {
    let r = w.running().await?;
    let observer = r
        .observer
        .as_ref()
        .ok_or("no observer: add \"Given the safety invariants are observed throughout\"")?;
    let mut broken: Vec<String> = observer
        .violations()
        .into_iter()
        .map(|v| format!("at {} s: {}", v.at_seconds, v.what))
        .collect();
    broken.extend(observer.check_end(&r.cluster.client()).await?);
    if broken.is_empty() {
        return Ok(());
    }
    let injected = r.cluster.api_server().map(|api| {
        let report = api.server().faults.report();
        format!(
            " ({} faults injected: {:?})",
            report.total(),
            report.injected
        )
    });
    Err(format!(
        "safety invariants violated{}:\n  {}",
        injected.unwrap_or_default(),
        broken.join("\n  ")
    ))
}

#[then(regex = r#"^the node group "(\S+)" never had more than (\d+) nodes?$"#)]
async fn never_more_than(w: &mut CaWorld, group: String, most: usize) -> StepResult {
    let r = w.running().await?;
    let observer = r
        .observer
        .as_ref()
        .ok_or("no observer: add \"Given the safety invariants are observed throughout\"")?;
    let max = observer.max_nodes(&group);
    if max > most {
        return Err(format!(
            "node group {group} had {max} nodes at one time, more than {most}: a duplicate scale-up"
        ));
    }
    Ok(())
}
