#!/usr/bin/env bash
# Multi-core scaling of tegg-bench: the inproc table at 1, 2, 4, 8 and 16 worker threads.
#
#   bash benches/scripts/scaling.sh [SECONDS]      # default 2 s per measurement
#
# Writes benches/results/scaling-<host>.jsonl: a first line describing the machine, then the
# tegg-bench lines with their `threads`; and scaling-<host>.svg (requests/s against threads).
# Meant for a machine with 16 cores; on fewer, the thread counts above the core count
# oversubscribe the CPU and say so in the machine line.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-2}"
cargo build --release -p benches --bin tegg-bench
host="$(hostname)"
out="benches/results/scaling-${host}.jsonl"
mkdir -p benches/results
model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//; s/"//g' || echo unknown)"
echo "{\"machine\":\"${host}\",\"cores\":$(nproc),\"cpu\":\"${model}\",\"date\":\"$(date -u +%Y-%m-%dT%H:%MZ)\"}" > "$out"
for threads in 1 2 4 8 16; do
    concurrency=$(( threads * 4 > 25 ? threads * 4 : 25 ))
    target/release/tegg-bench --driver inproc --threads "$threads" --concurrency "$concurrency" --seconds "$seconds" | tee -a "$out"
done
target/release/tegg-bench --scaling-chart "$out"
