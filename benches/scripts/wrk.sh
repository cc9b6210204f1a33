#!/usr/bin/env bash
# Installs wrk (the http driver of tegg-bench) with apt-get when it is missing.
#
#   bash benches/scripts/wrk.sh
set -euo pipefail
if command -v wrk >/dev/null; then
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -q
$sudo apt-get install -y -q wrk
wrk --version | head -1
