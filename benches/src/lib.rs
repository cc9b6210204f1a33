//! Shared pieces of the benchmarks: a counting allocator, latency statistics, JSON lines and
//! SVG charts. See `RESULTS.md` for the figures and the commands.

pub mod alloc;
pub mod args;
pub mod chart;
pub mod stats;
