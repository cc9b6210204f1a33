#!/usr/bin/env bash
# What `resolve_commits = true` costs a PostgreSQL write transaction: the round trip that learns
# the transaction's id before its `COMMIT` (`SELECT pg_current_xact_id_if_assigned()`).
#
#   bash benches/scripts/resolve-commits.sh POSTGRES_URL [ROUNDS] [SECONDS]
#
# Runs pgbench (one client, one thread) on two scripts in turn, ROUNDS times each (default 5),
# SECONDS each time (default 5): `plain` is `BEGIN`, an `INSERT`, `COMMIT`; `resolving` adds the
# `SELECT` before the `COMMIT`. Interleaved, so that the machine's noise falls on both alike.
# Prints each round's mean latency per transaction and, at the end, the medians and their
# difference (the round trip). Creates and drops the table `resolve_commits_bench`. Needs
# pgbench (Debian's `postgresql-client` or the server's package).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
url="$1" rounds="${2:-5}" seconds="${3:-5}"
pgbench="$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -1)"
[ -x "$pgbench" ] || { echo "resolve-commits.sh: pgbench is not installed" >&2; exit 1; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"; psql "$url" -qc "DROP TABLE IF EXISTS resolve_commits_bench" >/dev/null 2>&1 || true' EXIT
PGOPTIONS="-c client_min_messages=warning" psql "$url" -qc "DROP TABLE IF EXISTS resolve_commits_bench; CREATE TABLE resolve_commits_bench (id bigserial PRIMARY KEY, v int)"
printf 'BEGIN;\nINSERT INTO resolve_commits_bench (v) VALUES (1);\nCOMMIT;\n' > "$dir/plain.sql"
printf 'BEGIN;\nINSERT INTO resolve_commits_bench (v) VALUES (1);\nSELECT pg_current_xact_id_if_assigned()::text;\nCOMMIT;\n' \
    > "$dir/resolving.sql"
latency() { "$pgbench" -n -c 1 -j 1 -T "$seconds" -f "$dir/$1.sql" "$url" 2>/dev/null | sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p'; }
for round in $(seq "$rounds"); do
    for script in plain resolving; do
        ms="$(latency "$script")"
        echo "round $round $script: $ms ms per transaction"
        echo "$ms" >> "$dir/$script.txt"
    done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
plain="$(median "$dir/plain.txt")" resolving="$(median "$dir/resolving.txt")"
awk -v p="$plain" -v r="$resolving" 'BEGIN {
    printf "median: plain %.1f µs, resolving %.1f µs per transaction: +%.1f µs (%.0f%%)\n", p * 1000, r * 1000, (r - p) * 1000, (r / p - 1) * 100
}'
