//! A hand-written `Proto` impl sets `DESCRIPTOR`: without it (and without the factory the macros write for its default), the proto fails to build where its descriptor is used.
use tegu_core::{App, Proto};

pub struct Clock;

impl Proto for Clock {}

fn main() {
    let _ = App::builder().link::<Clock>();
}
