#!/usr/bin/env bash
# The guard on the request path: instructions per request (callgrind, exact) of four tegg-bench
# rows, against the baseline committed in benches/request-path-baseline.txt. Fails when a row
# rises more than 2% above its baseline.
#
#   bash benches/scripts/request-path.sh            # check (what .ci/run does)
#   bash benches/scripts/request-path.sh --update   # write the baseline from this tree
#
# Builds `TEGG_SERVICES=1000 cargo build --release -p benches --bin tegg-bench` (the request path
# is the same code as with the default 10,000 services, and the build takes about a minute), then
# counts each row with `per-request.sh` twice and keeps the lower count: two runs agree within
# about 1%, a rise from the code shows in both. A change of the baseline is a commit of its own
# that says why. Needs valgrind (Debian's `valgrind` package).
set -euo pipefail
cd "$(dirname "$0")/../.."
baseline=benches/request-path-baseline.txt
rows=("singleton 1" "handwired-traced 1" "context 100" "context 1000")
limit=2 # percent

TEGG_SERVICES=1000 cargo build --release --quiet -p benches --bin tegg-bench
binary=target/release/tegg-bench

count() {
    local best="" ir
    for _ in 1 2; do
        ir=$(bash benches/scripts/per-request.sh $1 "$binary" 2>/dev/null | sed -n 's/.*"Ir":\([0-9]*\).*/\1/p')
        [ -n "$ir" ] || { echo "request-path.sh: per-request.sh $1 gave no count" >&2; exit 1; }
        if [ -z "$best" ] || [ "$ir" -lt "$best" ]; then best=$ir; fi
    done
    echo "$best"
}

if [ "${1:-}" = "--update" ]; then
    {
        echo "# Instructions per request of the request path's rows: the guard's baseline (benches/scripts/request-path.sh)."
        echo "# Written by \`bash benches/scripts/request-path.sh --update\` at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%d), on $(nproc) cores."
        echo "# flavour N instructions"
        for row in "${rows[@]}"; do echo "$row $(count "$row")"; done
    } > "$baseline.new"
    mv "$baseline.new" "$baseline"
    cat "$baseline"
    exit 0
fi

[ -f "$baseline" ] || { echo "request-path.sh: no $baseline (write it with --update)" >&2; exit 1; }
failed=0
for row in "${rows[@]}"; do
    base=$(awk -v row="$row" '!/^#/ && $1 " " $2 == row { print $3 }' "$baseline")
    [ -n "$base" ] || { echo "request-path.sh: $baseline has no row \"$row\"" >&2; exit 1; }
    now=$(count "$row")
    verdict=$(awk -v now="$now" -v base="$base" -v limit="$limit" 'BEGIN {
        change = (now - base) * 100 / base
        printf "%+.2f%% %s", change, (change > limit ? "ROSE" : "ok") }')
    echo "request path: $row: $now instructions per request, baseline $base: $verdict"
    case "$verdict" in *ROSE) failed=1 ;; esac
done
if [ "$failed" -ne 0 ]; then
    echo "request-path.sh: a row rose more than $limit% above $baseline: find the change that cost it (benches/scripts/per-request.sh FLAVOUR N --cache, callgrind_annotate on its profiles), or, if it buys something worth it, update the baseline in a commit of its own that says what" >&2
    exit 1
fi
