//! `crate = path` points the generated code at a renamed or re-exported tegu-core.
pub mod platform {
    pub use tegu_core as di;
}

#[tegu_core::context_proto(crate = platform::di)]
pub struct RequestId {
    value: u64,
}

fn main() {}
