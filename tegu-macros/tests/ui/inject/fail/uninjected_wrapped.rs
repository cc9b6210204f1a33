//! A proto in a `Box`, an `Option` or a `Weak`, without `#[inject]`: `Default` makes a private
//! copy, `None` or a `Weak` that never upgrades, not the App's; one error each, at the field.
use std::sync::{Arc, Weak};

use tegu_core::singleton_proto;

#[singleton_proto]
#[derive(Default)]
pub struct Clock;

#[singleton_proto]
pub struct Mailer {
    boxed: Box<Clock>,
    maybe: Option<Clock>,
    weak: Weak<Clock>,
    fine: Option<Arc<u8>>,
}

fn main() {}
