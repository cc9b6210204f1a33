//! Shared pieces of the benchmarks. See `RESULTS.md` for the figures and the commands.
