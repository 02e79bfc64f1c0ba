#!/usr/bin/env bash
# Makes the Debian kernel lines of the harness's kernel matrix downloadable with apt.
#
# The arm64 row's kernel and busybox are Debian arm64 packages: dpkg's multiarch
# (`dpkg --add-architecture arm64`) makes apt list them, and `apt-get download NAME:arm64` fetches
# them without installing anything.
#
# bookworm (+ bookworm-security) carries the 6.1 line and, through bookworm-security, the 6.12
# line. Where a machine's apt sources lack the 6.12 line, this adds bookworm-backports (which
# carries it too) as /etc/apt/sources.list.d/netprobe-bookworm-backports.sources, then runs
# `apt-get update`. Backports get apt's default priority 100, so nothing installed is upgraded
# from it unless asked by name. Idempotent: does nothing when `linux-image-6.12-amd64` already
# has a candidate. Needs root.
set -euo pipefail

# grep reads all of apt-cache's output (no -q): an early exit would make apt-cache die of SIGPIPE,
# which pipefail reports as a missing candidate.
has_candidate() { apt-cache policy "$1" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; }

if has_candidate linux-image-6.12-amd64 && has_candidate linux-image-amd64 \
    && has_candidate linux-image-6.12-arm64:arm64 && has_candidate busybox-static:arm64; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "kernel-apt-sources: needs root to change apt's sources" >&2
    exit 1
fi
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    echo "kernel-apt-sources: added the arm64 architecture to dpkg (packages listed, none installed)" >&2
fi
list=/etc/apt/sources.list.d/netprobe-bookworm-backports.sources
if [[ ! -f $list ]]; then
    cat >"$list" <<'SOURCES'
# Added by netprobe's scripts/kernel-apt-sources.sh: the 6.12 kernel line for the harness.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    echo "kernel-apt-sources: added $list" >&2
fi
apt-get update -q >&2
for p in linux-image-6.12-amd64 linux-image-6.12-arm64:arm64 busybox-static:arm64; do
    has_candidate "$p" || { echo "kernel-apt-sources: still no $p" >&2; exit 1; }
done
