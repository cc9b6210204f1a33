//! `#[inject(skip)]` builds a field with `Default`: it takes no value and no other option, and a
//! constructor's parameters are all injected.
use std::sync::Arc;

use tegu_core::singleton_proto;

#[singleton_proto]
#[derive(Default)]
pub struct Clock;

#[singleton_proto]
pub struct Named {
    #[inject(skip, name = "utc")]
    clock: Arc<Clock>,
}

#[singleton_proto]
pub struct Valued {
    #[inject(skip = true)]
    clock: Arc<Clock>,
}

pub struct Built {
    pub clock: Arc<Clock>,
}

#[singleton_proto]
impl Built {
    pub fn new(#[inject(skip)] clock: Arc<Clock>) -> Built {
        Built { clock }
    }
}

fn main() {}
