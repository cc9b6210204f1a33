//! What an annotated `impl` block must be: inherent, with one constructor that takes no `self`
//! and returns `Self` or `Result<Self, E>`.
use tegu_core::singleton_proto;

pub struct NoConstructor;
#[singleton_proto]
impl NoConstructor {
    pub fn make() -> Self {
        NoConstructor
    }
}

pub struct TwoConstructors;
#[singleton_proto]
impl TwoConstructors {
    #[constructor]
    pub fn one() -> Self {
        TwoConstructors
    }
    #[constructor]
    pub fn two() -> Self {
        TwoConstructors
    }
}

pub struct TakesSelf;
#[singleton_proto]
impl TakesSelf {
    pub fn new(&self) -> Self {
        TakesSelf
    }
}

pub struct WrongReturn;
#[singleton_proto]
impl WrongReturn {
    pub fn new() -> Option<Self> {
        Some(WrongReturn)
    }
}

pub trait Named {}
pub struct TraitImpl;
#[singleton_proto]
impl Named for TraitImpl {}

fn main() {}

/// Refused, and re-emitted without its markers: only the real error shows.
pub trait Build {
    fn build(n: std::sync::Arc<TraitImpl>) -> Self;
}
#[singleton_proto]
impl Build for TakesSelf {
    #[constructor]
    fn build(#[inject] _n: std::sync::Arc<TraitImpl>) -> Self {
        TakesSelf
    }
}
