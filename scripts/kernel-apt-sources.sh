#!/usr/bin/env bash
# Makes the Debian kernel lines of the harness's kernel matrix downloadable with apt.
#
# bookworm (+ bookworm-security) carries the 6.1 line and, through bookworm-security, the 6.12
# line. Where a machine's apt sources lack the 6.12 line, this adds bookworm-backports (which
# carries it too) as /etc/apt/sources.list.d/netprobe-bookworm-backports.sources, then runs
# `apt-get update`. Backports get apt's default priority 100, so nothing installed is upgraded
# from it unless asked by name. Idempotent: does nothing when `linux-image-6.12-amd64` already
# has a candidate. Needs root.
set -euo pipefail

has_candidate() { apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: [0-9]'; }

if has_candidate linux-image-6.12-amd64 && has_candidate linux-image-amd64; then
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "kernel-apt-sources: needs root to change apt's sources" >&2
    exit 1
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
has_candidate linux-image-6.12-amd64 || { echo "kernel-apt-sources: still no linux-image-6.12-amd64" >&2; exit 1; }
