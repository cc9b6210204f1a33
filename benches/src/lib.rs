//! Shared pieces of the benchmarks: a counting allocator, latency statistics, JSON lines and
//! SVG charts. See `RESULTS.md` for the figures and the commands.

pub mod alloc;
/// The flags of the bench binaries (in di-codegen, which `gen-project` shares).
pub use di_codegen::args;
pub mod chart;
pub mod stats;
