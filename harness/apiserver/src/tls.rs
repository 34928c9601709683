//! Serving the router over TCP on 127.0.0.1 with TLS and a bearer token:
//! a CA generated at start signs a server certificate for `127.0.0.1` and
//! `localhost`; the kubeconfig written for it carries the CA and the token,
//! so kubectl, client-go binaries and kube-rs all connect as to a real
//! cluster.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::task::JoinHandle;

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Certificate generation failed.
    #[error("generating the API server's certificates failed: {0}")]
    Cert(#[from] rcgen::Error),
    /// TLS configuration failed.
    #[error("configuring TLS failed: {0}")]
    Tls(#[from] rustls::Error),
    /// Binding or serving failed.
    #[error("serving the API server on {addr} failed: {source}")]
    Io {
        /// Address.
        addr: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Writing the kubeconfig failed.
    #[error("writing kubeconfig {path} failed: {source}")]
    Kubeconfig {
        /// Path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Building a client failed.
    #[error("building a client for the API server failed: {0}")]
    Client(#[from] kube::Error),
}

/// The generated certificate authority and server certificate.
pub struct Certs {
    /// CA certificate, PEM.
    pub ca_pem: String,
    /// CA certificate, DER.
    pub ca_der: Vec<u8>,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: Vec<u8>,
}

impl Certs {
    /// Generates a CA and a server certificate for 127.0.0.1 and localhost.
    pub fn generate() -> Result<Self, ServeError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "testbed-ca");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let mut leaf =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
        leaf.distinguished_name
            .push(DnType::CommonName, "testbed-apiserver");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let leaf_key = KeyPair::generate()?;
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
        Ok(Self {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            server_chain: vec![leaf_cert.der().clone(), ca_cert.der().clone()],
            server_key: leaf_key.serialize_der(),
        })
    }

    fn server_config(&self) -> Result<rustls::ServerConfig, ServeError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(self.server_chain.clone(), key)?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(cfg)
    }
}

/// A running TLS endpoint.
pub struct TlsEndpoint {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// Bound address.
    pub addr: SocketAddr,
    /// CA certificate (PEM) that clients must trust.
    pub ca_pem: String,
    /// CA certificate (DER).
    pub ca_der: Vec<u8>,
    /// Bearer token.
    pub token: String,
    handle: axum_server::Handle<SocketAddr>,
    task: JoinHandle<()>,
}

impl TlsEndpoint {
    /// Binds `addr` (port 0 picks a free port) and serves `router` on it.
    pub async fn serve(
        make_router: impl FnOnce(String, String) -> axum::Router,
        addr: SocketAddr,
    ) -> Result<Self, ServeError> {
        let certs = Certs::generate()?;
        let token = uuid::Uuid::new_v4().simple().to_string();
        let listener = std::net::TcpListener::bind(addr).map_err(|source| ServeError::Io {
            addr: addr.to_string(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| ServeError::Io {
                addr: addr.to_string(),
                source,
            })?;
        let local = listener.local_addr().map_err(|source| ServeError::Io {
            addr: addr.to_string(),
            source,
        })?;
        let router = make_router(token.clone(), local.to_string());
        let cfg =
            axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(certs.server_config()?));
        let handle = axum_server::Handle::new();
        let server = axum_server::from_tcp_rustls(listener, cfg)
            .map_err(|source| ServeError::Io {
                addr: local.to_string(),
                source,
            })?
            .handle(handle.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = server.serve(router.into_make_service()).await {
                tracing::error!(error = %e, "API server stopped");
            }
        });
        Ok(Self {
            url: format!("https://{local}"),
            addr: local,
            ca_pem: certs.ca_pem,
            ca_der: certs.ca_der,
            token,
            handle,
            task,
        })
    }

    /// A kubeconfig (YAML) for this endpoint with the CA and the token.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_with_token(&self.token)
    }

    /// A kubeconfig for this endpoint that authenticates with `token` (a
    /// ServiceAccount's, from TokenRequest: RBAC then applies).
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: testbed\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: testbed-admin\n  user:\n    token: {token}\ncontexts:\n- name: testbed\n  context:\n    cluster: testbed\n    user: testbed-admin\n    namespace: default\ncurrent-context: testbed\npreferences: {{}}\n",
            url = self.url,
        )
    }

    /// Writes the kubeconfig to `path` (mode 0600).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), ServeError> {
        let err = |source| ServeError::Kubeconfig {
            path: path.display().to_string(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        std::fs::write(path, self.kubeconfig()).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        }
        Ok(())
    }

    /// A kube-rs client for this endpoint, over TLS with the token.
    pub fn client(&self) -> Result<kube::Client, ServeError> {
        self.client_with_token(&self.token)
    }

    /// A kube-rs client for this endpoint that authenticates with `token`.
    pub fn client_with_token(&self, token: &str) -> Result<kube::Client, ServeError> {
        let url = self.url.parse().map_err(|_| ServeError::Io {
            addr: self.url.clone(),
            source: std::io::Error::other("invalid URL"),
        })?;
        let mut cfg = kube::Config::new(url);
        cfg.root_cert = Some(vec![self.ca_der.clone()]);
        cfg.auth_info.token = Some(token.to_string().into());
        cfg.default_namespace = "default".into();
        // Answers as the server gives them: no client-side retry of 429s.
        cfg.default_retry = false;
        Ok(kube::Client::try_from(cfg)?)
    }

    /// Stops accepting connections and closes open ones.
    pub fn shutdown(&self) {
        self.handle.shutdown();
    }
}

impl Drop for TlsEndpoint {
    fn drop(&mut self) {
        self.handle.shutdown();
        self.task.abort();
    }
}
