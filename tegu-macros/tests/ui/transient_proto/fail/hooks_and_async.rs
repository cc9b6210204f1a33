//! The container does not keep a transient: no hooks, no async constructor. And a `Provider`
//! points at a transient.
use tegu_core::{singleton_proto, transient_proto, Provider};

#[transient_proto(init = warm, destroy = close)]
pub struct Buffer;

pub struct Socket;
#[transient_proto]
impl Socket {
    async fn new() -> Socket {
        Socket
    }
}

#[singleton_proto]
pub struct Clock;

#[singleton_proto]
pub struct Encoder {
    #[inject]
    clock: Provider<Clock>,
}

fn main() {}
