//! AWS in the testbed: an emulator of the AWS API ([`Emulator`], moto's
//! server mode on loopback) and the [`Bridge`] that plays the instances'
//! kubelets: every running instance of an Auto Scaling group becomes a kwok
//! Node named `<asg>-<instance id>` (as a bootstrap script that overrides
//! the hostname names it), with `spec.providerID`
//! `aws:///<zone>/<instance id>`, the instance type's capacity and the
//! generic labels, plus what the ASG's
//! `k8s.io/cluster-autoscaler/node-template/{label,taint,resources}/` tags
//! say (as a node bootstrap script passes them to the kubelet); a
//! terminated instance's Node goes away.
//!
//! Every call to the emulator goes through [`simclock::outside::outside`],
//! so the bridge works in virtual time: the clock stands still while a
//! request is with the emulator.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use aws_sdk_autoscaling::config::{BehaviorVersion, Credentials, Region};
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use simclock::Clock;
use simclock::outside::outside;

/// The emulator's region.
pub const REGION: &str = "us-east-1";
/// The emulator's credentials (it accepts any).
pub const CREDENTIALS: (&str, &str) = ("testing", "testing");

const LABEL_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/label/";
const TAINT_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/taint/";
const RESOURCES_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/resources/";

/// Why the emulator could not be used.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// moto is not installed: tests that need it skip with this reason.
    #[error(
        "the AWS emulator is not installed (moto's server mode: pip install 'moto[server]'): {0}"
    )]
    NotInstalled(String),
    /// It did not start or answer.
    #[error("the AWS emulator did not start: {0}")]
    Start(String),
    /// A call to it failed.
    #[error("AWS emulator: {0}")]
    Call(String),
}

/// moto's server, started on a free loopback port; stopped when dropped.
pub struct Emulator {
    child: Child,
    /// Closing it stops the server.
    stdin: Option<ChildStdin>,
    endpoint: String,
}

impl Emulator {
    /// Starts `python3 -m moto.server` (or `$MOTO_PYTHON -m moto.server`)
    /// and waits until it answers.
    pub async fn start() -> Result<Self, EmulatorError> {
        let python = std::env::var("MOTO_PYTHON").unwrap_or_else(|_| "python3".into());
        let probe = Command::new(&python)
            .args(["-c", "import moto.server, flask"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| EmulatorError::NotInstalled(format!("running {python}: {e}")))?;
        if !probe.success() {
            return Err(EmulatorError::NotInstalled(format!(
                "{python} cannot import moto.server"
            )));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| EmulatorError::Start(format!("finding a free port: {e}")))?
            .port();
        // Through a shell that stops the server when our end of its stdin
        // closes, so that the server goes with this process however it
        // ends (a test harness may never drop a shared emulator).
        let script = format!(
            "\"$0\" -m moto.server -H 127.0.0.1 -p {port} >/dev/null 2>&1 & server=$!; \
             read _; kill $server; wait $server"
        );
        let mut child = Command::new("sh")
            .args(["-c", &script, &python])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| EmulatorError::Start(format!("{python} -m moto.server: {e}")))?;
        let stdin = child.stdin.take();
        let emulator = Self {
            child,
            stdin,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let addr = format!("127.0.0.1:{port}");
        let up = outside(async move {
            for _ in 0..300 {
                if tokio::net::TcpStream::connect(&addr).await.is_ok() {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            false
        })
        .await
        .map_err(|e| EmulatorError::Start(e.to_string()))?;
        if !up {
            return Err(EmulatorError::Start(format!(
                "nothing listens on {} after 30 s",
                emulator.endpoint
            )));
        }
        Ok(emulator)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Auto Scaling and EC2 clients of the emulator.
    pub fn clients(&self) -> Clients {
        Clients::new(&self.endpoint)
    }

    /// Forgets every resource (moto's `/moto-api/reset`).
    pub async fn reset(&self) -> Result<(), EmulatorError> {
        let host = self.endpoint.trim_start_matches("http://").to_string();
        outside(async move {
            let mut stream = tokio::net::TcpStream::connect(&host)
                .await
                .map_err(|e| format!("{host}: {e}"))?;
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let request = format!(
                "POST /moto-api/reset HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            stream
                .write_all(request.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
            let mut response = String::new();
            stream
                .read_to_string(&mut response)
                .await
                .map_err(|e| e.to_string())?;
            if response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.0 200") {
                Ok(())
            } else {
                Err(format!(
                    "reset answered {}",
                    response.lines().next().unwrap_or_default()
                ))
            }
        })
        .await
        .map_err(|e| EmulatorError::Call(e.to_string()))?
        .map_err(EmulatorError::Call)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// SDK clients of an endpoint, with the emulator's region and credentials.
#[derive(Clone, Debug)]
pub struct Clients {
    /// Auto Scaling.
    pub asg: aws_sdk_autoscaling::Client,
    /// EC2.
    pub ec2: aws_sdk_ec2::Client,
}

impl Clients {
    /// Clients of `endpoint`.
    pub fn new(endpoint: &str) -> Self {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let credentials = Credentials::new(CREDENTIALS.0, CREDENTIALS.1, None, None, "testbed");
        let asg = aws_sdk_autoscaling::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(endpoint)
            .credentials_provider(credentials.clone())
            .http_client(http.clone())
            .build();
        let ec2 = aws_sdk_ec2::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new(REGION))
            .endpoint_url(endpoint)
            .credentials_provider(credentials)
            .http_client(http)
            .build();
        Self {
            asg: aws_sdk_autoscaling::Client::from_conf(asg),
            ec2: aws_sdk_ec2::Client::from_conf(ec2),
        }
    }
}

/// An Auto Scaling group to create, launching `instance_type` from a launch
/// template of the same name.
#[derive(Debug, Clone)]
pub struct AsgSpec {
    /// The ASG's (and its launch template's) name.
    pub name: String,
    /// What its launch template launches.
    pub instance_type: String,
    /// `MinSize`.
    pub min: usize,
    /// `MaxSize`.
    pub max: usize,
    /// `DesiredCapacity`.
    pub desired: usize,
    /// Its availability zone.
    pub zone: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl Clients {
    /// Creates the launch template and the ASG (its instances launch at
    /// once, up to the desired capacity).
    pub async fn create_asg(&self, spec: &AsgSpec) -> Result<(), EmulatorError> {
        let clients = self.clone();
        let spec = spec.clone();
        outside(async move {
            let data = aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id("ami-12c6146b")
                .instance_type(aws_sdk_ec2::types::InstanceType::from(
                    spec.instance_type.as_str(),
                ))
                .build();
            clients
                .ec2
                .create_launch_template()
                .launch_template_name(&spec.name)
                .launch_template_data(data)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "creating launch template {}: {}",
                        spec.name,
                        aws_sdk_ec2::error::DisplayErrorContext(e)
                    )
                })?;
            let tags = spec
                .tags
                .iter()
                .map(|(k, v)| {
                    aws_sdk_autoscaling::types::Tag::builder()
                        .key(k)
                        .value(v)
                        .resource_id(&spec.name)
                        .resource_type("auto-scaling-group")
                        .propagate_at_launch(true)
                        .build()
                })
                .collect();
            let template = aws_sdk_autoscaling::types::LaunchTemplateSpecification::builder()
                .launch_template_name(&spec.name)
                .version("$Default")
                .build();
            clients
                .asg
                .create_auto_scaling_group()
                .auto_scaling_group_name(&spec.name)
                .launch_template(template)
                .min_size(to_i32(spec.min))
                .max_size(to_i32(spec.max))
                .desired_capacity(to_i32(spec.desired))
                .availability_zones(&spec.zone)
                .set_tags(Some(tags))
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "creating ASG {}: {}",
                        spec.name,
                        aws_sdk_autoscaling::error::DisplayErrorContext(e)
                    )
                })?;
            Ok::<_, String>(())
        })
        .await
        .map_err(|e| EmulatorError::Call(e.to_string()))?
        .map_err(EmulatorError::Call)
    }

    /// Creates or replaces tags of an ASG.
    pub async fn tag_asg(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), EmulatorError> {
        let asg = self.asg.clone();
        let tags: Vec<_> = tags
            .iter()
            .map(|(k, v)| {
                aws_sdk_autoscaling::types::Tag::builder()
                    .key(k)
                    .value(v)
                    .resource_id(name)
                    .resource_type("auto-scaling-group")
                    .propagate_at_launch(true)
                    .build()
            })
            .collect();
        let name = name.to_string();
        outside(async move {
            asg.create_or_update_tags()
                .set_tags(Some(tags))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| {
                    format!(
                        "tagging ASG {name}: {}",
                        aws_sdk_autoscaling::error::DisplayErrorContext(e)
                    )
                })
        })
        .await
        .map_err(|e| EmulatorError::Call(e.to_string()))?
        .map_err(EmulatorError::Call)
    }

    /// An ASG's desired capacity and the ids of its instances not
    /// terminating.
    pub async fn asg_size(&self, name: &str) -> Result<(usize, Vec<String>), EmulatorError> {
        let asg = self.asg.clone();
        let name = name.to_string();
        outside(async move {
            let out = asg
                .describe_auto_scaling_groups()
                .auto_scaling_group_names(&name)
                .send()
                .await
                .map_err(|e| aws_sdk_autoscaling::error::DisplayErrorContext(e).to_string())?;
            let g = out
                .auto_scaling_groups()
                .first()
                .ok_or_else(|| format!("no ASG {name}"))?;
            let desired = g
                .desired_capacity()
                .and_then(|d| usize::try_from(d).ok())
                .unwrap_or(0);
            let live = g
                .instances()
                .iter()
                .filter(|i| {
                    !i.lifecycle_state()
                        .is_some_and(|s| s.as_str().starts_with("Terminat"))
                })
                .filter_map(|i| i.instance_id().map(str::to_string))
                .collect();
            Ok::<_, String>((desired, live))
        })
        .await
        .map_err(|e| EmulatorError::Call(e.to_string()))?
        .map_err(EmulatorError::Call)
    }
}

/// What the bridge knows of one instance.
#[derive(Debug, Clone)]
struct InstanceInfo {
    zone: String,
    instance_type: String,
}

/// Makes the emulator's ASG instances kwok Nodes (see the module docs).
pub struct Bridge {
    clients: Clients,
    client: Client,
    clock: Clock,
    interval: Duration,
    instances: HashMap<String, InstanceInfo>,
    shapes: HashMap<String, BTreeMap<String, String>>,
}

impl Bridge {
    /// A bridge from the emulator at `endpoint` to the cluster of `client`,
    /// looking every `interval` (how long a new instance takes to register).
    pub fn new(endpoint: &str, client: Client, clock: Clock, interval: Duration) -> Self {
        Self {
            clients: Clients::new(endpoint),
            client,
            clock,
            interval,
            instances: HashMap::new(),
            shapes: HashMap::new(),
        }
    }

    /// Syncs forever.
    pub async fn run(mut self) {
        loop {
            if let Err(e) = self.sync().await {
                tracing::warn!("aws bridge: {e}");
            }
            tokio::time::sleep(self.interval).await;
        }
    }

    /// One pass: creates the Nodes of new running instances and deletes
    /// those whose instance is gone.
    pub async fn sync(&mut self) -> Result<(), EmulatorError> {
        let asg = self.clients.asg.clone();
        let groups = outside(async move {
            let mut out = Vec::new();
            let mut token = None;
            loop {
                let page = asg
                    .describe_auto_scaling_groups()
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| aws_sdk_autoscaling::error::DisplayErrorContext(e).to_string())?;
                out.extend(page.auto_scaling_groups().iter().cloned());
                match page.next_token() {
                    Some(t) => token = Some(t.to_string()),
                    None => return Ok::<_, String>(out),
                }
            }
        })
        .await
        .map_err(|e| EmulatorError::Call(e.to_string()))?
        .map_err(EmulatorError::Call)?;
        // Instance id → (its ASG, the ASG's tags).
        let mut live: HashMap<String, (String, BTreeMap<String, String>)> = HashMap::new();
        for g in &groups {
            let tags: BTreeMap<String, String> = g
                .tags()
                .iter()
                .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
                .collect();
            for i in g.instances() {
                let state = i.lifecycle_state().map(|s| s.as_str()).unwrap_or_default();
                if let (Some(id), false) = (i.instance_id(), state.starts_with("Terminat")) {
                    let asg = g.auto_scaling_group_name().unwrap_or_default().to_string();
                    live.insert(id.to_string(), (asg, tags.clone()));
                }
            }
        }
        self.learn(live.keys().cloned().collect()).await?;
        let nodes: Api<Node> = Api::all(self.client.clone());
        let existing = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| EmulatorError::Call(format!("listing nodes: {e}")))?;
        let mut registered = HashSet::new();
        for n in existing.items {
            let id = n
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(|p| p.strip_prefix("aws:///"))
                .and_then(|p| p.split_once('/'))
                .map(|(_, id)| id.to_string());
            let (Some(id), Some(name)) = (id, n.metadata.name.clone()) else {
                continue;
            };
            if live.contains_key(&id) {
                registered.insert(id);
            } else {
                match nodes.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {
                        tracing::info!("aws bridge: instance {id} is gone: node {name} deleted")
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => {
                        return Err(EmulatorError::Call(format!("deleting node {name}: {e}")));
                    }
                }
            }
        }
        for (id, (asg, tags)) in &live {
            if registered.contains(id) {
                continue;
            }
            let Some(info) = self.instances.get(id).cloned() else {
                continue;
            };
            let capacity = self.shape(&info.instance_type).await?;
            let node_name = format!("{asg}-{id}");
            let node = node_manifest(id, &node_name, &info, capacity, tags);
            let node: Node = serde_json::from_value(node)
                .map_err(|e| EmulatorError::Call(format!("node of instance {id}: {e}")))?;
            match nodes.create(&PostParams::default(), &node).await {
                Ok(_) => tracing::info!(
                    "aws bridge: instance {id} registered as node {node_name} at {}",
                    self.clock.rfc3339()
                ),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    return Err(EmulatorError::Call(format!(
                        "creating node {node_name}: {e}"
                    )));
                }
            }
        }
        self.instances.retain(|id, _| live.contains_key(id));
        Ok(())
    }

    /// Reads the instances not seen before (DescribeInstances).
    async fn learn(&mut self, ids: Vec<String>) -> Result<(), EmulatorError> {
        let new: Vec<String> = ids
            .into_iter()
            .filter(|id| !self.instances.contains_key(id))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let ec2 = self.clients.ec2.clone();
        let found = outside(async move {
            let out = ec2
                .describe_instances()
                .set_instance_ids(Some(new))
                .send()
                .await
                .map_err(|e| aws_sdk_ec2::error::DisplayErrorContext(e).to_string())?;
            Ok::<_, String>(
                out.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .filter_map(|i| {
                        let id = i.instance_id()?.to_string();
                        let info = InstanceInfo {
                            zone: i
                                .placement()
                                .and_then(|p| p.availability_zone())
                                .unwrap_or_default()
                                .to_string(),
                            instance_type: i
                                .instance_type()
                                .map(|t| t.as_str().to_string())
                                .unwrap_or_default(),
                        };
                        Some((id, info))
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await
        .map_err(|e| EmulatorError::Call(e.to_string()))?
        .map_err(EmulatorError::Call)?;
        self.instances.extend(found);
        Ok(())
    }

    /// The capacity of an instance type (DescribeInstanceTypes, once).
    async fn shape(
        &mut self,
        instance_type: &str,
    ) -> Result<BTreeMap<String, String>, EmulatorError> {
        if let Some(s) = self.shapes.get(instance_type) {
            return Ok(s.clone());
        }
        let ec2 = self.clients.ec2.clone();
        let name = instance_type.to_string();
        let shape = outside(async move {
            let out = ec2
                .describe_instance_types()
                .instance_types(aws_sdk_ec2::types::InstanceType::from(name.as_str()))
                .send()
                .await
                .map_err(|e| aws_sdk_ec2::error::DisplayErrorContext(e).to_string())?;
            let info = out
                .instance_types()
                .first()
                .ok_or_else(|| format!("unknown instance type {name}"))?;
            let cpu = info
                .v_cpu_info()
                .and_then(|v| v.default_v_cpus())
                .unwrap_or(2);
            let memory = info
                .memory_info()
                .and_then(|m| m.size_in_mib())
                .unwrap_or(4096);
            let gpus: i32 = info
                .gpu_info()
                .map(|g| g.gpus().iter().filter_map(|d| d.count()).sum())
                .unwrap_or(0);
            let mut shape = BTreeMap::from([
                ("cpu".to_string(), cpu.to_string()),
                ("memory".to_string(), format!("{memory}Mi")),
                ("pods".to_string(), "110".to_string()),
            ]);
            if gpus > 0 {
                shape.insert("nvidia.com/gpu".into(), gpus.to_string());
            }
            Ok::<_, String>(shape)
        })
        .await
        .map_err(|e| EmulatorError::Call(e.to_string()))?
        .map_err(EmulatorError::Call)?;
        self.shapes.insert(instance_type.to_string(), shape.clone());
        Ok(shape)
    }
}

/// The Node an instance's kubelet registers.
fn node_manifest(
    id: &str,
    name: &str,
    info: &InstanceInfo,
    mut capacity: BTreeMap<String, String>,
    tags: &BTreeMap<String, String>,
) -> Value {
    let region = info
        .zone
        .char_indices()
        .last()
        .map_or(info.zone.as_str(), |(i, _)| &info.zone[..i]);
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), name.to_string()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), "amd64".to_string()),
        (
            "node.kubernetes.io/instance-type".to_string(),
            info.instance_type.clone(),
        ),
        ("topology.kubernetes.io/zone".to_string(), info.zone.clone()),
        (
            "topology.kubernetes.io/region".to_string(),
            region.to_string(),
        ),
    ]);
    let mut taints = Vec::new();
    for (k, v) in tags {
        if let Some(label) = k.strip_prefix(LABEL_PREFIX) {
            labels.insert(label.to_string(), v.clone());
        } else if let Some(key) = k.strip_prefix(TAINT_PREFIX) {
            if let Some((value, effect)) = v.rsplit_once(':') {
                taints.push(json!({"key": key, "value": value, "effect": effect}));
            }
        } else if let Some(resource) = k.strip_prefix(RESOURCES_PREFIX) {
            capacity.insert(resource.to_string(), v.clone());
        }
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
            "annotations": {kwok::NODE_ANNOTATION: "fake"}},
        "spec": {"providerID": format!("aws:///{}/{id}", info.zone), "taints": taints},
        "status": {"capacity": capacity, "allocatable": capacity},
    })
}
