#!/usr/bin/env bash
# Exact counts per request of one tegg-bench row, from callgrind: instructions and, with --cache,
# callgrind's model of the first-level caches and of branch prediction.
#
#   bash benches/scripts/per-request.sh FLAVOUR N [--cache] [BINARY]
#
# Runs `tegg-bench --flavour FLAVOUR --n N --no-touch --driver inproc --threads 1 --concurrency 1`
# under valgrind for 2 s and for 4 s, and divides the difference of the two profiles' totals by
# the difference of the requests they served (tegg-bench's `served`, warm-up included): the
# process's start, the App's build with it, cancels out. Prints one JSON line: every event of
# the profiles per request, `Ir` (instructions) and, with --cache, among others `D1mr`/`D1mw`
# (first-level data read/write misses), `I1mr` (instruction misses) and `Bcm`/`Bim`
# (mispredicted conditional/indirect branches). Two runs agree within about 1%: the runtime's
# and the clock's work per request varies a little.
#
# BINARY defaults to target/release/tegg-bench (`cargo build --release -p benches --bin
# tegg-bench`; with `TEGG_SERVICES=1000` the build takes minutes instead of twenty, and the
# request path is the same code). Needs valgrind (Debian's `valgrind` package). The profiles are
# left in a temporary directory, named on stderr, for `callgrind_annotate`.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n '2,19p' "$0" >&2; exit 2; }
flavour="$1" n="$2"
shift 2
cache=() binary=target/release/tegg-bench
for arg in "$@"; do
    case "$arg" in
        --cache) cache=(--cache-sim=yes --branch-sim=yes) ;;
        *) binary="$arg" ;;
    esac
done
command -v valgrind >/dev/null || { echo "per-request.sh: valgrind is not installed" >&2; exit 1; }
[ -x "$binary" ] || { echo "per-request.sh: no $binary (build it first)" >&2; exit 1; }
dir="$(mktemp -d)"
echo "per-request.sh: profiles in $dir" >&2
for seconds in 2 4; do
    valgrind --tool=callgrind "${cache[@]}" --callgrind-out-file="$dir/$seconds.out" \
        "$binary" --flavour "$flavour" --n "$n" --no-touch --driver inproc --seconds "$seconds" \
        --threads 1 --concurrency 1 2>/dev/null | grep '^{' > "$dir/$seconds.json"
done
# `events:` and `summary:` lines of a profile: the event names and the program's totals.
totals() { awk '/^events:/ { $1 = ""; names = $0 } /^summary:/ { $1 = ""; print names "|" $0 }' "$1"; }
served() { sed -n 's/.*"served":\([0-9]*\).*/\1/p' "$1"; }
awk -v flavour="$flavour" -v n="$n" -v a="$(totals "$dir/2.out")" -v b="$(totals "$dir/4.out")" \
    -v ra="$(served "$dir/2.json")" -v rb="$(served "$dir/4.json")" 'BEGIN {
    split(a, pa, "|"); split(b, pb, "|");
    k = split(pa[1], names, " "); split(pa[2], x, " "); split(pb[2], y, " ");
    if (rb <= ra) { print "per-request.sh: the two runs served " ra " and " rb " requests" > "/dev/stderr"; exit 1 }
    line = sprintf("{\"flavour\":\"%s\",\"n\":%d,\"requests\":[%d,%d]", flavour, n, ra, rb);
    for (i = 1; i <= k; i++) line = line sprintf(",\"%s\":%.0f", names[i], (y[i] - x[i]) / (rb - ra));
    print line "}";
}'
