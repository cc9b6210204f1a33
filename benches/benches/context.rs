//! Micro benchmarks (placeholder until written).
fn main() {}
