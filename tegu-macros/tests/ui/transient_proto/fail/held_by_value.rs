//! A singleton holding a transient by value would keep one forever: it holds `Provider<T>`.
use std::sync::Arc;

use tegu_core::{singleton_proto, transient_proto};

#[transient_proto]
pub struct Buffer;

#[singleton_proto]
pub struct Encoder {
    #[inject]
    buffer: Arc<Buffer>,
}

fn main() {}
