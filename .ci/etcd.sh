#!/usr/bin/env bash
# What the etcd state store needs (`--features vclos/etcd`), from Debian
# packages only:
#   - protobuf-compiler + libprotobuf-dev: `protoc` and the well-known
#     types (google/protobuf/descriptor.proto, ...) it imports, which the
#     `etcd-client` crate's build script compiles into its gRPC code (the
#     crate has no feature that ships pre-generated code);
#   - etcd-server: the `etcd` binary the store's tests start on loopback
#     ports (tests/etcd_common).
# Usage: bash .ci/etcd.sh   (root for apt-get; idempotent)
set -euo pipefail
. "$(dirname "$0")/apt-install.sh"

need=()
for bin in protoc:protobuf-compiler etcd:etcd-server; do
  command -v "${bin%%:*}" >/dev/null 2>&1 || need+=("${bin##*:}")
done
[ -e /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
apt_install ${need[@]+"${need[@]}"}
echo "etcd store parts: $(protoc --version), etcd $(etcd --version 2>/dev/null | head -1 | awk '{print $3}')"
