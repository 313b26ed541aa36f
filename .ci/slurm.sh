#!/usr/bin/env bash
# A real Slurm for tests/slurm.rs, from Debian's packages only (nothing is
# copied into the repository): slurmctld, slurmd and slurm-client (Slurm
# 22.05 on bookworm) and munge. The test runs the daemons itself, on
# loopback and in a temporary directory with a generated munge key and
# slurm.conf: nothing here is configured or started, and no init system is
# needed (the packages' systemd units are not used).
# Usage: bash .ci/slurm.sh   (root for apt-get; idempotent)
set -euo pipefail

need=()
for bin in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
  [ -x "/usr/sbin/${bin%%:*}" ] || command -v "${bin%%:*}" >/dev/null 2>&1 || need+=("${bin##*:}")
done
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null
  else
    echo "error: missing ${need[*]} and cannot apt-get install them" >&2
    exit 1
  fi
fi
echo "slurm for tests/slurm.rs: $(/usr/sbin/slurmctld -V), $(/usr/sbin/munged -V 2>&1 | head -n 1)"
