//! A schedule names a period with units (`every = "30s"`, longer than zero) or a six- or seven-field cron expression, and nothing else
//! but a bare `once_per_cluster`, once, and a `config = "key"` string, once.
use tegu_core::{handlers, singleton_proto};

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

    #[schedule(once_per_cluster)]
    async fn cluster_only(&self) {}

    #[schedule(every = "1h", once_per_cluster = true)]
    async fn cluster_with_value(&self) {}

    #[schedule(every = "1h", once_per_cluster, once_per_cluster)]
    async fn cluster_twice(&self) {}

    #[schedule(every = "1h", config = "")]
    async fn empty_key(&self) {}

    #[schedule(every = "1h", config = 5)]
    async fn number_key(&self) {}

    #[schedule(every = "1h", config = "a.b", config = "c")]
    async fn two_keys(&self) {}
}

fn main() {}
