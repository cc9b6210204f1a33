//! `#[handlers]` takes only `crate = path` and applies to an inherent impl block of a non-generic
//! singleton with at least one handler; `#[event_handler]` takes one phase, as a bare word; a
//! method has one handler attribute.
use tegu_core::{handlers, singleton_proto};

pub struct Ping;

#[singleton_proto]
pub struct Audit;

#[handlers(strict)]
impl Audit {
    #[event_handler(priority = 1)]
    async fn on_ping(&self, _ping: &Ping) {}

    #[event_handler(before_commit, after_rollback)]
    async fn two_phases(&self, _ping: &Ping) {}

    #[event_handler(before_commit = true)]
    async fn phase_with_value(&self, _ping: &Ping) {}

    #[event_handler()]
    async fn empty(&self, _ping: &Ping) {}

    #[event_handler]
    #[schedule(every = "1m")]
    async fn both(&self) {}
}

pub trait Listener {
    fn listen(&self);
}

#[handlers]
impl Listener for Audit {
    fn listen(&self) {}
}

pub struct Generic<T>(T);

#[handlers]
impl<T> Generic<T> {
    #[event_handler]
    async fn on_ping(&self, _ping: &Ping) {}
}

#[handlers]
impl Audit {
    fn helper(&self) {}
}

#[handlers]
pub struct NotAnImpl;

fn main() {}
