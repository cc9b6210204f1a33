//! A schedule names a period with units (`every = "30s"`, longer than zero) or a six- or seven-field cron expression, and nothing else.
use di_core::{handlers, singleton_proto};

#[singleton_proto]
pub struct Jobs;

#[handlers]
impl Jobs {
    #[schedule(every = "30 parsecs")]
    async fn unit(&self) {}

    #[schedule(every = "0s")]
    async fn zero(&self) {}

    #[schedule(cron = "*/5 * * * *")]
    async fn five_fields(&self) {}

    #[schedule(cron = "0 61 * * * *")]
    async fn out_of_range(&self) {}

    #[schedule(at = "noon")]
    async fn unknown_option(&self) {}

    #[schedule]
    async fn nothing(&self) {}
}

fn main() {}
