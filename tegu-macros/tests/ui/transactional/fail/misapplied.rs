//! `#[transactional]` applies to an async method; on a struct it says so.
use tegu_tx::transactional;

#[transactional]
pub struct Orders;

fn main() {}
