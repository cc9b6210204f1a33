//! A transient proto is built anew per injection: by `Default` or a constructor, reached from
//! a singleton through `Provider<T>`, and may itself take singletons.
use std::sync::Arc;

use tegu_core::{singleton_proto, transient_proto, App, Provider};

#[singleton_proto]
#[derive(Default)]
pub struct Counter;

#[transient_proto]
#[derive(Default)]
pub struct Buffer {
    bytes: Vec<u8>,
}

pub struct Receipt {
    counter: Arc<Counter>,
}

#[transient_proto]
impl Receipt {
    fn new(counter: Arc<Counter>) -> Self {
        Receipt { counter }
    }
}

#[singleton_proto]
pub struct Till {
    #[inject]
    buffers: Provider<Buffer>,
    #[inject]
    receipts: Provider<Receipt>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let app = App::builder().build().await.unwrap();
    let till = app.get_object::<Till>().unwrap();
    let (a, b) = (till.buffers.get().unwrap(), till.buffers.get().unwrap());
    assert!(!Arc::ptr_eq(&a, &b) && a.bytes.is_empty());
    let receipt = till.receipts.get().unwrap();
    assert!(Arc::ptr_eq(&receipt.counter, &app.get_object::<Counter>().unwrap()));
}
