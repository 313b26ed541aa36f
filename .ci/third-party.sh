#!/usr/bin/env bash
# Third-party parts the schema and interop tests use, from package
# registries only (nothing is copied into the repository):
#   - Debian: cmake + libpcre2-dev (libyang, built by the `yang2` crate's
#     `bundled` feature), libyang2-tools (yanglint), openssh-client, sshpass,
#     telnet, curl (the service's tests), openssl (their TLS certificates);
#   - PyPI into a venv: ncclient, netmiko (real NETCONF / CLI clients),
#     highspy (the HiGHS ILP solver that checks the exact Stage 3 search:
#     tools/stage3_ilp.py, tests/stage3_ilp.rs);
#   - PyPI sdist `ydk-models-openconfig` (OpenConfig models, 2020-05-06
#     bundle): its .yang files are extracted, with pattern anchors removed
#     (see unanchor-patterns.py).
# Everything lands in $VCLOS_THIRD_PARTY (default: target/third-party);
# the tests find it there or through that variable.
# Usage: bash .ci/third-party.sh   (root for apt-get; idempotent)
set -euo pipefail
. "$(dirname "$0")/apt-install.sh"
cd "$(dirname "$0")/.."
dest="${VCLOS_THIRD_PARTY:-$PWD/target/third-party}"
mkdir -p "$dest"

need=()
for bin in ssh:openssh-client sshpass:sshpass telnet:telnet cmake:cmake yanglint:libyang2-tools curl:curl openssl:openssl; do
  command -v "${bin%%:*}" >/dev/null 2>&1 || need+=("${bin##*:}")
done
[ -e /usr/include/pcre2.h ] || need+=(libpcre2-dev)
apt_install ${need[@]+"${need[@]}"}

py="$dest/venv/bin/python"
if ! "$py" -c 'import ncclient, netmiko, highspy' 2>/dev/null; then
  python3 -m venv "$dest/venv"
  "$py" -m pip install -q --disable-pip-version-check 'ncclient==0.7.*' 'netmiko==4.*' 'highspy==1.*'
fi

yang="$dest/openconfig-yang"
if [ ! -e "$yang/openconfig-network-instance.yang" ]; then
  tmp="$(mktemp -d)"
  "$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$tmp" 'ydk-models-openconfig==0.1.9'
  mkdir -p "$yang.new"
  tar -xzf "$tmp"/ydk-models-openconfig-0.1.9.tar.gz -C "$yang.new" \
    --wildcards '*/_yang/*.yang' --strip-components=5
  python3 .ci/unanchor-patterns.py "$yang.new"
  rm -rf "$yang" "$tmp"
  mv "$yang.new" "$yang"
fi
echo "third-party parts in $dest: $(ls "$yang" | wc -l) YANG modules, $("$py" -c 'import ncclient, netmiko; print("ncclient", ncclient.__version__ if hasattr(ncclient, "__version__") else "?", "netmiko", netmiko.__version__)')"
