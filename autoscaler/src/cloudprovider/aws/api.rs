//! The AWS API as the provider uses it (upstream's `aws_wrapper.go`): the
//! official SDK's Auto Scaling and EC2 clients behind typed calls that
//! return plain data ([`Asg`], [`Activity`], [`Shape`]) or an
//! [`AwsError`] naming the call, its object and AWS's error code.
//!
//! Every call runs through [`simclock::outside::outside`], so that virtual
//! time stands still while a request is with AWS (or an emulator).

use std::collections::BTreeMap;
use std::time::SystemTime;

use aws_config::BehaviorVersion;
use aws_sdk_autoscaling::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_autoscaling::types::Filter;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};

use super::shape::{Arch, Shape};

/// How to reach AWS. Unset fields come from the SDK's usual sources
/// (`AWS_REGION`, `AWS_ENDPOINT_URL`, the credential chain).
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// The region.
    pub region: Option<String>,
    /// Another endpoint for every service (an emulator, a VPC endpoint).
    pub endpoint: Option<String>,
    /// Static credentials (access key id, secret).
    pub credentials: Option<(String, String)>,
}

/// An error from AWS (or from reaching it).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{call} {object}: {message}")]
pub struct AwsError {
    /// The API call (`SetDesiredCapacity`).
    pub call: &'static str,
    /// What it was called on (`ASG pool-a`).
    pub object: String,
    /// AWS's error code (`Throttling`, `ValidationError`), when it sent one.
    pub code: Option<String>,
    /// The whole message.
    pub message: String,
}

impl AwsError {
    fn new<E>(call: &'static str, object: impl Into<String>, e: &E) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error,
    {
        Self {
            call,
            object: object.into(),
            code: e.code().map(str::to_string),
            message: DisplayErrorContext(e).to_string(),
        }
    }

    /// An error found on our side (no AWS error code).
    fn local(call: &'static str, object: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            call,
            object: object.into(),
            code: None,
            message: message.into(),
        }
    }

    fn outside(call: &'static str, object: impl Into<String>, e: std::io::Error) -> Self {
        Self::local(call, object, e.to_string())
    }
}

/// How an ASG makes its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchSpec {
    /// A launch configuration, by name.
    Configuration(String),
    /// A launch template: name (or id) and version (`$Default` when unset).
    Template {
        /// Name, or id when the ASG names it by id.
        name: String,
        /// Whether `name` is an id.
        by_id: bool,
        /// The version.
        version: String,
    },
    /// A mixed instances policy: its instance type overrides, and its
    /// launch template.
    Mixed {
        /// The overrides' instance types, in order.
        overrides: Vec<String>,
        /// The policy's launch template.
        template: Option<Box<LaunchSpec>>,
    },
    /// None that the provider can read.
    Unknown,
}

/// One instance of an ASG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsgInstance {
    /// `i-...`.
    pub id: String,
    /// Its availability zone.
    pub zone: String,
    /// `LifecycleState` (`InService`, `Terminating`, ...).
    pub lifecycle: String,
}

/// An Auto Scaling group as DescribeAutoScalingGroups returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asg {
    /// Its name.
    pub name: String,
    /// `MinSize`.
    pub min: usize,
    /// `MaxSize`.
    pub max: usize,
    /// `DesiredCapacity`.
    pub desired: usize,
    /// `AvailabilityZones`.
    pub zones: Vec<String>,
    /// Its instances.
    pub instances: Vec<AsgInstance>,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// How it launches instances.
    pub launch: LaunchSpec,
}

/// A scaling activity (DescribeScalingActivities), newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    /// When it started.
    pub start: Option<SystemTime>,
    /// Whether its `StatusCode` is `Failed`.
    pub failed: bool,
    /// `StatusMessage` (why it failed), else `Description`.
    pub message: String,
}

/// The SDK clients.
#[derive(Clone)]
pub struct AwsApi {
    asg: aws_sdk_autoscaling::Client,
    ec2: aws_sdk_ec2::Client,
}

impl std::fmt::Debug for AwsApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AwsApi")
    }
}

/// The SDK's HTTPS client on rustls with ring (kube's crypto provider).
pub fn http_client() -> aws_sdk_autoscaling::config::SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// Runs an SDK call outside virtual time ([`simclock::outside`]); `make`
/// gets the object's description for its errors.
async fn outside_call<T, F>(
    call: &'static str,
    object: String,
    make: impl FnOnce(String) -> F,
) -> Result<T, AwsError>
where
    F: std::future::Future<Output = Result<T, AwsError>> + Send + 'static,
    T: Send + 'static,
{
    let future = make(object.clone());
    simclock::outside::outside(future)
        .await
        .map_err(|e| AwsError::outside(call, object, e))?
}

fn to_usize(n: Option<i32>) -> usize {
    n.and_then(|n| usize::try_from(n).ok()).unwrap_or(0)
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl AwsApi {
    /// Loads the SDK configuration (region, endpoint, credentials) and
    /// makes the clients.
    pub async fn connect(connection: &Connection) -> Result<Self, AwsError> {
        let connection = connection.clone();
        simclock::outside::outside(async move {
            let mut loader = aws_config::defaults(BehaviorVersion::latest())
                .http_client(http_client())
                .app_name(
                    aws_config::AppName::new("cluster-autoscaler")
                        .map_err(|e| AwsError::local("configuration", "app name", e.to_string()))?,
                );
            if let Some(r) = connection.region {
                loader = loader.region(aws_config::Region::new(r));
            }
            if let Some(url) = connection.endpoint {
                loader = loader.endpoint_url(url);
            }
            if let Some((id, secret)) = connection.credentials {
                loader = loader.credentials_provider(
                    aws_sdk_autoscaling::config::Credentials::new(id, secret, None, None, "static"),
                );
            }
            let config = loader.load().await;
            if config.region().is_none() {
                return Err(AwsError::local(
                    "configuration",
                    "region",
                    "no AWS region: set AWS_REGION",
                ));
            }
            Ok(Self {
                asg: aws_sdk_autoscaling::Client::new(&config),
                ec2: aws_sdk_ec2::Client::new(&config),
            })
        })
        .await
        .map_err(|e| AwsError::outside("configuration", "the SDK", e))?
    }

    /// DescribeAutoScalingGroups by name (batches of 100) and, when
    /// `tags` is not empty, by tag filters (one filter per tag, ANDed by
    /// AWS: `tag:<key>` = value, or `tag-key` = key when the value is
    /// empty). Both pages through every result.
    pub async fn describe_asgs(
        &self,
        names: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Asg>, AwsError> {
        let mut out = Vec::new();
        for batch in names.chunks(100) {
            let request = self
                .asg
                .describe_auto_scaling_groups()
                .set_auto_scaling_group_names(Some(batch.to_vec()));
            out.extend(self.page_asgs(request, batch.join(",")).await?);
        }
        if !tags.is_empty() {
            let filters = tags
                .iter()
                .map(|(k, v)| {
                    if v.is_empty() {
                        Filter::builder().name("tag-key").values(k.clone()).build()
                    } else {
                        Filter::builder()
                            .name(format!("tag:{k}"))
                            .values(v.clone())
                            .build()
                    }
                })
                .collect();
            let request = self
                .asg
                .describe_auto_scaling_groups()
                .set_filters(Some(filters));
            let what = format!("tags {tags:?}");
            out.extend(self.page_asgs(request, what).await?);
        }
        Ok(out)
    }

    async fn page_asgs(
        &self,
        request: aws_sdk_autoscaling::operation::describe_auto_scaling_groups::builders::DescribeAutoScalingGroupsFluentBuilder,
        what: String,
    ) -> Result<Vec<Asg>, AwsError> {
        const CALL: &str = "DescribeAutoScalingGroups";
        outside_call(CALL, what, |what| async move {
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let page = request
                    .clone()
                    .max_records(100)
                    .set_next_token(token.take())
                    .send()
                    .await
                    .map_err(|e| AwsError::new(CALL, what.clone(), &e))?;
                out.extend(page.auto_scaling_groups().iter().map(asg_from));
                match page.next_token() {
                    Some(t) if !t.is_empty() => token = Some(t.to_string()),
                    _ => return Ok(out),
                }
            }
        })
        .await
    }

    /// SetDesiredCapacity (`HonorCooldown` false).
    pub async fn set_desired_capacity(&self, asg: &str, desired: usize) -> Result<(), AwsError> {
        const CALL: &str = "SetDesiredCapacity";
        let request = self
            .asg
            .set_desired_capacity()
            .auto_scaling_group_name(asg)
            .desired_capacity(to_i32(desired))
            .honor_cooldown(false);
        outside_call(CALL, format!("ASG {asg}"), |o| async move {
            request
                .send()
                .await
                .map(|_| ())
                .map_err(|e| AwsError::new(CALL, o, &e))
        })
        .await
    }

    /// TerminateInstanceInAutoScalingGroup, lowering the desired capacity.
    pub async fn terminate_instance(&self, instance: &str) -> Result<(), AwsError> {
        const CALL: &str = "TerminateInstanceInAutoScalingGroup";
        let request = self
            .asg
            .terminate_instance_in_auto_scaling_group()
            .instance_id(instance)
            .should_decrement_desired_capacity(true);
        outside_call(CALL, format!("instance {instance}"), |o| async move {
            request
                .send()
                .await
                .map(|_| ())
                .map_err(|e| AwsError::new(CALL, o, &e))
        })
        .await
    }

    /// The first page of DescribeScalingActivities (newest first).
    pub async fn scaling_activities(&self, asg: &str) -> Result<Vec<Activity>, AwsError> {
        const CALL: &str = "DescribeScalingActivities";
        let request = self
            .asg
            .describe_scaling_activities()
            .auto_scaling_group_name(asg);
        outside_call(CALL, format!("ASG {asg}"), |o| async move {
            let out = request
                .send()
                .await
                .map_err(|e| AwsError::new(CALL, o, &e))?;
            Ok(out
                .activities()
                .iter()
                .map(|a| Activity {
                    start: a.start_time().and_then(|t| SystemTime::try_from(*t).ok()),
                    failed: a.status_code().map(|c| c.as_str()) == Some("Failed"),
                    message: a
                        .status_message()
                        .or(a.description())
                        .unwrap_or_default()
                        .to_string(),
                })
                .collect())
        })
        .await
    }

    /// The instance type a launch configuration names.
    pub async fn launch_configuration_type(&self, name: &str) -> Result<String, AwsError> {
        const CALL: &str = "DescribeLaunchConfigurations";
        let request = self
            .asg
            .describe_launch_configurations()
            .launch_configuration_names(name);
        outside_call(
            CALL,
            format!("launch configuration {name}"),
            |o| async move {
                let out = request
                    .send()
                    .await
                    .map_err(|e| AwsError::new(CALL, o.clone(), &e))?;
                out.launch_configurations()
                    .first()
                    .and_then(|c| c.instance_type())
                    .map(str::to_string)
                    .ok_or_else(|| {
                        AwsError::local(CALL, o, "not found, or it names no instance type")
                    })
            },
        )
        .await
    }

    /// The instance type a launch template version names.
    pub async fn launch_template_type(
        &self,
        name: &str,
        by_id: bool,
        version: &str,
    ) -> Result<String, AwsError> {
        const CALL: &str = "DescribeLaunchTemplateVersions";
        let mut request = self
            .ec2
            .describe_launch_template_versions()
            .versions(version);
        request = if by_id {
            request.launch_template_id(name)
        } else {
            request.launch_template_name(name)
        };
        outside_call(
            CALL,
            format!("launch template {name} version {version}"),
            |o| async move {
                let out = request
                    .send()
                    .await
                    .map_err(|e| AwsError::new(CALL, o.clone(), &e))?;
                out.launch_template_versions()
                    .first()
                    .and_then(|v| v.launch_template_data())
                    .and_then(|d| d.instance_type())
                    .map(|t| t.as_str().to_string())
                    .ok_or_else(|| {
                        AwsError::local(CALL, o, "not found, or it names no instance type")
                    })
            },
        )
        .await
    }

    /// DescribeInstanceTypes for one type the shipped table lacks.
    pub async fn instance_type(&self, name: &str) -> Result<Shape, AwsError> {
        const CALL: &str = "DescribeInstanceTypes";
        let request = self
            .ec2
            .describe_instance_types()
            .instance_types(aws_sdk_ec2::types::InstanceType::from(name));
        outside_call(CALL, format!("instance type {name}"), |o| async move {
            let out = request
                .send()
                .await
                .map_err(|e| AwsError::new(CALL, o.clone(), &e))?;
            let info = out
                .instance_types()
                .first()
                .ok_or_else(|| AwsError::local(CALL, o, "unknown instance type"))?;
            let arch = match info
                .processor_info()
                .and_then(|p| p.supported_architectures().first())
                .map(|a| a.as_str())
            {
                Some("arm64") => Arch::Arm64,
                _ => Arch::Amd64,
            };
            Ok(Shape {
                vcpu: info
                    .v_cpu_info()
                    .and_then(|v| v.default_v_cpus())
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0),
                memory_mib: info
                    .memory_info()
                    .and_then(|m| m.size_in_mib())
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(0),
                gpu: info
                    .gpu_info()
                    .map(|g| {
                        g.gpus()
                            .iter()
                            .filter_map(|d| d.count())
                            .filter_map(|n| u32::try_from(n).ok())
                            .sum()
                    })
                    .unwrap_or(0),
                arch,
            })
        })
        .await
    }
}

fn launch_template_spec(
    t: &aws_sdk_autoscaling::types::LaunchTemplateSpecification,
) -> Option<LaunchSpec> {
    let version = t.version().unwrap_or("$Default").to_string();
    if let Some(name) = t.launch_template_name() {
        return Some(LaunchSpec::Template {
            name: name.to_string(),
            by_id: false,
            version,
        });
    }
    t.launch_template_id().map(|id| LaunchSpec::Template {
        name: id.to_string(),
        by_id: true,
        version,
    })
}

fn asg_from(g: &aws_sdk_autoscaling::types::AutoScalingGroup) -> Asg {
    let launch = if let Some(lc) = g.launch_configuration_name() {
        LaunchSpec::Configuration(lc.to_string())
    } else if let Some(t) = g.launch_template().and_then(launch_template_spec) {
        t
    } else if let Some(p) = g.mixed_instances_policy() {
        let lt = p.launch_template();
        LaunchSpec::Mixed {
            overrides: lt
                .map(|lt| {
                    lt.overrides()
                        .iter()
                        .filter_map(|o| o.instance_type())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            template: lt
                .and_then(|lt| lt.launch_template_specification())
                .and_then(launch_template_spec)
                .map(Box::new),
        }
    } else {
        LaunchSpec::Unknown
    };
    Asg {
        name: g.auto_scaling_group_name().unwrap_or_default().to_string(),
        min: to_usize(g.min_size()),
        max: to_usize(g.max_size()),
        desired: to_usize(g.desired_capacity()),
        zones: g.availability_zones().to_vec(),
        instances: g
            .instances()
            .iter()
            .map(|i| AsgInstance {
                id: i.instance_id().unwrap_or_default().to_string(),
                zone: i.availability_zone().unwrap_or_default().to_string(),
                lifecycle: i
                    .lifecycle_state()
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default(),
            })
            .collect(),
        tags: g
            .tags()
            .iter()
            .filter_map(|t| {
                Some((
                    t.key()?.to_string(),
                    t.value().unwrap_or_default().to_string(),
                ))
            })
            .collect(),
        launch,
    }
}
