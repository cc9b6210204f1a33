//! The broken graph both diagnostic tests render: a proto injects a trait that no proto
//! provides. Its lines are what the renderings quote.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme};
use tegu_core::{App, DiError, singleton_proto};

pub trait Notifier: Send + Sync {}

#[singleton_proto]
pub struct Signup {
    #[inject]
    notifier: Arc<dyn Notifier>,
}

/// The error of an App of `Signup` alone.
pub async fn error() -> DiError {
    App::builder().without_inventory().link::<Signup>().build().await.expect_err("nothing provides `dyn Notifier`")
}

/// `error` as `miette`'s graphical handler renders it, without colours, `width` columns wide,
/// each line's trailing spaces trimmed.
pub fn render(error: &DiError, width: usize) -> String {
    let mut out = String::new();
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(width);
    handler.render_report(&mut out, error).expect("renders");
    out.lines().map(str::trim_end).collect::<Vec<_>>().join("\n")
}
