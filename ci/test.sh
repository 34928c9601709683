#!/usr/bin/env bash
# The project's test command (the README's "test" command): formatting,
# lints, then every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
