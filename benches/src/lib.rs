//! Shared pieces of the benchmarks: latency statistics, JSON lines and SVG charts (the counting
//! allocator is `tegu_test_support::alloc`). See `RESULTS.md` for the figures and the commands.

/// The flags of the bench binaries (in tegu-codegen, which `gen-project` shares).
pub use tegu_codegen::args;
pub mod chart;
pub mod micro;
pub mod stats;
