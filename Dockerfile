# syntax=docker/dockerfile:1
# Multi-stage build of the kube-nft-proxy image. Needs a connected build
# machine: `deno compile` downloads denort from Deno's release host.

# 1. Compile the agent into one binary with its permissions baked in.
FROM debian:12 AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm ca-certificates unzip \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The Deno version lives only in .deno-version; denow installs it from npm.
COPY .deno-version denow ./
RUN ./denow --version
COPY deno.json deno.lock ./
RUN ./denow install --frozen
COPY . .
RUN ./denow task compile \
 && mkdir -p /out/bin && cp dist/kube-nft-proxy /out/bin/ \
 && ln -s kube-nft-proxy /out/bin/kube-proxy

# 2. Collect exactly the native libraries the binary dlopens, with their
#    ldd closure, minus what distroless/cc already ships.
FROM debian:12 AS libs
RUN apt-get update \
 && apt-get install -y --no-install-recommends libnftables1 libnetfilter-conntrack3 libmnl0 \
 && rm -rf /var/lib/apt/lists/*
COPY scripts/image-libs.sh /image-libs.sh
RUN bash /image-libs.sh --copy /out/lib

# 3. Distroless runtime: no shell, no package manager.
FROM gcr.io/distroless/cc-debian12 AS runtime
# A private directory: the agent dlopens from KUBE_NFT_PROXY_LIB_DIR, and the
# loader finds their dependencies through LD_LIBRARY_PATH.
COPY --from=libs /out/lib/ /usr/lib/kube-nft-proxy/
ENV KUBE_NFT_PROXY_LIB_DIR=/usr/lib/kube-nft-proxy \
    LD_LIBRARY_PATH=/usr/lib/kube-nft-proxy
# Also /usr/local/bin/kube-proxy (a symlink; copying the directory keeps it), the path
# kubeadm's DaemonSet runs: switching a kubeadm cluster is a change of image only.
COPY --from=builder /out/bin/ /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/kube-nft-proxy"]
