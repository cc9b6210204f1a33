//! `crate = path` points the generated code at a renamed or re-exported di-core.
pub mod platform {
    pub use di_core as di;
}

#[di_core::context_proto(crate = platform::di)]
pub struct RequestId {
    value: u64,
}

fn main() {}
