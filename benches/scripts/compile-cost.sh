#!/usr/bin/env bash
# Compile cost of the container against plain Rust, and of the macros against the same
# registration written by hand (RESULTS.md, "Compile cost against plain Rust" and "Compile
# cost of the macros").
#
#   benches/scripts/compile-cost.sh [--ns "1000 2000"] [--styles "plain macro hand"] [--big] [--opt-macros] [--llvm-lines] [--tegg] [--timeout SECS]
#   benches/scripts/compile-cost.sh [--runs K] [--timeout SECS] CASE...
#
# Without CASE: the floor table. For each N (1000 and 2000; --big adds 10000) and each style
# (`plain`: the same services and consumer with no container; `macro`; `hand`), a generated
# crate (gen-project, in tests/codegen) is built four ways, each timed with /usr/bin/time
# (seconds and the peak RSS of the largest process, rustc):
#   debug        full debug build of the crate (its dependencies prebuilt)
#   edit-body    incremental debug rebuild after editing one method body (Service0::call): the
#                median of three such rebuilds, each with another body (one 2-second rebuild
#                strays by a tenth of a second on a shared machine; the three are printed too)
#   add-service  incremental debug rebuild after adding one service (and its consumer field)
#   release      full release build of the crate
# and the table gives each figure with its ratio to `plain` in the same run. All crates share
# one target directory (target/compile-cost/floor-target), so the dependencies build once per
# profile; each crate is cleaned (`cargo clean -p gen-services`) before its full builds.
# --opt-macros builds the generated crates with `[profile.dev.build-override] opt-level = 3`
# (proc macros and build scripts optimised; docs/guide/performance.md, "Compile time"), in a
# target directory of its own (target/compile-cost/floor-target-opt).
# --llvm-lines then lists the ten functions with the most LLVM IR lines (cargo llvm-lines, which
# the script installs if missing) in the macro crate of the first N and in the largest crate of
# tegg's 10000-service project; --tegg times the release build of that project (four crates of
# generated services, the app's shared crate and a crate per flavour, in
# target/compile-cost/tegg-target).
#
# With CASE: the release build time of the named cases (the earlier "Compile cost of the
# macros" measurements):
#   fields1000-macro   1000 services + a Consumer injecting all 1000, #[singleton_proto]/#[inject]
#   fields1000-hand    the same, registered by hand with ProtoDef/Dependency
#   protos1000-macro   1000 services, no consumer, macros
#   protos1000-hand    the same, by hand
#   n10000-macro       10000 services + a Consumer with 10000 injected fields, macros
#   n10000-hand, n10000-macro-noconsumer, n10000-hand-noconsumer
#
# Each case is a standalone crate (gen-project) under target/compile-cost/<case>/ with its own
# CARGO_TARGET_DIR (target/compile-cost/<case>/target), built --offline against a copy of the
# workspace's Cargo.lock. The dependencies (tegu-core, tokio, tegu-macros, ...) are built first with
# the same crate generated for N = 1, then the crate is regenerated with the real N and
# `cargo build --release` is timed with /usr/bin/time: the figure is the crate's own compile
# and link (plus cargo's fingerprint check, well under a second). Runs after the first `touch`
# the sources and rebuild the whole crate again (release builds are not incremental).
# Prints one line per case: case, seconds of each run, size of the release binary in bytes,
# the 1-minute load average after the last run, and the binary's output checked against the
# expected sum and proto count.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/target/compile-cost
RUNS=1
TIMEOUT=0
CASES=()
BIG=0
LINES=0
TEGG=0
OPT=""
NS="1000 2000"
STYLES="plain macro hand"
while [ $# -gt 0 ]; do
    case $1 in
        --runs) RUNS=$2; shift 2 ;;
        --timeout) TIMEOUT=$2; shift 2 ;;
        --big) BIG=1; shift ;;
        --llvm-lines) LINES=1; shift ;;
        --tegg) TEGG=1; shift ;;
        --opt-macros) OPT="-opt"; shift ;;
        --ns) NS=$2; shift 2 ;;
        --styles) STYLES=$2; shift 2 ;;
        -h|--help) sed -n '2,49p' "$0"; exit 0 ;;
        -*) echo "compile-cost.sh: unknown option $1" >&2; exit 2 ;;
        *) CASES+=("$1"); shift ;;
    esac
done
[ $BIG = 1 ] && NS="$NS 10000"

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

cargo build --release --offline --quiet --manifest-path "$ROOT/Cargo.toml" -p tegu-codegen --bin gen-project
GEN=${CARGO_TARGET_DIR:-$ROOT/target}/release/gen-project

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(rustc -V)"

# Runs a cargo command with /usr/bin/time; prints "seconds peak-MB", or the failure.
timed() {
    local tfile rc=0
    tfile=$(mktemp)
    if [ "$TIMEOUT" -gt 0 ]; then
        /usr/bin/time -f '%e %M' -o "$tfile" timeout "$TIMEOUT" "$@" >/dev/null 2>&1 || rc=$?
    else
        /usr/bin/time -f '%e %M' -o "$tfile" "$@" >/dev/null 2>&1 || rc=$?
    fi
    if [ $rc != 0 ]; then
        [ $rc = 124 ] && echo "TIMEOUT -" || echo "FAILED(rc=$rc) -"
    else
        tail -n1 "$tfile" | awk '{ printf "%s %d\n", $1, $2 / 1024 }'
    fi
    rm -f "$tfile"
}

# The median of three "seconds peak-MB" results by seconds, or the first that is a failure.
median3() {
    local r
    for r in "$@"; do
        case $r in [0-9]*) ;; *) echo "$r"; return ;; esac
    done
    printf '%s\n' "$@" | sort -n | sed -n 2p
}

# The output a crate of n services (with its consumer) of style $2 prints: an App also holds
# tegu-core's event bus, which plain Rust has not.
want() { echo "sum=$(($1 * ($1 - 1) / 2)) protos=$(($1 + 1 + $([ "$2" = plain ] && echo 0 || echo 1)))"; }

floor_table() {
    export CARGO_TARGET_DIR=$OUT/floor-target$OPT
    local warm=$OUT/floor-warm$OPT results=() n style dir gen=("$GEN")
    [ -n "$OPT" ] && gen+=(--opt-macros)
    # Dependencies once per profile, through a one-service crate with the same Cargo.toml.
    "${gen[@]}" --n 1 --style macro --out "$warm" >/dev/null
    cargo build --offline --quiet --manifest-path "$warm/Cargo.toml"
    cargo build --release --offline --quiet --manifest-path "$warm/Cargo.toml"
    for n in $NS; do
        for style in $STYLES; do
            dir=$OUT/floor-$style-n$n$OPT
            local build=(cargo build --offline --manifest-path "$dir/Cargo.toml")
            "${gen[@]}" --n "$n" --style "$style" --out "$dir" >/dev/null
            cargo clean --offline --quiet --manifest-path "$dir/Cargo.toml" -p gen-services
            local debug edit add release check
            debug=$(timed "${build[@]}")
            local edits=() k
            for k in 1 2 3; do
                "${gen[@]}" --n "$n" --style "$style" --edit "$(date +%s)$k" --out "$dir" >/dev/null
                edits+=("$(timed "${build[@]}")")
            done
            edit=$(median3 "${edits[@]}")
            "${gen[@]}" --n "$((n + 1))" --style "$style" --out "$dir" >/dev/null
            add=$(timed "${build[@]}")
            check=$("$CARGO_TARGET_DIR/debug/gen-services" 2>&1 || true)
            [ "$check" = "$(want $((n + 1)) "$style")" ] || check="WRONG: got '$check', want '$(want $((n + 1)) "$style")'"
            "${gen[@]}" --n "$n" --style "$style" --out "$dir" >/dev/null
            cargo clean --offline --quiet --manifest-path "$dir/Cargo.toml" -p gen-services
            release=$(timed "${build[@]}" --release)
            results+=("$n $style $debug $edit $add $release")
            printf '# n=%s %-6s debug %s, edit-body %s (median of %s), add-service %s, release %s (s MB); %s\n' \
                "$n" "$style" "$debug" "$edit" "$(printf '%s; ' "${edits[@]}" | sed 's/; $//')" "$add" "$release" "$check"
        done
    done
    unset CARGO_TARGET_DIR
    # The table: seconds (peak MB) per measurement and style, and the ratio to plain.
    printf '%s\n' "${results[@]}" | awk -v styles="$STYLES" '
        { key = $1 " " $2; t[key, 1] = $3; m[key, 1] = $4; t[key, 2] = $5; m[key, 2] = $6
          t[key, 3] = $7; m[key, 3] = $8; t[key, 4] = $9; m[key, 4] = $10
          if (!($1 in seen)) { seen[$1] = 1; ns[++nn] = $1 } }
        END {
            split("debug edit-body add-service release", what, " "); ns_ = split(styles, st, " ")
            printf "| N | build |"; for (i = 1; i <= ns_; i++) printf " %s |", st[i]; print ""
            printf "| ---: | --- |"; for (i = 1; i <= ns_; i++) printf " ---: |"; print ""
            for (k = 1; k <= nn; k++) for (w = 1; w <= 4; w++) {
                printf "| %s | %s |", ns[k], what[w]; base = t[ns[k] " plain", w]
                for (i = 1; i <= ns_; i++) {
                    v = t[ns[k] " " st[i], w]; mb = m[ns[k] " " st[i], w]
                    if (st[i] != "plain" && base + 0 > 0 && v + 0 > 0) printf " %s s, %s MB (%.2fx) |", v, mb, v / base
                    else printf " %s s, %s MB |", v, mb
                }
                print ""
            }
        }'
}

# Where the code comes from: the ten functions with the most LLVM IR lines (cargo llvm-lines,
# installed here if missing), in the macro crate of the first N and in the tegg project's
# largest generated crate (tegg-services-0, a quarter of its 10000 services; debug, as the
# tool builds).
llvm_lines() {
    command -v cargo-llvm-lines >/dev/null || cargo install --locked --quiet cargo-llvm-lines
    local n=${NS%% *} dir
    dir=$OUT/floor-macro-n$n
    "$GEN" --n "$n" --style macro --out "$dir" >/dev/null
    echo "# cargo llvm-lines, gen-project --n $n --style macro (debug)"
    CARGO_TARGET_DIR=$OUT/floor-target cargo llvm-lines --offline --quiet --manifest-path "$dir/Cargo.toml" \
        --bin gen-services | head -n 13
    echo "# cargo llvm-lines, tegg-services-0 of the 10000-service project (debug)"
    TEGG_SERVICES=10000 CARGO_TARGET_DIR=$OUT/tegg-target cargo llvm-lines --offline --quiet \
        --manifest-path "$ROOT/Cargo.toml" -p tegg-services-0 --lib | head -n 13
}

# The release build of tegg's 10000-service project (four crates of generated services, the
# app's shared crate and the four flavour crates), its dependencies built first: seconds and
# the peak RSS of the largest rustc.
tegg_release() {
    export CARGO_TARGET_DIR=$OUT/tegg-target
    # Each crate's own rustc, timed through a wrapper: which crate takes the time and the memory.
    local wrapper=$OUT/rustc-timed.sh log=$OUT/tegg-crates.txt
    printf '#!/bin/sh\n# $1 is rustc; the crate name follows --crate-name.\nname=$(echo "$@" | sed -n "s/.*--crate-name \\([^ ]*\\).*/\\1/p")\nexec /usr/bin/time -a -o %s -f "$name %%e s %%M KB" "$@"\n' "$log" >"$wrapper"
    chmod +x "$wrapper"
    export RUSTC_WRAPPER=$wrapper
    # The dependencies and build scripts, through a project of one service per crate; the real
    # size then re-runs the build scripts and rebuilds the nine generated crates only.
    TEGG_SERVICES=4 cargo build --release --offline --quiet --manifest-path "$ROOT/Cargo.toml" -p 'tegg-*'
    : >"$log"
    echo "# tegg project, 10000 services, release: $(TEGG_SERVICES=10000 timed cargo build --release --offline --manifest-path "$ROOT/Cargo.toml" -p 'tegg-*') (s MB)"
    unset RUSTC_WRAPPER
    grep '^tegg_' "$log" | awk '{ printf "#   %s: %s s, %d MB\n", $1, $2, $4 / 1024 }'
    unset CARGO_TARGET_DIR
}

if [ ${#CASES[@]} -eq 0 ]; then
    # `--ns ""` (with --tegg or --llvm-lines): no floor table.
    [ -n "${NS// /}" ] && floor_table
    [ $LINES = 1 ] && llvm_lines
    [ $TEGG = 1 ] && tegg_release
    exit 0
fi
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
