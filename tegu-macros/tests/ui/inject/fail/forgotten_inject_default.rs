//! A forgotten `#[inject]` on an `Arc` of a singleton that derives `Default` would hold a
//! second, private instance: refused at the field.
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tegu_core::singleton_proto;

#[singleton_proto]
#[derive(Default)]
pub struct Stats {
    pub served: AtomicU64,
}

#[singleton_proto]
pub struct Report {
    stats: Arc<Stats>,
}

// Injects `Report`, whose expansion stands: no second error here.
#[singleton_proto]
pub struct Page {
    #[inject]
    report: Arc<Report>,
}

fn main() {}
