//! Leader election (`autoscaler::leaderelection`) on the embedded API
//! server: one leader at a time, renewal, and take-over once the lease
//! expires, with the Lease's holder and transitions as written.

use std::time::{Duration, SystemTime};

use autoscaler::leaderelection::LeaderElection;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

fn election(identity: &str) -> LeaderElection {
    LeaderElection {
        namespace: "kube-system".into(),
        name: "cluster-autoscaler".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    }
}

#[tokio::test]
async fn one_leader_at_a_time_until_the_lease_expires() {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    let t0 = SystemTime::now();
    let (a, b) = (election("a"), election("b"));
    assert!(a.try_acquire_or_renew(&client, t0).await.unwrap());
    assert!(
        !b.try_acquire_or_renew(&client, t0 + Duration::from_secs(5))
            .await
            .unwrap()
    );
    assert!(
        a.try_acquire_or_renew(&client, t0 + Duration::from_secs(6))
            .await
            .unwrap(),
        "renewal"
    );
    assert!(
        !b.try_acquire_or_renew(&client, t0 + Duration::from_secs(20))
            .await
            .unwrap(),
        "renewed at 6 s, valid until 21 s"
    );
    assert!(
        b.try_acquire_or_renew(&client, t0 + Duration::from_secs(22))
            .await
            .unwrap(),
        "expired: taken over"
    );
    let lease = Api::<Lease>::namespaced(client, "kube-system")
        .get("cluster-autoscaler")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
}
