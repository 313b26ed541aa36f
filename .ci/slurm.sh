#!/usr/bin/env bash
# A real Slurm for tests/slurm.rs, from Debian's packages only (nothing is
# copied into the repository): slurmctld, slurmd and slurm-client (Slurm
# 22.05 on bookworm) and munge. The test runs the daemons itself, on
# loopback and in a temporary directory with a generated munge key and
# slurm.conf: nothing here is configured or started, and no init system is
# needed (the packages' systemd units are not used).
# Usage: bash .ci/slurm.sh   (root for apt-get; idempotent)
set -euo pipefail
. "$(dirname "$0")/apt-install.sh"

need=()
for bin in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
  [ -x "/usr/sbin/${bin%%:*}" ] || command -v "${bin%%:*}" >/dev/null 2>&1 || need+=("${bin##*:}")
done
command -v curl >/dev/null 2>&1 || need+=(curl)
apt_install ${need[@]+"${need[@]}"}
echo "slurm for tests/slurm.rs: $(/usr/sbin/slurmctld -V), $(/usr/sbin/munged -V 2>&1 | head -n 1)"
