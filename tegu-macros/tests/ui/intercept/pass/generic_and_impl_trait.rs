//! Generic methods, `impl Trait` outputs, `self` by `Arc`, references in arguments.
use std::sync::Arc;

use tegu_core::{intercept, singleton_proto, advice::{Advice, Call, Next}};

#[singleton_proto]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, _: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

#[singleton_proto]
pub struct Todos;

impl Todos {
    #[intercept(Timing)]
    pub async fn show<T: std::fmt::Debug + Send>(&self, value: T, label: &str) -> String {
        format!("{label}: {value:?}")
    }

    #[intercept(Timing)]
    pub async fn iter(&self) -> impl Iterator<Item = u8> {
        [1u8, 2].into_iter()
    }

    #[intercept(Timing)]
    pub async fn owned(self: Arc<Self>, n: u8) -> Result<u8, std::num::TryFromIntError> {
        let m: u8 = u8::try_from(u16::from(n) * 2)?;
        Ok(m)
    }
}

fn main() {}
