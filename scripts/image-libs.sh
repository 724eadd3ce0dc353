#!/usr/bin/env bash
# Lists (or copies) the shared libraries the final image needs: the ones the
# agent dlopens plus their ldd closure, minus what distroless/cc already ships.
# Usage: image-libs.sh            print one resolved path per line
#        image-libs.sh --copy DIR copy them (following links) into DIR
set -euo pipefail
roots=(libnftables.so.1 libnetfilter_conntrack.so.3 libmnl.so.0)
# Present in gcr.io/distroless/cc-debian12 (libc6, libgcc-s1, libstdc++6, libgomp1).
provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libgcc_s\.so|libstdc\+\+\.so|libgomp\.so)'

resolve() {
  local lib="$1"
  for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/lib /lib; do
    [ -e "$d/$lib" ] && { echo "$d/$lib"; return 0; }
  done
  echo "image-libs: $lib not found; install libnftables1 libnetfilter-conntrack3 libmnl0" >&2
  return 1
}

declare -A seen=()
queue=()
for r in "${roots[@]}"; do queue+=("$(resolve "$r")"); done
while [ "${#queue[@]}" -gt 0 ]; do
  lib="${queue[0]}"
  queue=("${queue[@]:1}")
  name="$(basename "$lib")"
  [[ -n "${seen[$name]:-}" ]] && continue
  seen[$name]="$lib"
  while read -r dep _ path _; do
    [[ "$dep" =~ $provided ]] && continue
    [ -n "${path:-}" ] && [ -e "$path" ] && queue+=("$path")
  done < <(ldd "$lib" | awk '/=>/ { print $1, $2, $3 }')
done

if [ "${1:-}" = "--copy" ]; then
  dest="${2:?usage: image-libs.sh --copy DIR}"
  mkdir -p "$dest"
  for name in "${!seen[@]}"; do cp -L "${seen[$name]}" "$dest/$name"; done
fi
for name in "${!seen[@]}"; do echo "${seen[$name]}"; done | sort
