#!/usr/bin/env bash
# Checks everything about shipping that can be checked without Deno's release
# host (deno compile needs it for denort) or a Docker engine: the compile
# task's flags, a type check of the entry point, the Dockerfile's stages, the
# manifests' schema, the systemd unit, and the image's library closure.
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
  if (!/^deno run .* dist\/kube-nft-proxy\.js$/.test(bundle)) problems.push("start:bundle is not deno run ... dist/kube-nft-proxy.js");
  if (!/^deno compile .*--output dist\/kube-nft-proxy dist\/kube-nft-proxy\.js$/.test(compile)) problems.push("compile does not compile the bundle into dist/kube-nft-proxy");
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

# 2. The entry point type-checks.
if ./denow check main.ts; then ok "deno check main.ts"; else bad "deno check main.ts"; fi

# 3. Dockerfile stages.
final="$(awk '/^FROM /{s=""} /^FROM /{stage=$0} {s=s"\n"$0} END{print stage}' Dockerfile)"
grep -qE '^FROM debian:12 AS builder$' Dockerfile && ok "builder stage" || bad "no 'FROM debian:12 AS builder' stage"
case "$final" in *gcr.io/distroless/cc-debian12*) ok "final stage: $final" ;; *) bad "final stage is not distroless cc: $final" ;; esac
last_stage="$(awk '/^FROM /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' Dockerfile)"
if grep -qE '^(RUN|SHELL) ' <<<"$last_stage"; then bad "final stage runs commands (no shell there)"; else ok "final stage has no RUN"; fi
grep -qE '^COPY --from=builder ' <<<"$last_stage" && ok "binary copied from builder" || bad "final stage does not COPY --from=builder"
grep -qE '^COPY --from=libs ' <<<"$last_stage" && ok "libraries copied" || bad "final stage does not COPY --from=libs"
grep -qE '^ENTRYPOINT \["/usr/local/bin/kube-nft-proxy"\]$' <<<"$last_stage" && ok "ENTRYPOINT is the binary (exec form)" || bad "ENTRYPOINT must be [\"/usr/local/bin/kube-nft-proxy\"]"

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

# 6. The image's library closure resolves here.
if libs="$(bash scripts/image-libs.sh)"; then
  for l in libnftables.so.1 libnetfilter_conntrack.so.3 libmnl.so.0 libnftnl.so.11 libnfnetlink.so.0 libjansson.so.4 libgmp.so.10 libxtables.so.12; do
    grep -q "/$l\$" <<<"$libs" || bad "image library closure lacks $l"
  done
  ok "image libraries: $(tr '\n' ' ' <<<"$libs")"
else
  bad "scripts/image-libs.sh"
fi

[ "$fail" -eq 0 ] && echo "ship: all checks passed" || { echo "ship: checks failed" >&2; exit 1; }
