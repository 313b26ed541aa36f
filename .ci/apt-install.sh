# Sourced by the .ci scripts: `apt_install PKG...` installs the Debian
# packages given (none: nothing to do), non-interactively after `apt-get
# update`, or fails naming them where apt-get cannot run.
apt_install() {
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" </dev/null
  else
    echo "error: missing $* and cannot apt-get install them" >&2
    exit 1
  fi
}
