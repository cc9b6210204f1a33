//! The generated project builds, registers through inventory, and injects all 1000 services.

use tegu_core::App;
use tegu_scale_test::{Consumer, register};

#[tokio::test]
async fn consumer_injects_all_thousand_generated_services() {
    let app = register(App::builder()).build().await.unwrap();
    // And tegu-core's own: EventBus, and the lineage types Tenant, TraceContext, TraceState.
    assert_eq!(app.proto_count(), 1005);
    let consumer = app.get_object::<Consumer>().unwrap();
    // Service{i}::call returns i: the sum proves every field holds the right service.
    assert_eq!(consumer.touch_all(), (0..1000).sum::<u64>());
}
