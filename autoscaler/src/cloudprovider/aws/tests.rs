use std::time::{Duration, SystemTime};

use super::*;
use crate::cloudprovider::{ErrorClass, InstanceState};

#[test]
fn provider_ids_name_zone_and_instance() {
    assert_eq!(
        provider_id("us-east-1a", "i-0abc"),
        "aws:///us-east-1a/i-0abc"
    );
    assert_eq!(
        parse_provider_id("aws:///us-east-1a/i-0abc").unwrap(),
        ("us-east-1a", "i-0abc")
    );
    for bad in [
        "kwok://n-1",
        "aws:///i-0abc",
        "aws:///us-east-1a/",
        "aws:///a/b/c",
    ] {
        assert_eq!(
            parse_provider_id(bad).unwrap_err().to_string(),
            format!("wrong id: expected format aws:///<zone>/<name>, got {bad}")
        );
    }
}

fn activity(secs: u64, failed: bool, message: &str) -> Activity {
    Activity {
        start: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
        failed,
        message: message.into(),
    }
}

#[test]
fn only_failures_since_our_last_resize_make_a_group_unavailable() {
    let capacity = "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a).";
    // Newest first, as AWS lists them.
    let activities = [
        activity(300, false, "Launching a new EC2 instance: i-1"),
        activity(200, true, capacity),
        activity(
            100,
            true,
            "You have requested more vCPU capacity than your current vCPU limit of 32 allows",
        ),
    ];
    let at = |s: u64| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
    assert_eq!(
        failed_activity(&activities, at(150)).as_deref(),
        Some(capacity)
    );
    assert_eq!(failed_activity(&activities, at(250)), None);
    // Before any resize of ours, any failure on the first page counts.
    assert_eq!(
        failed_activity(&activities, None).as_deref(),
        Some(capacity)
    );
    assert_eq!(failed_activity(&activities[..1], None), None);
}

/// A client whose every request fails: these tests read no cluster, and
/// the events they record are dropped.
fn unreachable_cluster() -> kube::Client {
    let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
        Err::<http::Response<kube::client::Body>, _>(std::io::Error::other(
            "no API server in this test",
        ))
    });
    kube::Client::new(service, "default")
}

/// A provider whose cache holds `asg`, and nothing reachable behind it.
async fn provider_with(asg: Asg, unavailable: Option<&str>) -> AwsProvider {
    let connection = Connection {
        region: Some("us-east-1".into()),
        endpoint: Some("http://127.0.0.1:9".into()),
        credentials: Some(("testing".into(), "testing".into())),
    };
    let api = AwsApi::connect(&connection).await.unwrap();
    let clock = simclock::Clock::new();
    let events = EventRecorder::new(
        unreachable_cluster(),
        clock.clone(),
        false,
        ObjectRef::config_map("kube-system", "cluster-autoscaler-status"),
        false,
    );
    let mut cache = Cache::default();
    for i in &asg.instances {
        cache.by_instance.insert(i.id.clone(), asg.name.clone());
    }
    cache.groups.insert(
        asg.name.clone(),
        Group {
            tags: template::parse_tags(&asg.tags),
            unavailable: unavailable.map(str::to_string),
            instance_type: Ok(("m5.large".into(), template::lookup("m5.large").unwrap())),
            asg,
        },
    );
    AwsProvider {
        shared: Arc::new(Shared {
            api,
            settings: Settings::default(),
            clock,
            events,
            cache: Mutex::new(cache),
            reported: Mutex::new(BTreeSet::new()),
            resize: tokio::sync::Mutex::new(()),
        }),
    }
}

fn pool(desired: usize, instances: &[&str]) -> Asg {
    Asg {
        name: "pool".into(),
        min: 0,
        max: 10,
        desired,
        zones: vec!["us-east-1a".into()],
        instances: instances
            .iter()
            .map(|id| AsgInstance {
                id: id.to_string(),
                zone: "us-east-1a".into(),
                lifecycle: "InService".into(),
            })
            .collect(),
        tags: BTreeMap::new(),
        launch: LaunchSpec::Unknown,
    }
}

#[tokio::test]
async fn capacity_aws_cannot_provide_makes_out_of_resource_placeholders() {
    let why = "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a).";
    let provider = provider_with(pool(3, &["i-1"]), Some(why)).await;
    let group = &provider.node_groups()[0];
    let instances = group.nodes().unwrap();
    let ids: Vec<&str> = instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "aws:///us-east-1a/i-1",
            "aws:///us-east-1a/i-placeholder-pool-1",
            "aws:///us-east-1a/i-placeholder-pool-2"
        ]
    );
    assert_eq!(instances[0].error, None);
    for placeholder in &instances[1..] {
        let error = placeholder.error.as_ref().unwrap();
        assert_eq!(placeholder.state, Some(InstanceState::Creating));
        assert_eq!(error.class, ErrorClass::OutOfResources);
        assert_eq!(error.code, CANNOT_BE_FULFILLED);
        assert!(error.message.ends_with(why), "{}", error.message);
    }
    // While AWS is still launching them, placeholders carry no error.
    let provider = provider_with(pool(3, &["i-1"]), None).await;
    let instances = provider.node_groups()[0].nodes().unwrap();
    assert!(
        instances
            .iter()
            .all(|i| i.error.is_none() && i.state.is_none())
    );
}

#[tokio::test]
async fn nodes_map_to_their_asg_by_provider_id() {
    let provider = provider_with(pool(1, &["i-1"]), None).await;
    let node = |id: &str| -> Node {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "n"}, "spec": {"providerID": id}}),
        )
        .unwrap()
    };
    let group = provider
        .node_group_for_node(&node("aws:///us-east-1a/i-1"))
        .unwrap()
        .unwrap();
    assert_eq!(group.id(), "pool");
    assert!(
        provider
            .node_group_for_node(&node("aws:///us-east-1a/i-2"))
            .unwrap()
            .is_none()
    );
    assert!(
        provider
            .has_instance(&node("aws:///us-east-1a/i-1"))
            .unwrap()
    );
    assert_eq!(
        provider
            .has_instance(&node("aws:///us-east-1a/i-2"))
            .unwrap_err()
            .to_string(),
        "node is not present in aws: could not find instance aws:///us-east-1a/i-2"
    );
}
