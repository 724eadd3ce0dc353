#!/usr/bin/env bash
# Builds the kube-nft-proxy image, the same way on a connected machine and on an offline one:
# no base image is pulled. The root filesystem is staged from this host into a build context
# (dist/image/rootfs) and the Dockerfile (FROM scratch + COPY) is built with podman, or docker
# where podman is missing.
#
#   1. ./denow task compile (it runs the bundle task first). Where denort cannot be downloaded
#      the compile fails; the bundle is then built on its own.
#   2. scripts/stage-binary.sh: the compiled binary if it runs, else the launcher + deno + bundle.
#   3. scripts/image-libs.sh: the dlopened libraries and their closure, glibc and the loader.
#   4. /etc/passwd and /etc/group (root only) and /tmp; nothing else.
#
# Usage: build-image.sh [--tag TAG] [--no-build] [--variant auto|compiled|launcher]
#        build-image.sh --stage-binary ROOT   only step 2 (see scripts/stage-binary.sh)
#   --tag TAG     image name (default localhost/kube-nft-proxy:dev)
#   --no-build    use dist/ as it is (skip step 1)
# Needs: node + npm (./denow), gcc + libc6-dev (launcher), libnftables1 libnetfilter-conntrack3
# libmnl0, and podman (+ buildah, runc) or docker.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

tag=localhost/kube-nft-proxy:dev
build=1
variant=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="${2:?--tag needs a name}"; shift 2 ;;
    --no-build) build=0; shift ;;
    --variant) variant="${2:?--variant needs a value}"; shift 2 ;;
    --stage-binary) exec bash "$repo/scripts/stage-binary.sh" "${2:?--stage-binary needs ROOT}" ;;
    -h | --help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
log() { echo "build-image: $*" >&2; }

if command -v podman >/dev/null; then
  engine=podman
elif command -v docker >/dev/null; then
  engine=docker
else
  log "neither podman nor docker is installed (apt-get install podman buildah runc)"
  exit 1
fi

# 1. The artefacts. A stale binary must not be taken for this tree's: remove it first.
if [ "$build" = 1 ]; then
  rm -f dist/kube-nft-proxy
  if ./denow task compile; then
    log "deno task compile: dist/kube-nft-proxy built"
  else
    log "deno task compile failed (denort cannot be downloaded here?): building the bundle alone"
    ./denow task bundle
  fi
fi

# 2-4. The root filesystem.
context="$repo/dist/image"
rootfs="$context/rootfs"
rm -rf "$context"
mkdir -p "$rootfs"
chosen="$(bash scripts/stage-binary.sh --variant "$variant" "$rootfs" | tail -n 1)"
chosen="${chosen#binary: }"
executables=("$rootfs/usr/local/bin/kube-nft-proxy")
[ "$chosen" = launcher ] && executables+=("$rootfs/usr/local/lib/kube-nft-proxy/deno")
with=()
for e in "${executables[@]}"; do with+=(--with "$e"); done
bash scripts/image-libs.sh "${with[@]}" --copy "$rootfs" | sed 's/^/build-image: lib /' >&2
install -d -m 0755 "$rootfs/etc"
echo 'root:x:0:0:root:/root:/sbin/nologin' >"$rootfs/etc/passwd"
echo 'root:x:0:' >"$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
install -d -m 1777 "$rootfs/tmp"

# Nothing that can run a command may slip in.
for f in bin/sh usr/bin/sh bin/bash usr/bin/bash usr/bin/apt usr/bin/dpkg bin/busybox; do
  [ ! -e "$rootfs/$f" ] || { log "refusing: $f in the staged root"; exit 1; }
done

version="$("$rootfs/usr/local/bin/kube-nft-proxy" --version 2>/dev/null | head -n 1 || true)"
[ "$chosen" = compiled ] || version="$(./denow run --no-config -A dist/bundle/main.js --version | head -n 1)"
semver="$(sed -n 's/^kube-nft-proxy v\([^ ]*\).*/\1/p' <<<"$version")"
log "binary: $chosen ($version)"

# podman: no intermediate image per instruction (they would pile up as dangling images).
engine_flags=()
[ "$engine" = podman ] && engine_flags+=(--layers=false)
"$engine" build "${engine_flags[@]}" \
  --file "$repo/Dockerfile" \
  --tag "$tag" \
  --label "org.opencontainers.image.title=kube-nft-proxy" \
  --label "org.opencontainers.image.version=${semver:-unknown}" \
  --label "io.kube-nft-proxy.binary=$chosen" \
  "$context" >&2
size="$("$engine" image inspect --format '{{.Size}}' "$tag")"
log "built $tag with $engine: binary=$chosen, $((size / 1000000)) MB"
echo "$tag"
