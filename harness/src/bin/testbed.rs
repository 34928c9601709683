//! `testbed`: the kwok-backed Kubernetes testbed.
//!
//! `testbed up` starts the embedded control plane, serves it over TLS on
//! 127.0.0.1, writes a kubeconfig and prints `kubeconfig: PATH` once it is
//! ready; it serves until SIGINT or SIGTERM.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use harness::{Clock, EmbeddedApiServer};

#[derive(Parser)]
#[command(
    name = "testbed",
    version,
    about = "A kwok-backed Kubernetes testbed for cluster autoscalers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the embedded cluster and serve it until interrupted.
    Up {
        /// Where to write the kubeconfig [default: <tmp>/testbed/kubeconfig].
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Port to listen on at 127.0.0.1 (0 picks a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Up { kubeconfig, port } => {
            let path = kubeconfig.unwrap_or_else(harness::default_kubeconfig_path);
            let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
            let cluster = match EmbeddedApiServer::start(Clock::new(), addr, &path).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("testbed up: {e}");
                    return ExitCode::FAILURE;
                }
            };
            println!("kubeconfig: {}", cluster.kubeconfig.display());
            eprintln!(
                "API server listening on {}; press Ctrl-C to stop",
                cluster.endpoint.url
            );
            wait_for_signal().await;
            cluster.endpoint.shutdown();
            ExitCode::SUCCESS
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
