//! Run with: cargo run -p example-traits
//!
//! Three notifiers provide one trait, `dyn Notifier`. A service takes the one named `email`
//! (a qualifier), a broadcaster takes all of them (`Vec`, ordered by object name), and a
//! router picks one by a name known only at run time (`App::get_provider_named`). Taking
//! `Arc<dyn Notifier>` without a name would fail `build()`, naming the three candidates.

use std::sync::Arc;

use tegu_core::{App, DiError, singleton_proto};

/// Sends a message somewhere.
pub trait Notifier: Send + Sync {
    /// Where the message went.
    fn notify(&self, message: &str) -> String;
}

#[singleton_proto(name = "email", provides(dyn Notifier))]
struct Email;
impl Notifier for Email {
    fn notify(&self, message: &str) -> String {
        format!("email: {message}")
    }
}

#[singleton_proto(name = "sms", provides(dyn Notifier))]
struct Sms;
impl Notifier for Sms {
    fn notify(&self, message: &str) -> String {
        format!("sms: {message}")
    }
}

#[singleton_proto(name = "pager", provides(dyn Notifier))]
struct Pager;
impl Notifier for Pager {
    fn notify(&self, message: &str) -> String {
        format!("pager: {message}")
    }
}

/// Takes one provider, by name.
#[singleton_proto]
struct Signup {
    #[inject(name = "email")]
    notifier: Arc<dyn Notifier>,
}

/// Takes every provider, ordered by object name.
#[singleton_proto]
struct Broadcast {
    #[inject]
    all: Vec<Arc<dyn Notifier>>,
}

/// What the example prints: one line per notification.
fn run(app: &App) -> Result<Vec<String>, DiError> {
    let mut lines = vec![app.get_object::<Signup>()?.notifier.notify("welcome")];
    lines.extend(app.get_object::<Broadcast>()?.all.iter().map(|n| n.notify("maintenance tonight")));
    // A name from a request or a setting, known only at run time.
    lines.push(app.get_provider_named::<dyn Notifier>("sms")?.notify("your code is 1234"));
    Ok(lines)
}

#[tokio::main]
async fn main() -> Result<(), DiError> {
    let app = App::builder().build().await?;
    for line in run(&app)? {
        println!("{line}");
    }
    if let Err(error) = app.get_provider_named::<dyn Notifier>("fax") {
        println!("{error}");
    }
    app.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The graph `main` builds, checked with nothing built (`AppBuilder::check`).
    #[test]
    fn the_graph_checks() {
        tegu_core::App::builder().check().unwrap();
    }

    #[tokio::test]
    async fn providers_by_name_all_of_them_and_at_run_time() {
        let app = App::builder().build().await.unwrap();
        assert_eq!(
            run(&app).unwrap(),
            [
                "email: welcome",
                "email: maintenance tonight",
                "pager: maintenance tonight",
                "sms: maintenance tonight",
                "sms: your code is 1234",
            ]
        );
        let Err(unknown) = app.get_provider_named::<dyn Notifier>("fax") else { panic!("no notifier is named fax") };
        assert!(unknown.to_string().contains("fax"), "{unknown}");
    }
}
