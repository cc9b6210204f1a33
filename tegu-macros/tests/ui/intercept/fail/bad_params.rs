//! An advice's parameters are fields of its `AdviceParams`, each given once as `name = value`.
use tegu_core::{intercept, singleton_proto, advice::{Advice, AdviceParams, Call, Next}};

/// Takes no parameters.
#[singleton_proto]
pub struct Timing;

impl<R> Advice<R> for Timing {
    async fn around(&self, _call: Call, next: Next<'_, R>) -> R {
        next.run().await
    }
}

/// Takes a `per_sec`.
#[singleton_proto]
pub struct RateLimit;

pub struct Limit {
    pub per_sec: u32,
}

impl AdviceParams for RateLimit {
    type Params = Limit;
    const DEFAULT: &'static Limit = &Limit { per_sec: 100 };
}

impl<R> Advice<R> for RateLimit {
    async fn around(&self, call: Call, next: Next<'_, R>) -> R {
        let _ = call.params_of::<RateLimit>().per_sec;
        next.run().await
    }
}

#[singleton_proto]
pub struct Orders;

impl Orders {
    #[intercept(Timing(verbose = true))]
    pub async fn place(&self) {}

    #[intercept(RateLimit(burst = 5))]
    pub async fn list(&self) {}

    #[intercept(RateLimit(per_sec = "ten"))]
    pub async fn cancel(&self) {}

    #[intercept(RateLimit(10))]
    pub async fn find(&self) {}

    #[intercept(RateLimit(per_sec = 1, per_sec = 2))]
    pub async fn count(&self) {}

    #[intercept(RateLimit(per_sec))]
    pub async fn clear(&self) {}
}

fn main() {}
