//! Work split over the pods of a Kubernetes Indexed Job: a what-if
//! sweep's cases, the conformance suite's shards. One completion per share:
//! the Job controller gives each pod its `JOB_COMPLETION_INDEX`, which the
//! kubelet expands in the container's arguments (`$(JOB_COMPLETION_INDEX)`,
//! [`INDEX`]); the input files are a ConfigMap mounted read-only (or a claim
//! the operator fills), the results go to a shared ReadWriteMany claim, and
//! the command that wrote the Job merges them ([`reports_under`] finds
//! them).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The most a ConfigMap holds (the API server refuses more).
pub const CONFIG_MAP_LIMIT: usize = 1024 * 1024;

/// The index the Job controller gives each pod, as the kubelet expands it
/// in a container's arguments.
pub const INDEX: &str = "$(JOB_COMPLETION_INDEX)";

/// Where the pods write their results.
pub const RESULTS_DIR: &str = "/results";

/// The user id the testbed's image runs as: the results claim is written
/// as its group.
const IMAGE_USER: u32 = 65532;

/// Why a Job could not be written.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// An input file could not be read.
    #[error("reading {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file name a ConfigMap key cannot be.
    #[error(
        "{file}: the file name {name:?} is not a ConfigMap key (letters, digits, '-', '_' and '.'); rename the file"
    )]
    Key {
        /// The file.
        file: String,
        /// Its name.
        name: String,
    },
    /// Two files of one name.
    #[error("{first} and {second} have the same file name: the pods would see one; rename one")]
    SameName {
        /// One file.
        first: String,
        /// The other.
        second: String,
    },
    /// The files are too large for a ConfigMap.
    #[error("the files are {bytes} bytes, more than a ConfigMap holds ({CONFIG_MAP_LIMIT}){hint}")]
    TooLarge {
        /// Their size.
        bytes: usize,
        /// What to do instead (empty, or `: ...`).
        hint: String,
    },
    /// A name Kubernetes refuses.
    #[error(
        "{what} {name:?} is not a Kubernetes name (lowercase letters, digits and '-', at most {max})"
    )]
    Name {
        /// Which name.
        what: &'static str,
        /// The name.
        name: String,
        /// Its longest.
        max: usize,
    },
    /// A count of 0.
    #[error("{0} 0: give at least 1")]
    Zero(&'static str),
}

/// Where the pods read their input files.
#[derive(Debug, Clone)]
pub enum JobInput {
    /// These files, in a ConfigMap `<job>-<suffix>`, each under its name;
    /// `hint` says what to do when they are too large (`: ...`).
    Files {
        /// The files.
        files: Vec<PathBuf>,
        /// The ConfigMap's name after the Job's.
        suffix: &'static str,
        /// Said when they are over [`CONFIG_MAP_LIMIT`].
        hint: &'static str,
    },
    /// A claim holding them.
    Claim(String),
}

/// An Indexed Job of the testbed's image.
#[derive(Debug, Clone)]
pub struct IndexedJob {
    /// The Job's name (a DNS label of at most 63).
    pub name: String,
    /// What the pods do, for the `app.kubernetes.io/name` label
    /// (`testbed-whatif`).
    pub app: &'static str,
    /// The container's name.
    pub container: &'static str,
    /// The image, whose entrypoint is `testbed`.
    pub image: String,
    /// The `testbed` arguments ([`INDEX`] in them picks the share).
    pub args: Vec<String>,
    /// Completions: one per share.
    pub completions: usize,
    /// Pods at once.
    pub parallelism: usize,
    /// Retries of a failed index.
    pub retries_per_index: u32,
    /// The memory each pod asks for (`2Gi`).
    pub memory: &'static str,
    /// The input files.
    pub input: JobInput,
    /// Where the input is mounted.
    pub input_dir: &'static str,
    /// The ReadWriteMany claim mounted at [`RESULTS_DIR`].
    pub results_claim: String,
}

impl IndexedJob {
    /// The manifest: the input's ConfigMap (for [`JobInput::Files`]) and
    /// the Job, as multi-document YAML.
    pub fn manifest(&self) -> Result<String, JobError> {
        check_name("the Job name", &self.name, 63)?;
        check_name("the results claim", &self.results_claim, 253)?;
        if self.completions == 0 {
            return Err(JobError::Zero("completions"));
        }
        if self.parallelism == 0 {
            return Err(JobError::Zero("--parallelism"));
        }
        let labels = json!({"app.kubernetes.io/name": self.app, "testbed/job": self.name});
        let mut documents = Vec::new();
        let input_volume = match &self.input {
            JobInput::Claim(claim) => {
                check_name("the input claim", claim, 253)?;
                json!({"name": "input", "persistentVolumeClaim": {"claimName": claim, "readOnly": true}})
            }
            JobInput::Files {
                files,
                suffix,
                hint,
            } => {
                let name = format!("{}-{suffix}", self.name);
                documents.push(config_map(&name, &labels, files, hint)?);
                json!({"name": "input", "configMap": {"name": name}})
            }
        };
        documents.push(json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {
                "completionMode": "Indexed",
                "completions": self.completions,
                "parallelism": self.parallelism.min(self.completions),
                "backoffLimitPerIndex": self.retries_per_index,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restartPolicy": "Never",
                        "securityContext": {"fsGroup": IMAGE_USER},
                        "containers": [{
                            "name": self.container,
                            "image": self.image,
                            "args": self.args,
                            "resources": {"requests": {"cpu": "1", "memory": self.memory}},
                            "volumeMounts": [
                                {"name": "input", "mountPath": self.input_dir, "readOnly": true},
                                {"name": "results", "mountPath": RESULTS_DIR},
                            ],
                        }],
                        "volumes": [
                            input_volume,
                            {"name": "results", "persistentVolumeClaim": {"claimName": self.results_claim}},
                        ],
                    },
                },
            },
        }));
        let mut out = String::new();
        for d in &documents {
            out.push_str("---\n");
            out.push_str(&serde_saphyr::to_string(d).unwrap_or_default());
        }
        Ok(out)
    }
}

/// `--name=value` for a container's arguments: the kubelet expands
/// `$(VAR)` in them, so an operator's `$(` is escaped to stay as written.
pub fn arg(name: &str, value: &str) -> String {
    format!("--{name}={}", value.replace("$(", "$$("))
}

/// Each file's name, as the pods see it, refused when it cannot be a
/// ConfigMap key or two files share one.
pub fn file_names(files: &[PathBuf]) -> Result<Vec<String>, JobError> {
    let mut names: Vec<String> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !key {
            return Err(JobError::Key {
                file: f.display().to_string(),
                name,
            });
        }
        if let Some(j) = names.iter().position(|n| *n == name) {
            return Err(JobError::SameName {
                first: files[j].display().to_string(),
                second: files[i].display().to_string(),
            });
        }
        names.push(name);
    }
    Ok(names)
}

/// A ConfigMap holding `files`, each under its name.
fn config_map(
    name: &str,
    labels: &Value,
    files: &[PathBuf],
    hint: &str,
) -> Result<Value, JobError> {
    let names = file_names(files)?;
    let mut data = serde_json::Map::new();
    let mut bytes = 0;
    for (f, key) in files.iter().zip(names) {
        let text = std::fs::read_to_string(f).map_err(|source| JobError::Read {
            file: f.display().to_string(),
            source,
        })?;
        bytes += text.len() + key.len();
        data.insert(key, Value::String(text));
    }
    if bytes > CONFIG_MAP_LIMIT {
        return Err(JobError::TooLarge {
            bytes,
            hint: hint.to_string(),
        });
    }
    Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}, "data": data}))
}

/// Refuses a name that is not a DNS-1123 subdomain of at most `max`
/// characters.
pub fn check_name(what: &'static str, name: &str, max: usize) -> Result<(), JobError> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !name.starts_with(['-', '.'])
        && !name.ends_with(['-', '.']);
    if ok {
        Ok(())
    } else {
        Err(JobError::Name {
            what,
            name: name.to_string(),
            max,
        })
    }
}

/// Why no result was found under a path.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// A directory could not be read.
    #[error("reading {dir}: {source}")]
    Read {
        /// The directory.
        dir: String,
        /// Why.
        source: std::io::Error,
    },
    /// A directory holds none.
    #[error("{dir}: no {file} in it or in its subdirectories")]
    Empty {
        /// The directory.
        dir: String,
        /// The file looked for.
        file: &'static str,
    },
}

/// The files named `file` under `paths`: each path a file, a directory
/// holding one, or a directory whose subdirectories do (`/results/JOB`,
/// sorted by name).
pub fn reports_under(paths: &[PathBuf], file: &'static str) -> Result<Vec<PathBuf>, FindError> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let own = p.join(file);
        if own.is_file() {
            out.push(own);
            continue;
        }
        let read = std::fs::read_dir(p).map_err(|source| FindError::Read {
            dir: p.display().to_string(),
            source,
        })?;
        let mut found: Vec<PathBuf> = read
            .filter_map(|e| e.ok())
            .map(|e| e.path().join(file))
            .filter(|f| f.is_file())
            .collect();
        if found.is_empty() {
            return Err(FindError::Empty {
                dir: p.display().to_string(),
                file,
            });
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// `dir/name`: where the pods see a file of the input.
pub fn at(dir: &str, name: &str) -> String {
    Path::new(dir).join(name).display().to_string()
}

/// Whether this cluster's API server accepts a manifest's documents as a
/// real one would: each in a server dry run (which must store nothing),
/// then created for real (which must store it). What failed, on which
/// object, otherwise.
pub async fn accepted(cluster: &crate::cluster::Cluster, docs: &[Value]) -> Result<(), String> {
    let what = |d: &Value| format!("{} {}", d["kind"], d["metadata"]["name"]);
    for d in docs {
        cluster
            .create_dry_run(d.clone())
            .await
            .map_err(|e| format!("{} refused in a dry run: {e}", what(d)))?;
        if cluster.exists(d).await.map_err(|e| e.to_string())? {
            return Err(format!("{} stored by a dry run", what(d)));
        }
    }
    for d in docs {
        cluster
            .create(d.clone())
            .await
            .map_err(|e| format!("{} refused: {e}", what(d)))?;
        if !cluster.exists(d).await.map_err(|e| e.to_string())? {
            return Err(format!("{} not stored by its create", what(d)));
        }
    }
    Ok(())
}
