#!/usr/bin/env bash
# Builds a container image from one of this project's binaries as built on
# this machine (no registry needed): the binary at /<name> and the shared
# libraries it loads and the CA certificates, on an empty (scratch) root, run
# as user 65532.
#
#   deploy/image-from-binary.sh target/debug/testbed localhost/testbed:dev
#   deploy/image-from-binary.sh target/dist/cluster-autoscaler localhost/cluster-autoscaler:dev
#
# The engine is podman when found, else docker. For a static image built from
# source, see deploy/Dockerfile.
set -euo pipefail
binary=${1:?usage: $0 BINARY IMAGE}
image=${2:?usage: $0 BINARY IMAGE}
[ -x "$binary" ] || { echo "$0: $binary is not an executable" >&2; exit 2; }
engine=$(command -v podman || command -v docker || true)
[ -n "$engine" ] || { echo "$0: neither podman nor docker is installed" >&2; exit 2; }
name=$(basename "$binary")
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/tmp"
chmod 1777 "$ctx/rootfs/tmp"
cp "$binary" "$ctx/rootfs/$name"
# The dynamic loader and each library, at the paths the binary asks for.
ldd "$binary" | awk '/=>/ { print $3 } /^\t\/.*ld-linux/ { print $1 }' | while read -r lib; do
  [ -f "$lib" ] || continue
  mkdir -p "$ctx/rootfs$(dirname "$lib")"
  cp -L "$lib" "$ctx/rootfs$lib"
done
# The CA bundle, for HTTPS to cloud APIs (the aws provider).
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$ctx/rootfs/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/"
fi
cat > "$ctx/Containerfile" <<CONTAINERFILE
FROM scratch
COPY rootfs/ /
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
ENTRYPOINT ["/$name"]
CONTAINERFILE
"$engine" build -q -t "$image" -f "$ctx/Containerfile" "$ctx"
