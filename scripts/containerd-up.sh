#!/usr/bin/env bash
# Makes a standalone containerd answer on its default socket, for the end-to-end tests of
# containerd's containers (netprobe-cli/tests/container_runtimes_e2e.rs): what a Kubernetes node
# or a nerdctl host runs, beside (not inside) Docker.
#
# - installs Debian's containerd (1.6, with `ctr`) when it is missing;
# - starts `containerd` in the background when nothing answers on /run/containerd/containerd.sock
#   (these machines have no systemd), with the paths a packaged containerd uses: socket
#   /run/containerd/containerd.sock, root /var/lib/containerd, state /run/containerd, and the
#   package's /etc/containerd/config.toml; logs to $CONTAINERD_LOG (default
#   /var/log/netprobe-containerd.log);
# - waits until `ctr version` answers (at most $CONTAINERD_UP_TIMEOUT seconds, default 30).
#
# Docker's own containerd does not collide with it: dockerd 20.10 starts a containerd of its own
# on /run/docker/containerd/containerd.sock with root /var/lib/docker/containerd/daemon and state
# /run/docker/containerd/daemon, unless a containerd socket already exists at
# /run/containerd/containerd.sock when dockerd starts: it then uses that one, as on a systemd host
# (moby/moby cmd/dockerd/daemon.go, systemContainerdRunning). Either way each containerd has its
# own root and state, and the shims' sockets under /run/containerd/s/ are named by a hash of
# the daemon's address, namespace and container id. So run this after scripts/docker-up.sh
# (scripts/install-prereqs.sh does) and Docker keeps the containerd it started with.
#
# Idempotent and safe to call many times, also concurrently (flock): a daemon that answers is
# left alone and never started twice. Needs root. Exit status 0 when `ctr version` answers, 1
# otherwise (with the log's tail on stderr).
set -euo pipefail

address=/run/containerd/containerd.sock
log="${CONTAINERD_LOG:-/var/log/netprobe-containerd.log}"
timeout_s="${CONTAINERD_UP_TIMEOUT:-30}"

say() { echo "containerd-up: $*" >&2; }

# A missing socket answers nothing at once (ctr alone would wait 10 s to dial it).
answers() {
    [[ -S $address ]] && command -v ctr >/dev/null 2>&1 &&
        ctr --address "$address" --connect-timeout 2s version >/dev/null 2>&1
}

if answers; then
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    say "no containerd answers on $address and starting one needs root: run this script with sudo"
    exit 1
fi

if ! command -v containerd >/dev/null 2>&1 || ! command -v ctr >/dev/null 2>&1; then
    say "installing containerd (Debian's 1.6, with ctr)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q containerd >&2 || { apt-get update -q >&2 && apt-get install -y -q containerd >&2; }
fi

exec 9>/run/netprobe-containerd-up.lock
flock 9

if ! answers; then
    pidfile=/run/netprobe-containerd.pid
    running=0
    if [[ -f $pidfile ]]; then
        pid="$(cat "$pidfile" 2>/dev/null || true)"
        if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == containerd ]]; then
            running=1
            say "containerd (pid $pid) is running but not answering yet; waiting"
        fi
    fi
    if [[ $running -eq 0 ]]; then
        # A socket file no daemon listens on (a containerd that was killed) is replaced by the
        # new daemon.
        config=()
        [[ -f /etc/containerd/config.toml ]] && config=(--config /etc/containerd/config.toml)
        say "starting containerd on $address (log: $log)"
        mkdir -p "$(dirname "$log")" /var/lib/containerd /run/containerd
        setsid nohup containerd "${config[@]}" --address "$address" --root /var/lib/containerd \
            --state /run/containerd >>"$log" 2>&1 </dev/null &
        echo $! >"$pidfile"
    fi
    deadline=$((SECONDS + timeout_s))
    until answers; do
        if ((SECONDS >= deadline)); then
            say "containerd did not answer within ${timeout_s}s; last lines of $log:"
            tail -n 20 "$log" >&2 || true
            exit 1
        fi
        sleep 0.2
    done
fi
say "containerd up: $(ctr --address "$address" version 2>/dev/null | awk '/Server:/{s=1} s&&/Version:/{print $2; exit}')"
