//! `build()` and `check()` refuse a handler that reads the request (its head, or its id, the
//! lineage type built from the head) for an event a job emits outside any request: there is no
//! request there, and the handler would fail at run time with "there is no request".

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Arc;

use tegu_core::registry::{AnyArc, Dependency, InjectKind, Lifetime, ProtoDescriptor};
use tegu_core::{App, ContextProto, ContextRef, DiError, Proto, Resolver, events::EventBus, handlers, singleton_proto};
use tegu_http::{RequestHead, RequestId};

pub struct Swept;

/// Emits `Swept` every hour, outside any request.
#[singleton_proto]
pub struct Sweeper {
    #[inject]
    events: Arc<EventBus>,
}

#[handlers]
impl Sweeper {
    #[schedule(every = "1h", emits(Swept))]
    async fn sweep(&self) {
        self.events.emit(Swept);
    }
}

/// A context object made of the request id (the lineage type), written by hand.
pub struct Tag;

fn tag(r: &Resolver<'_>) -> Result<AnyArc, DiError> {
    r.arc::<RequestId>(0)?;
    Ok(Arc::new(Tag))
}

const TAG_DEPS: &[Dependency] = &[Dependency::new::<RequestId>(InjectKind::Arc, None)];

impl Proto for Tag {
    const DESCRIPTOR: ProtoDescriptor = ProtoDescriptor::new::<Tag>("tag", Lifetime::Context, tag).deps(TAG_DEPS);
}
impl ContextProto for Tag {}

/// Tags what it handles with the request id: there is none for a `Swept` from the job.
#[singleton_proto]
pub struct Audit {
    #[inject]
    tag: ContextRef<Tag>,
}

#[handlers]
impl Audit {
    #[event_handler]
    async fn on_swept(&self, _: &Swept) -> Result<(), DiError> {
        self.tag.try_get().map(|_| ())
    }
}

/// Reads the request's head itself.
#[singleton_proto]
pub struct Trail {
    #[inject]
    head: ContextRef<RequestHead>,
}

#[handlers]
impl Trail {
    #[event_handler]
    async fn on_swept(&self, _: &Swept) -> Result<(), DiError> {
        self.head.try_get().map(|_| ())
    }
}

fn app() -> tegu_core::AppBuilder {
    App::builder().without_inventory().link::<EventBus>().link::<Sweeper>().link::<RequestHead>()
}

#[tokio::test]
async fn a_handler_that_reads_the_request_id_of_an_event_a_job_emits_is_refused() {
    let error = app().link::<Audit>().link::<Tag>().check().unwrap_err();
    let DiError::LineageUnmet { handler, event, emitter, wanted, through } = &error else { panic!("{error}") };
    assert_eq!(
        (handler.as_str(), *event, emitter.as_str(), *wanted),
        ("Audit::on_swept", "Swept", "schedule `Sweeper::sweep`", "RequestHead")
    );
    assert_eq!(through.len(), 3, "{through:?}");
    assert!(through[1].contains("Tag") && through[2].contains("RequestId"), "{through:?}");
    let built = app().link::<Audit>().link::<Tag>().build().await.unwrap_err();
    assert!(matches!(built, DiError::LineageUnmet { .. }), "{built}");
}

#[tokio::test]
async fn a_handler_that_reads_the_request_head_of_an_event_a_job_emits_is_refused() {
    let error = app().link::<Trail>().check().unwrap_err();
    let DiError::LineageUnmet { handler, wanted, .. } = &error else { panic!("{error}") };
    assert_eq!((handler.as_str(), *wanted), ("Trail::on_swept", "RequestHead"));
}
