# The kube-nft-proxy image: FROM scratch, one COPY of a root filesystem that
# scripts/build-image.sh stages from the build host (a Debian 12 machine) into
# the build context, so no base image is pulled and no command runs here.
# Build with the script, not directly:
#
#   scripts/build-image.sh --tag registry.example.com/kube-nft-proxy:0.1.0
#
# The staged root holds only:
#   /usr/local/bin/kube-nft-proxy   the compiled binary, or (where denort cannot be
#                                   downloaded) a launcher that execs the pinned deno
#                                   on /usr/local/lib/kube-nft-proxy/bundle/main.js
#   /usr/local/bin/kube-proxy       symlink: the path kubeadm's DaemonSet runs
#   /usr/lib/kube-nft-proxy/        the libraries the agent dlopens, with their ldd closure
#   /usr/lib/x86_64-linux-gnu/      glibc, libgcc_s and the loader (+ /lib64 link)
#   /etc/passwd, /etc/group         root only; /tmp
# No shell, no package manager.
FROM scratch
COPY rootfs/ /
# The agent dlopens from KUBE_NFT_PROXY_LIB_DIR; the loader finds the
# libraries' own dependencies through LD_LIBRARY_PATH.
ENV KUBE_NFT_PROXY_LIB_DIR=/usr/lib/kube-nft-proxy \
    LD_LIBRARY_PATH=/usr/lib/kube-nft-proxy
USER 0:0
ENTRYPOINT ["/usr/local/bin/kube-nft-proxy"]
