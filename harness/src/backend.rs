//! Where a test cluster runs: the [`ClusterBackend`] trait and its
//! implementations, chosen by name (`testbed run --cluster ...`).
//!
//! | backend | what runs | fake nodes | time |
//! |---|---|---|---|
//! | [`Embedded`] | this process: API server, scheduler, controllers, kwok | our kwok, in process | virtual or real |
//! | [`TestbedImage`] | our `testbed up` in a container (an image built from this repository) | our kwok, in the container | real |
//! | [`KwokImage`] | kwok's all-in-one `kwok/cluster` image (kube-apiserver, etcd, scheduler, controllers, kwok) | the image's kwok controller | real |
//! | [`KindNode`] | a kind node image (`kindest/node`) set up with kubeadm | our kwok, in this process against it | real |
//!
//! Each gives the suite a [`Cluster`]: a client, a clock, a kubeconfig for
//! an autoscaler binary and a way to make fake nodes (Nodes annotated
//! `kwok.x-k8s.io/node: fake`, which every one of the kwok controllers
//! above makes Ready). Containers go through [`crate::container`] and are
//! removed with the cluster.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use kube::Client;
use simclock::Clock;

use crate::cluster::{Cluster, ClusterBuilder, ClusterError, Remote};
use crate::container::{Container, ContainerSpec, Engine};

/// The kwok cluster image used when none is given (kwok 0.7, Kubernetes 1.33).
pub const DEFAULT_KWOK_IMAGE: &str = "registry.k8s.io/kwok/cluster:v0.7.0-k8s.v1.33.0";
/// The kind node image used when none is given.
pub const DEFAULT_KIND_IMAGE: &str = "docker.io/kindest/node:v1.33.1";
/// Our testbed's image, as `.ci/run` builds it locally.
pub const DEFAULT_TESTBED_IMAGE: &str = "localhost/testbed:dev";

/// How long a containerised control plane may take to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// A boxed future, so that backends can be chosen at run time.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Somewhere a test cluster can run.
pub trait ClusterBackend: Send + Sync {
    /// The name `--cluster` takes.
    fn name(&self) -> &'static str;

    /// Whether the cluster runs in this process, so that scenarios may use
    /// virtual time and the API server's in-process hooks (not in a container).
    fn in_process(&self) -> bool {
        false
    }

    /// Starts a cluster as `setup` describes (its objects created, its
    /// kwok stages and time scale applied where the backend allows).
    fn start(&self, setup: ClusterBuilder) -> BoxFuture<'_, Result<Cluster, ClusterError>>;
}

/// The backends by name, with an image override for the container ones.
pub fn by_name(name: &str, image: Option<&str>) -> Result<Box<dyn ClusterBackend>, String> {
    let given = image;
    let image = |default: &str| given.unwrap_or(default).to_string();
    match name {
        "embedded" => match given {
            None => Ok(Box::new(Embedded)),
            Some(_) => Err("--cluster-image: the embedded cluster runs no image".into()),
        },
        "testbed" => Ok(Box::new(TestbedImage {
            image: image(DEFAULT_TESTBED_IMAGE),
        })),
        "kwok" => Ok(Box::new(KwokImage {
            image: image(DEFAULT_KWOK_IMAGE),
        })),
        "kind" => Ok(Box::new(KindNode {
            image: image(DEFAULT_KIND_IMAGE),
        })),
        other => Err(format!(
            "--cluster {other:?}: not a cluster backend (embedded, testbed, kwok, kind)"
        )),
    }
}

/// The cluster in this process ([`ClusterBuilder::start`]).
pub struct Embedded;

impl ClusterBackend for Embedded {
    fn name(&self) -> &'static str {
        "embedded"
    }

    fn in_process(&self) -> bool {
        true
    }

    fn start(&self, setup: ClusterBuilder) -> BoxFuture<'_, Result<Cluster, ClusterError>> {
        Box::pin(setup.start())
    }
}

/// Our `testbed up` in a container of `image` (built from this
/// repository: `.ci/run` shows how).
pub struct TestbedImage {
    /// The image.
    pub image: String,
}

/// Where `testbed up` writes its kubeconfig in the container.
const TESTBED_KUBECONFIG: &str = "/tmp/kubeconfig";
/// The port `testbed up` serves on in the container.
const TESTBED_PORT: u16 = 6443;

impl ClusterBackend for TestbedImage {
    fn name(&self) -> &'static str {
        "testbed"
    }

    fn start(&self, setup: ClusterBuilder) -> BoxFuture<'_, Result<Cluster, ClusterError>> {
        Box::pin(async move {
            let mut args = vec![
                "up".to_string(),
                "--address".into(),
                "0.0.0.0".into(),
                "--port".into(),
                TESTBED_PORT.to_string(),
                "--kubeconfig".into(),
                TESTBED_KUBECONFIG.into(),
            ];
            if let Some(scale) = setup.time_scale {
                args.extend(["--time-scale".into(), scale.to_string()]);
            }
            if setup.capi {
                args.push("--capi".into());
            }
            let spec = ContainerSpec {
                image: self.image.clone(),
                args,
                ports: vec![TESTBED_PORT],
                name_prefix: "testbed".into(),
                ..Default::default()
            };
            let (container, port) = start_container(self.name(), &setup, &spec).await?;
            // The kubeconfig appears once the server listens.
            let kubeconfig = match wait_for(READY_TIMEOUT, "the testbed's kubeconfig", || async {
                container
                    .read_file(TESTBED_KUBECONFIG)
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
            {
                Ok(k) => k,
                Err(e) => return Err(with_logs(e, &container).await),
            };
            let text = String::from_utf8_lossy(&kubeconfig)
                .replace(
                    &format!("https://0.0.0.0:{TESTBED_PORT}"),
                    &format!("https://127.0.0.1:{port}"),
                )
                .to_string();
            let remote = remote_with_kubeconfig(container, &text)?;
            finish(remote, setup).await
        })
    }
}

/// kwok's all-in-one cluster image: kube-apiserver on port 8080 without
/// authentication, and kwok managing the Nodes annotated
/// `kwok.x-k8s.io/node: fake`.
pub struct KwokImage {
    /// The image.
    pub image: String,
}

impl ClusterBackend for KwokImage {
    fn name(&self) -> &'static str {
        "kwok"
    }

    fn start(&self, setup: ClusterBuilder) -> BoxFuture<'_, Result<Cluster, ClusterError>> {
        Box::pin(async move {
            let spec = ContainerSpec {
                image: self.image.clone(),
                ports: vec![8080],
                name_prefix: "kwok-cluster".into(),
                ..Default::default()
            };
            let (container, port) = start_container(self.name(), &setup, &spec).await?;
            let text = format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: kwok\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: kwok\n  user: {{}}\ncontexts:\n- name: kwok\n  context:\n    cluster: kwok\n    user: kwok\ncurrent-context: kwok\n"
            );
            let remote = remote_with_kubeconfig(container, &text)?;
            finish(remote, setup).await
        })
    }
}

/// A kind node image, set up as kind does (kubeadm in the privileged
/// container), with our kwok controller run from this process against it
/// for the fake nodes.
pub struct KindNode {
    /// The image.
    pub image: String,
}

/// kubeadm's configuration for a one-node control plane reachable from the
/// host through the published port.
const KIND_KUBEADM_CONFIG: &str = "apiVersion: kubeadm.k8s.io/v1beta3
kind: InitConfiguration
nodeRegistration:
  criSocket: unix:///run/containerd/containerd.sock
  kubeletExtraArgs:
    fail-swap-on: \"false\"
---
apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
apiServer:
  certSANs: [\"127.0.0.1\", \"localhost\"]
controlPlaneEndpoint: \"127.0.0.1:6443\"
networking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/16
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
failSwapOn: false
";

impl ClusterBackend for KindNode {
    fn name(&self) -> &'static str {
        "kind"
    }

    fn start(&self, setup: ClusterBuilder) -> BoxFuture<'_, Result<Cluster, ClusterError>> {
        Box::pin(async move {
            let spec = ContainerSpec {
                image: self.image.clone(),
                ports: vec![6443],
                privileged: true,
                tmpfs: vec!["/tmp".into(), "/run".into()],
                // As kind: containerd's overlay snapshots need /var off
                // the container's own overlay, and the kubelet reads the
                // host's kernel modules.
                volumes: vec!["/var".into()],
                binds: vec!["/lib/modules:/lib/modules:ro".into()],
                name_prefix: "kind-node".into(),
                ..Default::default()
            };
            let (container, port) = start_container(self.name(), &setup, &spec).await?;
            let ready = wait_for(READY_TIMEOUT, "the kind node's containerd", || async {
                container
                    .exec(&["systemctl", "is-active", "containerd"])
                    .await
                    .map_err(|e| e.to_string())
            })
            .await;
            if let Err(e) = ready {
                return Err(with_logs(e, &container).await);
            }
            let write = format!(
                "mkdir -p /kind && cat > /kind/kubeadm.conf <<'EOF'\n{KIND_KUBEADM_CONFIG}EOF"
            );
            container.exec(&["sh", "-c", &write]).await?;
            container
                .exec(&[
                    "kubeadm",
                    "init",
                    "--config=/kind/kubeadm.conf",
                    "--skip-phases=preflight",
                    "--skip-token-print",
                ])
                .await?;
            let admin = container.read_file("/etc/kubernetes/admin.conf").await?;
            let text = String::from_utf8_lossy(&admin)
                .replace(
                    "https://127.0.0.1:6443",
                    &format!("https://127.0.0.1:{port}"),
                )
                .to_string();
            let mut remote = remote_with_kubeconfig(container, &text)?;
            let client = client_for(&remote.kubeconfig).await?;
            let mut kwok_config = setup.kwok.clone();
            kwok_config.stages_from_cluster = false;
            let mut stages = kwok::default_stages();
            stages.extend(setup.stages.iter().cloned());
            remote.tasks.push(tokio::spawn(
                kwok::Controller::new(client, Clock::new(), kwok_config, stages).run(),
            ));
            finish(remote, setup).await
        })
    }
}

/// A container backend serves the API only: Cluster API controllers and
/// the AWS bridge are the embedded cluster's (or, for Cluster API, the
/// testbed image's `--capi`).
fn refuse_in_process_only(backend: &str, setup: &ClusterBuilder) -> Result<(), ClusterError> {
    if let Some(e) = setup.errors.first() {
        return Err(ClusterError::Invalid(e.clone()));
    }
    if setup.aws.is_some() {
        return Err(ClusterError::Backend(format!(
            "the {backend} backend has no AWS bridge: AWS node groups run on the embedded cluster"
        )));
    }
    if setup.capi && backend != "testbed" {
        return Err(ClusterError::Backend(format!(
            "the {backend} backend serves no Cluster API controllers: use the embedded or testbed backend"
        )));
    }
    Ok(())
}

/// Checks that `backend` can serve `setup`, starts `spec` and returns the
/// container with the host port of its first published port.
async fn start_container(
    backend: &str,
    setup: &ClusterBuilder,
    spec: &ContainerSpec,
) -> Result<(Container, u16), ClusterError> {
    refuse_in_process_only(backend, setup)?;
    let container = Engine::discover().await?.run(spec).await?;
    let port = spec
        .ports
        .first()
        .and_then(|p| container.host_port(*p))
        .ok_or_else(|| {
            ClusterError::Backend(format!(
                "container {}: its port was not published",
                container.name
            ))
        })?;
    Ok((container, port))
}

/// `e` with the container's last lines of output, which say why it is not ready.
async fn with_logs(e: ClusterError, container: &Container) -> ClusterError {
    match e {
        ClusterError::Timeout {
            what,
            timeout,
            seen,
        } => ClusterError::Timeout {
            what: format!("{what} (container {})", container.name),
            timeout,
            seen: format!("{seen}; its last output:\n{}", container.logs(20).await),
        },
        other => other,
    }
}

fn remote_with_kubeconfig(container: Container, text: &str) -> Result<Remote, ClusterError> {
    let dir = tempfile::tempdir()
        .map_err(|e| ClusterError::Backend(format!("creating a temp dir: {e}")))?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, text)
        .map_err(|e| ClusterError::Backend(format!("writing {}: {e}", kubeconfig.display())))?;
    Ok(Remote {
        container,
        kubeconfig,
        dir,
        tasks: Vec::new(),
    })
}

async fn client_for(kubeconfig: &Path) -> Result<Client, ClusterError> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| {
        ClusterError::Backend(format!("reading kubeconfig {}: {e}", kubeconfig.display()))
    })?;
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .map_err(|e| {
            ClusterError::Backend(format!("loading kubeconfig {}: {e}", kubeconfig.display()))
        })?;
    Client::try_from(config)
        .map_err(|e| ClusterError::Backend(format!("a client for {}: {e}", kubeconfig.display())))
}

/// Waits for the API server to answer, then creates the setup's objects.
async fn finish(remote: Remote, setup: ClusterBuilder) -> Result<Cluster, ClusterError> {
    let client = client_for(&remote.kubeconfig).await?;
    let probe = client.clone();
    wait_for(READY_TIMEOUT, "the API server answers", || {
        let probe = probe.clone();
        async move { probe.apiserver_version().await.map_err(|e| e.to_string()) }
    })
    .await?;
    // The namespace controller and default ServiceAccount come a little
    // after the server answers in a real control plane.
    let cluster = Cluster::remote(client, Clock::new(), remote);
    for obj in setup.objects {
        cluster.create(obj).await?;
    }
    Ok(cluster)
}

/// Polls `attempt` every 500 ms (real time) until it succeeds, for at most
/// `timeout`.
async fn wait_for<T, F, Fut>(
    timeout: Duration,
    what: &str,
    mut attempt: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(seen) if tokio::time::Instant::now() >= deadline => {
                return Err(ClusterError::Timeout {
                    what: what.to_string(),
                    timeout,
                    seen,
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_are_chosen_by_name_and_a_wrong_one_is_named() {
        for name in ["embedded", "testbed", "kwok", "kind"] {
            assert_eq!(by_name(name, None).map(|b| b.name()), Ok(name));
        }
        assert!(by_name("embedded", None).is_ok_and(|b| b.in_process()));
        assert!(by_name("kwok", None).is_ok_and(|b| !b.in_process()));
        let err = by_name("minikube", None).err();
        assert_eq!(
            err.as_deref(),
            Some("--cluster \"minikube\": not a cluster backend (embedded, testbed, kwok, kind)")
        );
        assert!(by_name("embedded", Some("x")).is_err());
    }
}
