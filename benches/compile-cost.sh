#!/usr/bin/env bash
# Compile cost of the macros against the same registration written by hand (RESULTS.md,
# "Compile cost of the macros").
#
#   benches/compile-cost.sh [--runs K] [--timeout SECS] [--big] [CASE...]
#
# Cases (default: the first four; --big adds n10000-macro; any case can be named):
#   fields1000-macro   1000 services + a Consumer injecting all 1000, #[singleton_proto]/#[inject]
#   fields1000-hand    the same, registered by hand with ProtoDef/Dependency
#   protos1000-macro   1000 services, no consumer, macros
#   protos1000-hand    the same, by hand
#   n10000-macro       10000 services + a Consumer with 10000 injected fields, macros
#   n10000-hand, n10000-macro-noconsumer, n10000-hand-noconsumer
#
# Each case is a standalone crate (gen-project) under target/compile-cost/<case>/ with its own
# CARGO_TARGET_DIR (target/compile-cost/<case>/target), built --offline against a copy of the
# workspace's Cargo.lock. The dependencies (di-core, tokio, di-macros, ...) are built first with
# the same crate generated for N = 1, then the crate is regenerated with the real N and
# `cargo build --release` is timed with /usr/bin/time: the figure is the crate's own compile
# and link (plus cargo's fingerprint check, well under a second). Runs after the first `touch`
# the sources and rebuild the whole crate again (release builds are not incremental).
# Prints one line per case: case, seconds of each run, size of the release binary in bytes,
# the 1-minute load average after the last run, and the binary's output checked against the
# expected sum and proto count.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/target/compile-cost
RUNS=1
TIMEOUT=0
CASES=()
BIG=0
while [ $# -gt 0 ]; do
    case $1 in
        --runs) RUNS=$2; shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --big) BIG=1; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        -*) echo "compile-cost.sh: unknown option $1" >&2; exit 2 ;;
        *) CASES+=("$1"); shift ;;
    esac
done
if [ ${#CASES[@]} -eq 0 ]; then
    CASES=(fields1000-macro fields1000-hand protos1000-macro protos1000-hand)
fi
if [ $BIG = 1 ]; then
    CASES+=(n10000-macro)
fi

# case -> "N style consumer"
spec() {
    case $1 in
        fields1000-macro) echo "1000 macro 1" ;;
        fields1000-hand) echo "1000 hand 1" ;;
        protos1000-macro) echo "1000 macro 0" ;;
        protos1000-hand) echo "1000 hand 0" ;;
        n10000-macro) echo "10000 macro 1" ;;
        n10000-hand) echo "10000 hand 1" ;;
        n10000-macro-noconsumer) echo "10000 macro 0" ;;
        n10000-hand-noconsumer) echo "10000 hand 0" ;;
        *) echo "compile-cost.sh: unknown case $1" >&2; return 2 ;;
    esac
}

cargo build --release --offline --quiet --manifest-path "$ROOT/Cargo.toml" -p benches --bin gen-project
GEN=${CARGO_TARGET_DIR:-$ROOT/target}/release/gen-project

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(rustc -V)"
printf '%-24s %-20s %12s %6s  %s\n' case seconds bytes load output
for case in "${CASES[@]}"; do
    sp=$(spec "$case") || exit 2
    read -r n style consumer <<<"$sp"
    dir=$OUT/$case
    flags=(--style "$style" --out "$dir")
    [ "$consumer" = 1 ] || flags+=(--no-consumer)
    export CARGO_TARGET_DIR=$dir/target
    build=(cargo build --release --offline --quiet --manifest-path "$dir/Cargo.toml")

    # Dependencies first, with the same Cargo.toml and a one-service crate.
    "$GEN" --n 1 "${flags[@]}" >/dev/null
    "${build[@]}"

    "$GEN" --n "$n" "${flags[@]}" >/dev/null
    times=()
    status=ok
    for ((run = 1; run <= RUNS; run++)); do
        [ $run = 1 ] || touch "$dir"/src/*.rs
        tfile=$(mktemp)
        rc=0
        if [ "$TIMEOUT" -gt 0 ]; then
            /usr/bin/time -f %e -o "$tfile" timeout "$TIMEOUT" "${build[@]}" || rc=$?
        else
            /usr/bin/time -f %e -o "$tfile" "${build[@]}" || rc=$?
        fi
        # /usr/bin/time writes "Command exited with non-zero status N" before the time.
        times+=("$(tail -n1 "$tfile")")
        rm -f "$tfile"
        if [ $rc != 0 ]; then
            [ $rc = 124 ] && status="TIMEOUT after ${TIMEOUT}s" || status="BUILD FAILED (rc $rc)"
            break
        fi
    done
    unset CARGO_TARGET_DIR
    bin=$dir/target/release/gen-services
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [ "$status" = ok ]; then
        size=$(stat -c %s "$bin")
        if [ "$consumer" = 1 ]; then
            want="sum=$((n * (n - 1) / 2)) protos=$((n + 1))"
        else
            want="sum=0 protos=$n"
        fi
        got=$("$bin" 2>&1) || got="FAILED: $got"
        [ "$got" = "$want" ] && status="ok ($got)" || status="WRONG: got '$got', want '$want'"
    else
        size=-
    fi
    printf '%-24s %-20s %12s %6s  %s\n' "$case" "$(IFS=/; echo "${times[*]}")" "$size" "$load" "$status"
done
