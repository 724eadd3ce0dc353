#!/usr/bin/env bash
# Checks everything about shipping that can be checked without Deno's release
# host (a runnable binary needs denort from it): the tasks' shared flags, the
# compile itself (up to writing the binary), a type check of the entry point,
# the Dockerfile, the manifests' schema, the systemd unit, and the image's
# library closure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fail=0
ok() { echo "ship: ok   $*"; }
bad() { echo "ship: FAIL $*" >&2; fail=1; }

# 1. The tasks that run the agent share one flag list: what `start` runs from source is what
#    `start:bundle` runs from the bundle and what `compile` bakes into the binary.
if flags_report="$(./denow eval --quiet '
  const t = JSON.parse(Deno.readTextFileSync("deno.json")).tasks ?? {};
  const cmd = (x) => (typeof x === "string" ? x : x?.command ?? "");
  const words = (s) => s.trim().split(/\s+/);
  const flags = (s) => words(s).filter((w) => /^--(v8-flags|allow-)/.test(w)).join(" ");
  const start = cmd(t.start), bundle = cmd(t["start:bundle"]), compile = cmd(t.compile);
  const problems = [];
  if (!/^deno run .* main\.ts$/.test(start)) problems.push("start is not deno run ... main.ts");
  if (!/^deno run .* dist\/bundle\/main\.js$/.test(bundle)) problems.push("start:bundle is not deno run ... dist/bundle/main.js");
  if (!/^deno compile .*--include dist\/bundle --output dist\/kube-nft-proxy dist\/bundle\/main\.js$/.test(compile)) problems.push("compile does not compile the bundle into dist/kube-nft-proxy");
  if (!(t.compile?.dependencies ?? []).includes("bundle")) problems.push("compile does not depend on bundle");
  if (/ (-A|--allow-all)( |$)/.test(compile)) problems.push("compile uses -A");
  for (const [name, c] of [["start:bundle", bundle], ["compile", compile]]) {
    if (flags(c) !== flags(start)) problems.push(name + " flags differ from start: " + flags(c));
  }
  if (problems.length) { console.log(problems.join("; ")); Deno.exit(1); }
  console.log(flags(start));
')"; then
  ok "start, start:bundle and compile share: $flags_report"
else
  bad "tasks: $flags_report"
fi

# 1b. `deno task compile` gets past graph building and writes the binary. denort (the runtime
#     the binary is made of) cannot be downloaded here, so DENORT_BIN points at the pinned deno:
#     the output is NOT runnable (that stand-in ignores the payload), but a compile that
#     regresses (e.g. Deno's stack overflow on an npm graph, denoland/deno#36746) fails here.
# The bundle is split so that what loads lazily from source loads lazily from it too: the
# conntrack Worker starts from the small chunk holding conntrack/worker.ts (not from main.js,
# which would put the whole agent in a second isolate), and client-node is a chunk of its own.
rm -rf dist/bundle
if ./denow task bundle >/dev/null 2>&1 && [ -s dist/bundle/main.js ]; then
  worker_chunk="$(grep -l 'new Worker(import.meta.url' dist/bundle/*.js || true)"
  if [ "$(wc -l <<<"$worker_chunk")" -eq 1 ] && [ -n "$worker_chunk" ] &&
    [ "$worker_chunk" != dist/bundle/main.js ] && [ "$(stat -c %s "$worker_chunk")" -lt 200000 ]; then
    ok "conntrack Worker chunk: $worker_chunk ($(stat -c %s "$worker_chunk") bytes)"
  else
    bad "the conntrack Worker is not started from a small chunk of its own: ${worker_chunk:-none}"
  fi
  # scripts/hide_lazy_imports.ts: no literal import of a chunk left for deno run to analyse
  # at every start with an empty DENO_DIR (the image's case); measured there below.
  if grep -qE 'import\("\./[^"]+\.js"\)' dist/bundle/*.js; then
    bad "a literal dynamic chunk import is left in dist/bundle: $(grep -ohE 'import\("\./[^"]+\.js"\)' dist/bundle/*.js | head -n 1)"
  fi
  fresh="$(mktemp -d)"
  peak_kb="$(DENO_DIR="$fresh" /usr/bin/time -f '%M' "$(./denow eval --quiet 'console.log(Deno.execPath())')" \
    run --no-config -A dist/bundle/main.js --version 2>&1 >/dev/null | tail -n 1)"
  rm -rf "$fresh"
  if [ "${peak_kb:-999999}" -lt 110000 ]; then
    ok "bundle --version with an empty DENO_DIR: peak RSS $((peak_kb / 1024)) MB"
  else
    bad "bundle --version with an empty DENO_DIR: peak RSS ${peak_kb} kB (>= 110 MB: is a large chunk analysed at start?)"
  fi
  if grep -q 'CoreV1Api' dist/bundle/main.js; then
    bad "client-node is in dist/bundle/main.js: it must stay a lazily imported chunk"
  else
    ok "client-node only in a lazy chunk: $(cd dist/bundle && ls client_node_fallback-*.js)"
  fi
else
  bad "deno task bundle"
fi

deno_bin="$(./denow eval --quiet 'console.log(Deno.execPath())')"
rm -f dist/kube-nft-proxy
if out="$(DENORT_BIN="$deno_bin" ./denow task compile 2>&1)" && [ -s dist/kube-nft-proxy ]; then
  # The payload carries the whole bundle: main.js (its usage text), the Worker's chunk (the
  # Worker's name) and client-node's chunk.
  if grep -qa 'kube-nft-proxy trace --from IP' dist/kube-nft-proxy &&
    grep -qa 'knp-conntrack-reconciler' dist/kube-nft-proxy && grep -qa 'CoreV1Api' dist/kube-nft-proxy; then
    ok "deno task compile wrote dist/kube-nft-proxy ($(du -m dist/kube-nft-proxy | cut -f1) MB, bundle embedded; not runnable here)"
  else
    bad "dist/kube-nft-proxy does not embed the bundle"
  fi
else
  bad "deno task compile: $(tail -n 5 <<<"$out")"
fi

# 2. The entry point type-checks.
if ./denow check main.ts; then ok "deno check main.ts"; else bad "deno check main.ts"; fi

# 3. The Dockerfile: FROM scratch plus one COPY of the root scripts/build-image.sh stages, so it
#    builds offline (no base image to pull) and runs nothing at build time (there is no shell).
froms="$(grep -cE '^FROM ' Dockerfile || true)"
[ "$froms" = 1 ] && grep -qE '^FROM scratch$' Dockerfile && ok "one stage, FROM scratch" || bad "Dockerfile must have exactly one stage, FROM scratch"
if grep -qE '^(RUN|SHELL|ADD) ' Dockerfile; then bad "Dockerfile runs commands or ADDs (no shell in the image)"; else ok "no RUN/SHELL/ADD"; fi
grep -qE '^COPY rootfs/ /$' Dockerfile && ok "COPY rootfs/ / (staged by scripts/build-image.sh)" || bad "Dockerfile does not COPY rootfs/ /"
grep -qE '^ENV KUBE_NFT_PROXY_LIB_DIR=/usr/lib/kube-nft-proxy' Dockerfile && grep -qE '^ +LD_LIBRARY_PATH=/usr/lib/kube-nft-proxy$' Dockerfile &&
  ok "ENV KUBE_NFT_PROXY_LIB_DIR and LD_LIBRARY_PATH" || bad "Dockerfile lacks ENV KUBE_NFT_PROXY_LIB_DIR / LD_LIBRARY_PATH=/usr/lib/kube-nft-proxy"
grep -qE '^USER 0:0$' Dockerfile && ok "USER root" || bad "Dockerfile must run as USER 0:0"
grep -qE '^ENTRYPOINT \["/usr/local/bin/kube-nft-proxy"\]$' Dockerfile && ok "ENTRYPOINT is the binary (exec form)" || bad "ENTRYPOINT must be [\"/usr/local/bin/kube-nft-proxy\"]"
for s in scripts/build-image.sh scripts/stage-binary.sh; do bash -n "$s" && ok "bash -n $s" || bad "bash -n $s"; done

# 4. Kubernetes manifests.
if ./denow run --allow-read --allow-env scripts/validate_manifests.ts deploy/kubernetes; then ok "manifests"; else bad "manifests"; fi

# 5. systemd unit (verify needs an executable ExecStart: point it at a dummy).
if command -v systemd-analyze >/dev/null; then
  tmp="$(mktemp -d)"
  printf '#!/bin/sh\nexit 0\n' >"$tmp/kube-nft-proxy" && chmod +x "$tmp/kube-nft-proxy"
  sed "s|/usr/local/bin/kube-nft-proxy|$tmp/kube-nft-proxy|" deploy/systemd/kube-nft-proxy.service >"$tmp/kube-nft-proxy.service"
  if out="$(systemd-analyze verify "$tmp/kube-nft-proxy.service" 2>&1)" && [ -z "$out" ]; then
    ok "systemd-analyze verify"
  else
    bad "systemd-analyze verify: $out"
  fi
  for k in 'CapabilityBoundingSet=CAP_NET_ADMIN' 'ProtectSystem=' 'Restart=always' 'After=network-online.target' 'EnvironmentFile='; do
    grep -q "^$k" deploy/systemd/kube-nft-proxy.service || bad "unit lacks $k"
  done
  rm -rf "$tmp"
else
  bad "systemd-analyze not installed (apt-get install systemd)"
fi

# 6. The image's libraries resolve here: the dlopened ones and their closure in the private
#    directory, glibc, libgcc_s (the deno runtime's) and the loader on the system path.
deno_bin=".tools/deno-$(tr -d '[:space:]' <.deno-version)/node_modules/deno/deno"
if libs="$(bash scripts/image-libs.sh --with "$deno_bin")"; then
  for l in libnftables.so.1 libnetfilter_conntrack.so.3 libmnl.so.0 libnftnl.so.11 libnfnetlink.so.0 libjansson.so.4 libgmp.so.10 libxtables.so.12; do
    grep -q "^/usr/lib/kube-nft-proxy/$l " <<<"$libs" || bad "image library closure lacks /usr/lib/kube-nft-proxy/$l"
  done
  for l in libc.so.6 libm.so.6 libgcc_s.so.1 ld-linux-x86-64.so.2; do
    grep -q "^/usr/lib/x86_64-linux-gnu/$l " <<<"$libs" || bad "image lacks /usr/lib/x86_64-linux-gnu/$l"
  done
  grep -q '^/lib64/ld-linux-x86-64.so.2 -> ' <<<"$libs" || bad "image lacks the /lib64/ld-linux-x86-64.so.2 link"
  if grep -qE '^/usr/lib/kube-nft-proxy/(libc\.so|libm\.so|ld-linux|libgcc_s)' <<<"$libs"; then bad "glibc in the private library directory"; fi
  ok "image libraries: $(cut -d' ' -f1 <<<"$libs" | tr '\n' ' ')"
else
  bad "scripts/image-libs.sh"
fi

[ "$fail" -eq 0 ] && echo "ship: all checks passed" || { echo "ship: checks failed" >&2; exit 1; }
