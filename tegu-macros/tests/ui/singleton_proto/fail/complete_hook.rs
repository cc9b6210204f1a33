//! `complete` is a hook of context protos: a singleton has no scope whose work completes.
use tegu_core::singleton_proto;

#[singleton_proto(complete = flush)]
pub struct Cache;

impl Cache {
    async fn flush(&self) {}
}

fn main() {}
