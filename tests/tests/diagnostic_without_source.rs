//! A broken graph as `miette` renders it where the source is not on disk (a deployed binary):
//! the help names each site's file and line. In a test binary of its own, since it changes the
//! working folder, which the process shares.

#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme};
use tegu_core::{App, singleton_proto};

pub trait Notifier: Send + Sync {}

#[singleton_proto]
pub struct Signup {
    #[inject]
    notifier: Arc<dyn Notifier>,
}

impl Signup {
    /// Uses the field, so that it is not dead code.
    pub fn notifier(&self) -> &dyn Notifier {
        &*self.notifier
    }
}

#[tokio::test]
async fn without_the_source_the_help_names_file_and_line() {
    let error = App::builder().without_inventory().link::<Signup>().build().await.expect_err("nothing provides it");
    let empty = std::env::temp_dir().join(format!("tegu-diagnostic-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("creates a folder");
    std::env::set_current_dir(&empty).expect("enters it");
    let mut rendered = String::new();
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(200);
    handler.render_report(&mut rendered, &error).expect("renders");
    assert!(!rendered.contains("╭─["), "no source shown: {rendered}");
    assert!(rendered.contains("help: at tests/tests/diagnostic_without_source.rs:17:19: `notifier` of"), "{rendered}");
    assert!(
        rendered.contains("at tests/tests/diagnostic_without_source.rs:15:12: diagnostic_without_source::Signup"),
        "{rendered}"
    );
}
