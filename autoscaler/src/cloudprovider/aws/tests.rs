use std::time::{Duration, SystemTime};

use super::*;

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
