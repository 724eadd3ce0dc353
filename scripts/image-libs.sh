#!/usr/bin/env bash
# The shared libraries of the image (a FROM scratch image: nothing is there unless copied), taken
# from this host: the libraries the agent dlopens with their ldd closure, and the closure of the
# executables given with --with (the deno runtime and the launcher, or the compiled binary).
#
#   /usr/lib/kube-nft-proxy/   the dlopened libraries and their closure (libnftnl, libjansson,
#                              ...): KUBE_NFT_PROXY_LIB_DIR and LD_LIBRARY_PATH point there.
#   /usr/lib/<multiarch>/      glibc, libgcc_s and the dynamic loader, on the loader's default
#                              search path, so that the runtime starts without LD_LIBRARY_PATH.
#   the ELF interpreter path   (/lib64/ld-linux-x86-64.so.2) a symlink to that loader.
#
# Usage: image-libs.sh [--with FILE]... [--copy ROOT]
# Prints one line per image file, sorted: "IMAGE_PATH HOST_PATH", and "IMAGE_PATH -> TARGET"
# for the interpreter symlink. With --copy, also copies them (following links) under ROOT.
set -euo pipefail
roots=(libnftables.so.1 libnetfilter_conntrack.so.3 libmnl.so.0)
private_dir=/usr/lib/kube-nft-proxy
# glibc and the GCC runtime: one copy, on the system path.
system_re='^(ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so|libgcc_s\.so)'

with=()
copy=""
while [ $# -gt 0 ]; do
  case "$1" in
    --with) with+=("${2:?--with needs a file}"); shift 2 ;;
    --copy) copy="${2:?--copy needs a directory}"; shift 2 ;;
    *) echo "usage: image-libs.sh [--with FILE]... [--copy ROOT]" >&2; exit 2 ;;
  esac
done

resolve() {
  local lib="$1"
  for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/lib /lib; do
    [ -e "$d/$lib" ] && { echo "$d/$lib"; return 0; }
  done
  echo "image-libs: $lib not found; install libnftables1 libnetfilter-conntrack3 libmnl0" >&2
  return 1
}

declare -A seen=()
interp=""
queue=()
for r in "${roots[@]}"; do queue+=("$(resolve "$r")"); done
queue+=("${with[@]}")
while [ "${#queue[@]}" -gt 0 ]; do
  file="${queue[0]}"
  queue=("${queue[@]:1}")
  out="$(ldd "$file")" || { echo "image-libs: ldd $file failed: $out" >&2; exit 1; }
  while read -r a b c _; do
    if [ "$b" = "=>" ]; then
      [ -n "$c" ] && [ -e "$c" ] || { echo "image-libs: $file needs $a, not found" >&2; exit 1; }
      [[ -n "${seen[$a]:-}" ]] || { seen[$a]="$c"; queue+=("$c"); }
    elif [[ "$a" == /* ]]; then
      interp="$a" # the ELF interpreter, e.g. /lib64/ld-linux-x86-64.so.2
    fi
  done <<<"$out"
  # The roots are libraries of their own, not only dependencies.
  name="$(basename "$file")"
  [[ "$file" == */lib*.so* && -z "${seen[$name]:-}" ]] && seen[$name]="$file"
done
[ -n "$interp" ] || { echo "image-libs: no ELF interpreter found" >&2; exit 1; }
multiarch="$(basename "$(dirname "$(readlink -f "${seen[libc.so.6]}")")")"
system_dir="/usr/lib/$multiarch"
loader="$(basename "$interp")"
seen[$loader]="$interp"

lines=()
for name in "${!seen[@]}"; do
  if [[ "$name" =~ $system_re ]]; then dest="$system_dir/$name"; else dest="$private_dir/$name"; fi
  lines+=("$dest ${seen[$name]}")
done
# The interpreter path the kernel opens, pointing at the loader on the system path.
link_target="$(realpath -m -s --relative-to="$(dirname "$interp")" "$system_dir/$loader")"
[ "$interp" = "$system_dir/$loader" ] || lines+=("$interp -> $link_target")

if [ -n "$copy" ]; then
  for l in "${lines[@]}"; do
    read -r dest src target <<<"$l"
    mkdir -p "$copy$(dirname "$dest")"
    if [ "$src" = "->" ]; then
      ln -sfn "$target" "$copy$dest"
    else
      cp -L "$src" "$copy$dest"
      chmod 0644 "$copy$dest"
      [[ "$dest" == */"$loader" ]] && chmod 0755 "$copy$dest"
    fi
  done
fi
printf '%s\n' "${lines[@]}" | sort
