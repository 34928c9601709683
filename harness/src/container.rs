//! Containers through the Docker API, which Docker and podman (`podman
//! system service`) both serve: finding an engine, starting a container
//! with its ports published on 127.0.0.1, reading a file out of it, running
//! a command in it, and removing it on every way out (drop, failure, and
//! Ctrl-C through [`remove_all`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, PortBinding};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures::StreamExt;

/// Seconds a request to the engine may take.
const ENGINE_TIMEOUT_SECS: u64 = 120;
/// The label every container started here carries (with the process id).
pub const OWNER_LABEL: &str = "io.github.ca-testbed.owner";

/// Why a container operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    /// No engine answered.
    #[error(
        "no container engine found: {tried}. Start Docker, or podman's Docker-compatible service \
         (`podman system service --time=0 unix:///run/podman/podman.sock &`), or set DOCKER_HOST \
         to its socket (unix:///path)"
    )]
    NoEngine {
        /// What was tried, and how each failed.
        tried: String,
    },
    /// The image is not in the engine's store (and is not pulled here).
    #[error(
        "image {image} is not in the container engine's store: pull or build it first \
         (`docker pull {image}` / `podman pull {image}`)"
    )]
    NoImage {
        /// The image reference.
        image: String,
    },
    /// An engine call failed.
    #[error("{what}: {source}")]
    Engine {
        /// What was being done, on which container or image.
        what: String,
        /// The engine's error.
        source: bollard::errors::Error,
    },
    /// The container did something unexpected.
    #[error("{0}")]
    Unexpected(String),
}

fn engine_err(what: impl Into<String>) -> impl FnOnce(bollard::errors::Error) -> ContainerError {
    let what = what.into();
    move |source| ContainerError::Engine { what, source }
}

/// A container engine that answered a ping.
#[derive(Clone)]
pub struct Engine {
    docker: Docker,
    /// Where it was found (the socket or `DOCKER_HOST`).
    pub address: String,
}

impl Engine {
    /// The engine at `DOCKER_HOST` when set (`unix://` or `tcp://`), else the
    /// first of the usual sockets that answers: Docker's, then podman's
    /// (root and rootless).
    pub async fn discover() -> Result<Self, ContainerError> {
        let candidates: Vec<String> = match std::env::var("DOCKER_HOST") {
            Ok(host) if !host.is_empty() => vec![host],
            _ => {
                let mut c = vec!["unix:///var/run/docker.sock".to_string()];
                if let Ok(dir) = std::env::var("XDG_RUNTIME_DIR") {
                    c.push(format!("unix://{dir}/podman/podman.sock"));
                    c.push(format!("unix://{dir}/docker.sock"));
                }
                c.push("unix:///run/podman/podman.sock".to_string());
                c
            }
        };
        let mut tried = Vec::new();
        for address in candidates {
            let connected = if let Some(path) = address.strip_prefix("unix://") {
                Docker::connect_with_unix(path, ENGINE_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
            } else {
                Docker::connect_with_http(
                    &address,
                    ENGINE_TIMEOUT_SECS,
                    bollard::API_DEFAULT_VERSION,
                )
            };
            let docker = match connected {
                Ok(d) => d,
                Err(e) => {
                    tried.push(format!("{address} ({e})"));
                    continue;
                }
            };
            match docker.ping().await {
                Ok(_) => {
                    // podman 4 speaks an older API version than bollard's default.
                    let docker = docker
                        .negotiate_version()
                        .await
                        .map_err(engine_err(format!(
                            "negotiating the API version with {address}"
                        )))?;
                    return Ok(Self { docker, address });
                }
                Err(e) => tried.push(format!("{address} ({e})")),
            }
        }
        Err(ContainerError::NoEngine {
            tried: tried.join("; "),
        })
    }

    /// Whether `image` is in the engine's store.
    pub async fn has_image(&self, image: &str) -> Result<bool, ContainerError> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(false),
            Err(e) => Err(engine_err(format!("inspecting image {image}"))(e)),
        }
    }

    /// Names of the containers (running or not) that process `pid` started here.
    pub async fn containers_of(&self, pid: u32) -> Result<Vec<String>, ContainerError> {
        let filters = HashMap::from([("label".to_string(), vec![format!("{OWNER_LABEL}={pid}")])]);
        let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let list = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(engine_err("listing containers"))?;
        Ok(list
            .into_iter()
            .map(|c| {
                c.names
                    .and_then(|n| n.first().cloned())
                    .or(c.id)
                    .unwrap_or_default()
            })
            .collect())
    }

    /// Creates and starts a container of `spec`; it is removed when the
    /// returned guard drops.
    pub async fn run(&self, spec: &ContainerSpec) -> Result<Container, ContainerError> {
        if !self.has_image(&spec.image).await? {
            return Err(ContainerError::NoImage {
                image: spec.image.clone(),
            });
        }
        let exposed: Vec<String> = spec.ports.iter().map(|p| format!("{p}/tcp")).collect();
        let bindings = exposed
            .iter()
            .map(|p| {
                (
                    p.clone(),
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(String::new()),
                    }]),
                )
            })
            .collect();
        let labels = HashMap::from([(OWNER_LABEL.to_string(), std::process::id().to_string())]);
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: (!spec.args.is_empty()).then(|| spec.args.clone()),
            env: (!spec.env.is_empty()).then(|| spec.env.clone()),
            exposed_ports: Some(exposed),
            volumes: (!spec.volumes.is_empty()).then(|| spec.volumes.clone()),
            labels: Some(labels),
            host_config: Some(HostConfig {
                port_bindings: Some(bindings),
                privileged: spec.privileged.then_some(true),
                binds: (!spec.binds.is_empty()).then(|| spec.binds.clone()),
                tmpfs: (!spec.tmpfs.is_empty()).then(|| {
                    spec.tmpfs
                        .iter()
                        .map(|p| (p.clone(), String::new()))
                        .collect()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let name = format!(
            "{}-{}-{}",
            spec.name_prefix,
            std::process::id(),
            uuid_suffix()
        );
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(engine_err(format!(
                "creating a container of {}",
                spec.image
            )))?;
        let container = Container {
            engine: self.clone(),
            id: created.id,
            name,
            ports: HashMap::new(),
        };
        live().insert(container.id.clone());
        self.docker
            .start_container(&container.id, None)
            .await
            .map_err(engine_err(format!("starting container {}", container.name)))?;
        let mut container = container;
        container.ports = container.published_ports(&spec.ports).await?;
        Ok(container)
    }
}

fn uuid_suffix() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    id[..8].to_string()
}

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct ContainerSpec {
    /// Image reference.
    pub image: String,
    /// Arguments after the image's entrypoint (empty: the image's command).
    pub args: Vec<String>,
    /// `KEY=value` environment.
    pub env: Vec<String>,
    /// Container TCP ports to publish on 127.0.0.1 (host ports chosen by the engine).
    pub ports: Vec<u16>,
    /// Run privileged (a kind node).
    pub privileged: bool,
    /// Paths mounted as tmpfs.
    pub tmpfs: Vec<String>,
    /// Paths given an anonymous volume of their own (removed with the container).
    pub volumes: Vec<String>,
    /// `host:container[:ro]` bind mounts.
    pub binds: Vec<String>,
    /// The container name's prefix (the process id and a random suffix follow).
    pub name_prefix: String,
}

/// A running container, removed (forcibly, with its volumes) when dropped.
pub struct Container {
    engine: Engine,
    /// The engine's id.
    pub id: String,
    /// Its name.
    pub name: String,
    ports: HashMap<u16, u16>,
}

impl Container {
    /// The host port on 127.0.0.1 published for container port `port`.
    pub fn host_port(&self, port: u16) -> Option<u16> {
        self.ports.get(&port).copied()
    }

    async fn published_ports(&self, ports: &[u16]) -> Result<HashMap<u16, u16>, ContainerError> {
        let info = self
            .engine
            .docker
            .inspect_container(&self.id, None)
            .await
            .map_err(engine_err(format!("inspecting container {}", self.name)))?;
        let map = info
            .network_settings
            .and_then(|n| n.ports)
            .unwrap_or_default();
        let mut out = HashMap::new();
        for port in ports {
            let host = map
                .get(&format!("{port}/tcp"))
                .and_then(|b| b.as_ref())
                .and_then(|b| b.iter().find_map(|b| b.host_port.as_deref()?.parse().ok()))
                .ok_or_else(|| {
                    ContainerError::Unexpected(format!(
                        "container {}: the engine published no host port for {port}/tcp",
                        self.name
                    ))
                })?;
            out.insert(*port, host);
        }
        Ok(out)
    }

    /// The last `lines` lines of the container's output (for error messages).
    pub async fn logs(&self, lines: usize) -> String {
        let options = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .tail(&lines.to_string())
            .build();
        let mut out = String::new();
        let mut stream = self.engine.docker.logs(&self.id, Some(options));
        while let Some(Ok(chunk)) = stream.next().await {
            out.push_str(&chunk.to_string());
        }
        out
    }

    /// The contents of the file at `path` in the container.
    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>, ContainerError> {
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(path)
            .build();
        let mut stream = self
            .engine
            .docker
            .download_from_container(&self.id, Some(options));
        let mut tar = Vec::new();
        while let Some(chunk) = stream.next().await {
            tar.extend_from_slice(&chunk.map_err(engine_err(format!(
                "reading {path} from container {}",
                self.name
            )))?);
        }
        first_tar_file(&tar).ok_or_else(|| {
            ContainerError::Unexpected(format!(
                "container {}: {path} is not a regular file",
                self.name
            ))
        })
    }

    /// Runs `cmd` in the container and returns its output; a non-zero
    /// exit is an error carrying the output.
    pub async fn exec(&self, cmd: &[&str]) -> Result<String, ContainerError> {
        use bollard::exec::{CreateExecOptions, StartExecResults};
        let what = format!("running {cmd:?} in container {}", self.name);
        let docker = &self.engine.docker;
        let exec = docker
            .create_exec(
                &self.id,
                CreateExecOptions {
                    cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..Default::default()
                },
            )
            .await
            .map_err(engine_err(what.clone()))?;
        let mut out = String::new();
        if let StartExecResults::Attached { mut output, .. } = docker
            .start_exec(&exec.id, None)
            .await
            .map_err(engine_err(what.clone()))?
        {
            while let Some(chunk) = output.next().await {
                out.push_str(&chunk.map_err(engine_err(what.clone()))?.to_string());
            }
        }
        let code = docker
            .inspect_exec(&exec.id)
            .await
            .map_err(engine_err(what.clone()))?
            .exit_code
            .unwrap_or(0);
        if code != 0 {
            return Err(ContainerError::Unexpected(format!(
                "{what}: exit code {code}: {}",
                out.trim()
            )));
        }
        Ok(out)
    }
}

async fn remove(docker: &Docker, id: &str) -> Result<(), bollard::errors::Error> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    let res = match docker.remove_container(id, Some(options)).await {
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        other => other,
    };
    live().remove(id);
    res
}

impl Drop for Container {
    fn drop(&mut self) {
        if !live().contains(&self.id) {
            return;
        }
        // Drop may run inside a runtime (which cannot block) or outside one:
        // remove on a thread of its own with a runtime of its own.
        let (docker, id, name) = (
            self.engine.docker.clone(),
            self.id.clone(),
            self.name.clone(),
        );
        let removal = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match rt {
                Ok(rt) => rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(30), remove(&docker, &id)).await
                }),
                Err(e) => {
                    eprintln!("removing container {name}: no runtime: {e}");
                    return;
                }
            }
            .map_or_else(
                |_| eprintln!("removing container {name}: timed out"),
                |r| {
                    if let Err(e) = r {
                        eprintln!("removing container {name}: {e}");
                    }
                },
            );
        });
        let _ = removal.join();
    }
}

/// Ids of the containers started by this process and not yet removed.
fn live() -> std::sync::MutexGuard<'static, BTreeSet<String>> {
    static LIVE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes every container this process started and has not removed (for
/// Ctrl-C, where no destructor runs). Returns how many it removed.
pub async fn remove_all() -> usize {
    let ids: Vec<String> = live().iter().cloned().collect();
    if ids.is_empty() {
        return 0;
    }
    let Ok(engine) = Engine::discover().await else {
        return 0;
    };
    let mut removed = 0;
    for id in ids {
        if remove(&engine.docker, &id).await.is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The first regular file of an uncompressed tar archive.
fn first_tar_file(tar: &[u8]) -> Option<Vec<u8>> {
    let mut at = 0;
    while at + 512 <= tar.len() {
        let header = &tar[at..at + 512];
        if header.iter().all(|b| *b == 0) {
            return None;
        }
        let size_field = std::str::from_utf8(&header[124..136]).ok()?;
        let size =
            usize::from_str_radix(size_field.trim_matches(|c: char| c == '\0' || c == ' '), 8)
                .ok()?;
        let kind = header[156];
        let data = at + 512;
        if kind == b'0' || kind == 0 {
            return tar.get(data..data + size).map(<[u8]>::to_vec);
        }
        at = data + size.div_ceil(512) * 512;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, size: usize, kind: u8) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{size:011o}\0");
        h[124..136].copy_from_slice(size.as_bytes());
        h[156] = kind;
        h
    }

    #[test]
    fn the_first_regular_file_of_a_tar_is_read_past_other_entries() {
        let mut tar = header("dir/", 0, b'5');
        // A PAX header with 3 bytes of data, padded to a block.
        tar.extend(header("pax", 3, b'x'));
        tar.extend(b"a=b");
        tar.extend(vec![0u8; 509]);
        tar.extend(header("kubeconfig", 5, b'0'));
        tar.extend(b"hello");
        tar.extend(vec![0u8; 507 + 1024]);
        assert_eq!(first_tar_file(&tar).as_deref(), Some(&b"hello"[..]));
        assert_eq!(first_tar_file(&header("dir/", 0, b'5')), None);
        assert_eq!(first_tar_file(&[0u8; 1024]), None);
    }
}
