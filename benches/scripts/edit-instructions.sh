#!/usr/bin/env bash
# The instructions rustc executes for a one-body edit of a generated crate, counted by cachegrind:
# an A/B measure of the macros' compile cost that repeats to about 0.02%, where the time of a
# 2-second rebuild strays by 5% on a shared machine (benches/RESULTS.md, "Compile cost of
# the macros").
#
#   bash benches/scripts/edit-instructions.sh [--n N] [--style macro|plain|hand]
#
# Generates the crate of compile-cost.sh's floor table (gen-project, N = 2000 and the macro style
# by default) in target/compile-cost/floor-<style>-n<N>, with that table's target directory,
# builds it, makes two one-body edits (the first primes the incremental cache as an edit leaves
# it), then runs the third edit's rustc under `valgrind --tool=cachegrind --cache-sim=no`
# (through RUSTC_WRAPPER, for the generated crate alone) and prints its total instructions. The
# linker, a process of its own, is not counted. Needs valgrind (Debian's `valgrind`). A run
# takes about a minute at N = 2000.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
N=2000
STYLE=macro
while [ $# -gt 0 ]; do
    case $1 in
        --n) N=$2; shift 2 ;;
        --style) STYLE=$2; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "edit-instructions.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "edit-instructions.sh: needs valgrind" >&2; exit 2; }

cargo build --release --offline --quiet --manifest-path "$ROOT/Cargo.toml" -p tegu-codegen --bin gen-project
GEN=${CARGO_TARGET_DIR:-$ROOT/target}/release/gen-project
export CARGO_TARGET_DIR=$ROOT/target/compile-cost/floor-target
dir=$ROOT/target/compile-cost/floor-$STYLE-n$N
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The wrapper counts the generated crate's rustc when EDIT_INSTRUCTIONS_OUT names a file; it is
# set for every build, so that cargo's fingerprints do not change between them.
cat >"$work/wrap.sh" <<'EOF'
#!/usr/bin/env bash
if [ -n "${EDIT_INSTRUCTIONS_OUT:-}" ] && [[ " $* " == *" --crate-name gen_services "* ]]; then
    exec valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$EDIT_INSTRUCTIONS_OUT" "$@"
fi
exec "$@"
EOF
chmod +x "$work/wrap.sh"
export RUSTC_WRAPPER=$work/wrap.sh
build=(cargo build --offline --quiet --manifest-path "$dir/Cargo.toml")

"$GEN" --n "$N" --style "$STYLE" --out "$dir" >/dev/null
"${build[@]}" 2>/dev/null
for k in 1 2; do
    "$GEN" --n "$N" --style "$STYLE" --edit "$(date +%s)$k" --out "$dir" >/dev/null
    "${build[@]}" 2>/dev/null
done
"$GEN" --n "$N" --style "$STYLE" --edit "$(date +%s)3" --out "$dir" >/dev/null
EDIT_INSTRUCTIONS_OUT=$work/edit.cg "${build[@]}" >/dev/null 2>&1
# Cargo keeps the crate's diagnostics (here cachegrind's report) to replay them on later fresh
# builds: one more build without the counter makes it forget them.
"$GEN" --n "$N" --style "$STYLE" --out "$dir" >/dev/null
"${build[@]}" >/dev/null 2>&1
echo "n=$N style=$STYLE edit instructions $(awk '/^summary:/ { print $2 }' "$work/edit.cg")"
