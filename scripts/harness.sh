#!/usr/bin/env bash
# The harness's entry points for people and CI.
#
#   scripts/harness.sh docker               Docker end to end: starts the engine (docker-up.sh),
#                                           fetches the .NET runtimes when the fetch script is
#                                           there, runs the docker_sidecar_e2e and docker_checks_e2e tests
#   scripts/harness.sh kernels [NAME...]    kernel matrix: every row, or the named ones
#                                           (debian-6.1, debian-6.12, debian-6.12-arm64, host); prints the table,
#                                           writes target/harness-kernels/matrix.md
#   scripts/harness.sh sweep                removes containers/images of dead harness runs
#
# Under CI=true a missing prerequisite fails instead of skipping (fixtures::e2e). Needs root
# (uprobes, Docker, tracefs). Kernel images are cached under $NETPROBE_CACHE/kernels/.
set -euo pipefail
cd "$(dirname "$0")/.."

need_root() {
    if [[ $(id -u) -ne 0 ]]; then
        echo "harness.sh: needs root (uprobes, tracefs, Docker): run it with sudo -E" >&2
        exit 1
    fi
}

mount_tracefs() {
    if [[ ! -e /sys/kernel/tracing/uprobe_events ]]; then
        mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
    fi
}

cmd="${1:-}"
shift || true
case "$cmd" in
    docker)
        need_root
        mount_tracefs
        scripts/docker-up.sh
        if [[ -x sample-app/dotnet/fetch-runtimes.sh ]]; then
            sample-app/dotnet/fetch-runtimes.sh >/dev/null
        fi
        exec cargo test -p harness --test docker_sidecar_e2e --test docker_checks_e2e -- "$@"
        ;;
    kernels)
        need_root
        mount_tracefs
        args=()
        for k in "$@"; do args+=(--kernel "$k"); done
        mkdir -p target/harness-kernels
        exec cargo run -q -p harness -- kernels "${args[@]}" --markdown target/harness-kernels/matrix.md
        ;;
    sweep)
        exec cargo run -q -p harness -- sweep
        ;;
    *)
        sed -n '2,14p' "$0" >&2
        exit 2
        ;;
esac
