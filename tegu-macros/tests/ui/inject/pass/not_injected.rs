//! Fields without `#[inject]` are built with `Default`: plain state, and with
//! `#[inject(skip)]` even an `Arc` of a proto, an `Option` or a `Vec` of one, a proto in a `Box`,
//! an `Option` or a `Weak`; an `Arc`, a `Box` or an `Option` of a type that is no proto, and
//! another crate's type that shares a name with one of tegu's handles.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

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
    #[inject(skip)]
    boxed: Box<Stats>,
    #[inject(skip)]
    maybe: Option<Stats>,
    #[inject(skip)]
    weak: Weak<Stats>,
    counter: Arc<AtomicU64>,
    names: Mutex<Vec<String>>,
    label: String,
    // `Arc`s of types that are no protos: plain state.
    shared_names: Vec<Arc<String>>,
    tag: Option<Arc<str>>,
    note: Option<String>,
    buffer: Box<[u8]>,
    weak_names: Weak<String>,
    // A type of another crate named as one of tegu's handles is a plain field.
    provider: Provider<u8>,
}

/// Not tegu's `Provider`: a client of some other library.
#[derive(Default)]
pub struct Provider<T>(std::marker::PhantomData<T>);

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = App::builder().without_inventory().link::<Report>().link::<Stats>().build().await.unwrap();
    let report = app.get_object::<Report>().unwrap();
    let stats = app.get_object::<Stats>().unwrap();
    assert!(Arc::ptr_eq(&report.stats, &stats));
    assert!(!Arc::ptr_eq(&report.private_stats, &stats));
    assert!(report.later.is_none() && report.none.is_empty() && report.label.is_empty());
    assert!(report.shared_names.is_empty() && report.tag.is_none());
    assert!(report.maybe.is_none() && report.weak.upgrade().is_none() && report.boxed.served.load(Ordering::Relaxed) == 0);
    assert!(report.note.is_none() && report.buffer.is_empty() && report.weak_names.upgrade().is_none());
    let _ = &report.provider;
    report.counter.fetch_add(1, Ordering::Relaxed);
    report.names.lock().unwrap().push("a".into());
    assert_eq!(report.private_stats.served.load(Ordering::Relaxed), 0);
}
