#!/usr/bin/env bash
# Makes a Docker engine answer on this machine, for the harness's end-to-end tests.
#
# - installs Debian's docker.io (engine 20.10 + containerd + runc) when dockerd is missing;
# - starts dockerd in the background when no engine answers (these machines have no systemd, and
#   the package does not start it), logging to $DOCKERD_LOG (default /var/log/netprobe-dockerd.log);
# - waits until `/usr/bin/docker info` answers (at most $DOCKER_UP_TIMEOUT seconds, default 60).
#
# Idempotent and safe to call many times, also concurrently: an engine that already answers is left
# alone, and a dockerd that is starting (pid file alive) is waited for, never started twice.
# Never passes --bridge=none: a second dockerd started that way beside a running one deletes docker0
# (seen on Debian bookworm's docker.io 20.10 with a second daemon on the same host).
# A stale /run/containerd/containerd.sock (a standalone containerd that was killed, e.g. by a
# machine's restart without a tmpfs /run) is removed before dockerd starts: dockerd 20.10 uses the
# system containerd whenever that socket file exists (moby/moby cmd/dockerd/daemon.go,
# systemContainerdRunning, a plain Lstat) and then fails after 60 s dialing a socket no one
# listens on. Whether anyone listens is read from /proc/net/unix (proc(5)), which lists the path
# of every bound socket in this network namespace.
# Always talks to /usr/bin/docker: the 20.10 client that matches the engine (/usr/local/bin/docker
# may be a newer client only).
# Needs root. Exit status 0 when the engine answers, 1 otherwise (with the log's tail on stderr).
set -euo pipefail

docker_cli=/usr/bin/docker
log="${DOCKERD_LOG:-/var/log/netprobe-dockerd.log}"
timeout_s="${DOCKER_UP_TIMEOUT:-60}"

say() { echo "docker-up: $*" >&2; }

system_containerd=/run/containerd/containerd.sock

# True when a process has $1 bound (listed in /proc/net/unix), false for a file left behind.
socket_bound() { awk -v p="$1" '$NF == p { found = 1 } END { exit !found }' /proc/net/unix; }

engine_answers() { [[ -x $docker_cli ]] && "$docker_cli" info >/dev/null 2>&1; }

if engine_answers; then
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    say "no Docker engine answers and starting one needs root: run this script with sudo"
    exit 1
fi

if ! command -v dockerd >/dev/null 2>&1 || [[ ! -x $docker_cli ]]; then
    say "installing docker.io (Debian's engine 20.10 with containerd and runc)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q docker.io >&2 || { apt-get update -q >&2 && apt-get install -y -q docker.io >&2; }
fi

# Serialise concurrent callers so that exactly one of them starts dockerd.
exec 9>/run/netprobe-docker-up.lock
flock 9

if ! engine_answers; then
    running=0
    if [[ -f /var/run/docker.pid ]]; then
        pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
        if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]]; then
            running=1
            say "dockerd (pid $pid) is running but not answering yet; waiting"
        fi
    fi
    if [[ $running -eq 0 ]]; then
        # cgroup v2 needs the unified hierarchy mounted; it is on Debian bookworm. Nothing else to set up.
        if [[ -S $system_containerd ]] && ! socket_bound "$system_containerd"; then
            say "removing $system_containerd: no containerd listens on it, and dockerd would wait for one"
            rm -f "$system_containerd" "$system_containerd.ttrpc"
        fi
        say "starting dockerd (log: $log)"
        mkdir -p "$(dirname "$log")"
        # setsid + nohup: the engine outlives this script and the shell or test that called it.
        setsid nohup dockerd >>"$log" 2>&1 </dev/null &
    fi
    deadline=$((SECONDS + timeout_s))
    until engine_answers; do
        if ((SECONDS >= deadline)); then
            say "the engine did not answer within ${timeout_s}s; last lines of $log:"
            tail -n 20 "$log" >&2 || true
            exit 1
        fi
        sleep 0.5
    done
fi
say "engine up: $("$docker_cli" version --format 'server {{.Server.Version}}, client {{.Client.Version}}' 2>/dev/null)"
