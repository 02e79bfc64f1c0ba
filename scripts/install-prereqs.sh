#!/usr/bin/env bash
# Installs everything netprobe's tests need on a fresh Debian bookworm x86_64 machine, as root:
# Debian packages, tracefs, and the project's own downloads (into $NETPROBE_CACHE, default
# ~/.cache/netprobe). Idempotent: a second run finds everything present and changes nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

log() { printf 'install-prereqs: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "must run as root (apt-get, mounting tracefs, Docker, uprobes): sudo $0"
  exit 1
fi

# Debian packages. Each line: the command or file that proves it is there, and the package.
need_pkgs=()
want() { if ! command -v "$1" >/dev/null 2>&1 && [ ! -e "$1" ]; then need_pkgs+=("$2"); fi; }
want cc gcc
want make make
want objdump binutils
want llvm-symbolizer llvm
want go golang-go
want mcs mono-mcs
want python3 python3
want pip3 python3-pip
want unzip unzip
want busybox busybox-static
want qemu-system-x86_64 qemu-system-x86
# arm64 images on this x86-64 host: C fixtures and Go's external link cross-built with
# aarch64-linux-gnu-gcc (its libc and libstdc++ under /usr/aarch64-linux-gnu; also netprobe's
# linker for the Rust target aarch64-unknown-linux-gnu, added below), the linux-arm64 .NET runtime
# of a single-file app run by qemu-user (netprobe-core/tests/dotnet_linux_arm64.rs), and QEMU's
# aarch64 system emulator for the kernel matrix's arm64 row (docs/arm64.md).
want aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
want /usr/aarch64-linux-gnu/lib/libstdc++.so.6 libstdc++6-arm64-cross
want qemu-aarch64-static qemu-user-static
want qemu-system-aarch64 qemu-system-arm
want /usr/bin/docker docker.io
want perf linux-perf
# Debug info: gdb's `bt` is the reference for unwinding without frame pointers, libc6-dbg is
# Debian's detached libc debug file (found by build-id under /usr/lib/debug/.build-id/), and a
# loopback debuginfod server serves a stripped binary's debug file in the debug-info tests.
want gdb gdb
want /usr/share/doc/libc6-dbg libc6-dbg
want debuginfod debuginfod
want bpftrace bpftrace
want funccount-bpfcc bpfcc-tools
want hyperfine hyperfine
want curl curl
want cpio cpio
want npm npm
want unshare util-linux
want setpriv util-linux
want capsh libcap2-bin
# `man -l` renders the page of `netprobe man` in the tests (cli_docs).
want man man-db
# Renders `netprobe profile --svg` flame graphs in the profile tests (headless screenshots).
want chromium chromium
# A real Prometheus server scrapes `count/latency --metrics` in netprobe-cli/tests/metrics_e2e.rs.
want prometheus prometheus
# The aarch64 cross compiler and binutils (aarch64-linux-gnu-objdump, -nm, -readelf, -strip):
# the arm64 gate tests build a C program for aarch64 and compare netprobe's plan with them.
want aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
# apt's lists: needed for installs and for the kernel matrix's `apt-cache`/`apt-get download`;
# refreshed when absent or older than a day.
if [ ${#need_pkgs[@]} -gt 0 ] || ! find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 | grep -q .; then
  log "apt-get update"
  apt-get update -qq
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "apt-get install ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
# Podman (4.3) for netprobe-cli/tests/container_runtimes_e2e.rs: rootful, no network, so without
# its recommends (buildah, slirp4netns, fuse-overlayfs, uidmap). It runs containers with Debian's
# runc, the one docker.io uses, and leaves iptables (nft) and Docker's engine as they were.
if ! command -v podman >/dev/null 2>&1; then
  log "apt-get install --no-install-recommends podman"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends podman >/dev/null
fi

# Rust's aarch64 target for the cross-built netprobe of the arm64 row (a no-op when present).
if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  log "rustup target add aarch64-unknown-linux-gnu"
  rustup target add aarch64-unknown-linux-gnu >&2
fi
# dpkg multiarch lists Debian's arm64 packages (the arm64 row's kernel and busybox, fetched with
# `apt-get download`, never installed).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  log "dpkg --add-architecture arm64"
  dpkg --add-architecture arm64
  apt-get update -qq
fi

# tracefs: uprobes are placed through it (kernel Documentation/trace/uprobetracer.rst).
if [ ! -e /sys/kernel/tracing/uprobe_events ] && [ ! -e /sys/kernel/debug/tracing/uprobe_events ]; then
  log "mounting tracefs at /sys/kernel/tracing"
  mount -t tracefs nodev /sys/kernel/tracing
fi

# Project downloads and services. Each script is idempotent and says what it does. containerd-up
# comes after docker-up: a dockerd started while a containerd serves its default socket uses that
# one instead of its own (scripts/containerd-up.sh says more).
for step in "$root/sample-app/dotnet/fetch-runtimes.sh" \
  "$root/sample-app/dotnet/fetch-net9-nativeaot.sh" \
  "$root/sample-app/dotnet/fetch-linux-arm64.sh" \
  "$root/scripts/fetch-go-binaries.sh" "$root/scripts/fetch-go-toolchains.sh" \
  "$root/scripts/fetch-speedscope.sh" "$root/scripts/docker-up.sh" \
  "$root/scripts/containerd-up.sh"; do
  if [ -x "$step" ]; then
    log "running ${step#"$root"/}"
    args=()
    # The Go toolchain matrix's releases (fixtures::go::matrix_versions): the short run needs
    # the oldest and the newest; NETPROBE_GO_MATRIX=all (or a list) needs what it names.
    if [[ $step == */fetch-go-toolchains.sh && ${NETPROBE_GO_MATRIX:-} != all ]]; then
      IFS=, read -r -a args <<<"${NETPROBE_GO_MATRIX:-1.21.13,1.27.3}"
    fi
    "$step" "${args[@]}" >&2
  fi
done
log "all prerequisites present"
