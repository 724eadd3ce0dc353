#!/usr/bin/env bash
# Runs a command as on a fresh machine without the native libraries: in a
# private mount namespace, every copy of libnftables, libnetfilter_conntrack
# and libmnl is hidden behind /dev/null. Needs root (unshare -m); the host's
# files are untouched.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  exec "$@"
fi
exec unshare -m bash -c '
  set -euo pipefail
  mount --make-rprivate /
  for f in $(ls /usr/lib/*/libnftables.so* /usr/lib/*/libnetfilter_conntrack.so* \
      /usr/lib/*/libmnl.so* /lib/*/libnftables.so* /lib/*/libnetfilter_conntrack.so* \
      /lib/*/libmnl.so* 2>/dev/null); do
    [ -f "$f" ] && mount --bind /dev/null "$f"
  done
  exec "$@"
' bash "$@"
