//! Rollback rules (`#[transactional(commit_on = ..)]`): the macro writes the rule into the
//! method's body, where the error's type is known, and the body tells the advice through a
//! task-local cell, which the advice scopes only for a method with a rule.

use std::cell::Cell;
use std::future::Future;

use crate::options::TxOptions;

tokio::task_local! {
    /// Set by the epilogue of a method with a rollback rule when the rule matches its error.
    static COMMIT_ANYWAY: Cell<bool>;
}

/// Called by the epilogue of a method with a rollback rule (`commit_on`) whose rule matched
/// the method's error: what the method began commits.
pub(crate) fn commit_despite_error() {
    let _ = COMMIT_ANYWAY.try_with(|kept| kept.set(true));
}

/// `fut`'s output, and whether a rollback rule of the method asked to commit despite an
/// error (only a method with rules asks).
pub(crate) async fn ruled<R, F: Future<Output = R>>(options: &TxOptions, fut: F) -> (R, bool) {
    if !options.has_rules() {
        return (fut.await, false);
    }
    COMMIT_ANYWAY
        .scope(Cell::new(false), async {
            let out = fut.await;
            (out, COMMIT_ANYWAY.with(Cell::get))
        })
        .await
}
