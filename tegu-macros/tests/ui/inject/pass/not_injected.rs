//! Fields without `#[inject]` are built with `Default`: plain state, and with
//! `#[inject(skip)]` even an `Arc` of a proto, an `Option` or a `Vec` of one.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tegu_core::{App, singleton_proto};

#[singleton_proto]
#[derive(Default)]
pub struct Stats {
    pub served: AtomicU64,
}

#[singleton_proto]
pub struct Report {
    #[inject]
    stats: Arc<Stats>,
    #[inject(skip)]
    private_stats: Arc<Stats>,
    #[inject(skip)]
    later: Option<Arc<Stats>>,
    #[inject(skip)]
    none: Vec<Arc<Stats>>,
    counter: Arc<AtomicU64>,
    names: Mutex<Vec<String>>,
    label: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = App::builder().without_inventory().link::<Report>().link::<Stats>().build().await.unwrap();
    let report = app.get_object::<Report>().unwrap();
    let stats = app.get_object::<Stats>().unwrap();
    assert!(Arc::ptr_eq(&report.stats, &stats));
    assert!(!Arc::ptr_eq(&report.private_stats, &stats));
    assert!(report.later.is_none() && report.none.is_empty() && report.label.is_empty());
    report.counter.fetch_add(1, Ordering::Relaxed);
    report.names.lock().unwrap().push("a".into());
    assert_eq!(report.private_stats.served.load(Ordering::Relaxed), 0);
}
