# The netprobe sidecar image: the release `netprobe` binary on a small glibc base.
#
# Build (where a registry is reachable), from the repository root:
#   cargo build --release -p netprobe-cli
#   mkdir -p target/sidecar-context && cp target/release/netprobe target/sidecar-context/
#   docker build -f harness/docker/netprobe-sidecar.Dockerfile -t netprobe-sidecar target/sidecar-context
#
# BASE must carry a glibc at least as new as the one netprobe was built against (Debian bookworm:
# 2.36) and a shell for `kubectl exec`/`docker exec`. The harness builds this very file with BASE set
# to a local image (no registry on its machines) in tests/docker_sidecar_e2e.rs and tests/docker_checks_e2e.rs.
#
# Run it next to the app, in the app's PID namespace, with what uprobes need:
#   docker run -d --name netprobe --pid=container:<app> \
#     --cap-add SYS_ADMIN --cap-add SYS_PTRACE \
#     --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     netprobe-sidecar
#   docker exec -it netprobe netprobe trace -p 1 ...
# (`--privileged` works too where the engine allows it.) netprobe mounts tracefs itself when it
# is absent; the app's files are reached through /proc/<pid>/root.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
COPY netprobe /usr/local/bin/netprobe
# Keeps the sidecar running; netprobe is started with `exec`.
ENTRYPOINT ["sleep", "2147483647"]
