//! Run with: cargo run -p example-config
//!
//! A newsletter configured from `config.toml` (beside this crate's Cargo.toml, found whatever
//! the working directory): its `[mail]` section is a `#[config_proto]`, deserialized by
//! `build()` and injected into the `Newsletter` singleton like any other proto. Sources, lowest
//! precedence first: the file, its profile variant (`config.prod.toml` under the `prod`
//! profile), `NEWS_*` environment variables, values set in code. The profile also picks the
//! outbox: `dev` (the default) prints the mail, `prod` hands it to the SMTP server of `[mail]`.
//! Try `NEWS_PROFILE=prod cargo run -p example-config`, or `NEWS_MAIL__PORT=2600`, or
//! `NEWS_MAIL__PORT=many` for the error naming the key and the variable.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use tegu_core::{App, AppBuilder, DiError, config_proto, singleton_proto};

/// The `[mail]` section (`NEWS_MAIL__HOST`, `NEWS_MAIL__PORT`, ...).
#[config_proto(prefix = "mail")]
#[derive(Debug, Deserialize)]
struct MailConfig {
    /// The SMTP server.
    host: String,
    /// Its port.
    port: u16,
    /// The sender.
    from: String,
    /// How many times a failed delivery is tried again.
    #[serde(default = "three")]
    retries: u32,
}

fn three() -> u32 {
    3
}

/// Where mail goes: one provider per profile.
trait Outbox: Send + Sync {
    /// Delivers `text` to `to`; says how.
    fn send(&self, to: &str, text: &str) -> String;
}

/// Profile `dev`: the mail is printed, not sent.
#[singleton_proto(profile = "dev", provides(dyn Outbox))]
struct ConsoleOutbox;

impl Outbox for ConsoleOutbox {
    fn send(&self, to: &str, text: &str) -> String {
        format!("console, to {to}: {text}")
    }
}

/// Profile `prod`: the mail goes to the SMTP server of `[mail]` (here, it only says so).
#[singleton_proto(profile = "prod", provides(dyn Outbox))]
struct SmtpOutbox {
    #[inject]
    config: Arc<MailConfig>,
}

impl Outbox for SmtpOutbox {
    fn send(&self, to: &str, text: &str) -> String {
        let MailConfig { host, port, retries, .. } = &*self.config;
        format!("smtp {host}:{port} ({retries} retries), to {to}: {text}")
    }
}

/// A singleton injecting the configuration section, and the outbox of the active profile.
#[singleton_proto]
struct Newsletter {
    #[inject]
    config: Arc<MailConfig>,
    #[inject]
    outbox: Arc<dyn Outbox>,
}

impl Newsletter {
    fn send(&self, to: &str) -> String {
        self.outbox.send(to, &format!("this week's news, from {}", self.config.from))
    }
}

/// The example's configuration file.
fn config_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config.toml")
}

/// The App's builder: `file` (which must exist) and its variant for `profile`, then the
/// `NEWS_*` environment variables. Tests pass other files, and add `config_value`s on top.
fn builder(file: PathBuf, profile: &str) -> AppBuilder {
    App::builder().config_file_required(file).config_env("NEWS_").profile(profile)
}

#[tokio::main]
async fn main() -> Result<(), DiError> {
    let profile = std::env::var("NEWS_PROFILE").unwrap_or_else(|_| "dev".to_owned());
    let app = builder(config_file(), &profile).build().await?;
    let mail = app.get_object::<MailConfig>()?;
    println!("profile {profile}: mail from {} via {}:{}, {} retries", mail.from, mail.host, mail.port, mail.retries);
    for key in ["mail.host", "mail.port", "mail.from", "mail.retries"] {
        let origin = app.config().origin(key).unwrap_or_else(|| "its serde default".to_owned());
        println!("  {key}: {origin}");
    }
    println!("{}", app.get_object::<Newsletter>()?.send("ada@example.invalid"));
    app.shutdown().await
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use tegu_test_support::child_env::in_clean_child;

    use super::*;

    /// `name` with `text`, in a fresh folder of this test process.
    fn write(test: &str, name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("example-config-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn origin(app: &App, key: &str) -> Option<String> {
        app.config().origin(key)
    }

    fn file_origin(file: &Path) -> Option<String> {
        Some(format!("file {}", file.display()))
    }

    /// The graph `main` builds, in each profile, checked with nothing built
    /// (`AppBuilder::check`): its configuration sections are read, so a broken file fails it.
    #[test]
    fn the_graph_checks_in_each_profile() {
        for profile in ["dev", "prod"] {
            builder(config_file(), profile).check().unwrap_or_else(|e| panic!("profile {profile}: {e}"));
        }
    }

    #[tokio::test]
    async fn values_come_from_the_file_and_the_dev_outbox_prints() {
        // In a child process without the shell's NEWS_* variables, as every test here that
        // builds with `builder`: they would override the file.
        if !in_clean_child("tests::values_come_from_the_file_and_the_dev_outbox_prints", "NEWS_", &[]) {
            return;
        }
        let app = builder(config_file(), "dev").build().await.unwrap();
        let mail = app.get_object::<MailConfig>().unwrap();
        assert_eq!((mail.host.as_str(), mail.port, mail.from.as_str()), ("localhost", 2525, "news@example.invalid"));
        assert_eq!(mail.retries, 3, "absent from the file: the serde default");
        assert_eq!(origin(&app, "mail.port"), file_origin(&config_file()));
        assert_eq!(origin(&app, "mail.retries"), None);
        assert_eq!(app.config().get::<u16>("mail.port").unwrap(), 2525, "any key, at run time");
        assert_eq!(
            app.get_object::<Newsletter>().unwrap().send("ada"),
            "console, to ada: this week's news, from news@example.invalid"
        );
    }

    #[tokio::test]
    async fn the_prod_profile_reads_its_variant_and_registers_its_outbox() {
        if !in_clean_child("tests::the_prod_profile_reads_its_variant_and_registers_its_outbox", "NEWS_", &[]) {
            return;
        }
        let app = builder(config_file(), "prod").build().await.unwrap();
        let mail = app.get_object::<MailConfig>().unwrap();
        assert_eq!((mail.host.as_str(), mail.port, mail.retries), ("smtp.example.invalid", 587, 5));
        assert_eq!(mail.from, "news@example.invalid", "what the variant leaves out comes from config.toml");
        assert_eq!(origin(&app, "mail.host"), file_origin(&config_file().with_file_name("config.prod.toml")));
        assert_eq!(origin(&app, "mail.from"), file_origin(&config_file()));
        assert_eq!(
            app.get_object::<Newsletter>().unwrap().send("ada"),
            "smtp smtp.example.invalid:587 (5 retries), to ada: this week's news, from news@example.invalid"
        );
        assert!(app.get_object::<ConsoleOutbox>().is_err(), "the dev outbox is not registered under prod");

        // Without a profile, neither outbox is registered, and `build()` says which profiles have one.
        let e = App::builder().config_file_required(config_file()).build().await.unwrap_err().to_string();
        assert!(e.contains("registered for profile \"dev\" only"), "{e}");
        assert!(e.contains("registered for profile \"prod\" only"), "{e}");
    }

    #[tokio::test]
    async fn an_environment_variable_overrides_the_file_and_a_value_overrides_both() {
        let name = "tests::an_environment_variable_overrides_the_file_and_a_value_overrides_both";
        if !in_clean_child(name, "NEWS_", &[("NEWS_MAIL__PORT", "2600"), ("NEWS_MAIL__RETRIES", "7")]) {
            return;
        }
        let app = builder(config_file(), "dev").build().await.unwrap();
        let mail = app.get_object::<MailConfig>().unwrap();
        assert_eq!((mail.port, mail.retries), (2600, 7), "strings from the environment, read as the fields ask");
        assert_eq!(mail.host, "localhost", "not set in the environment: from the file");
        assert_eq!(origin(&app, "mail.port").as_deref(), Some("env NEWS_MAIL__PORT"));
        assert_eq!(origin(&app, "mail.host"), file_origin(&config_file()));

        let app = builder(config_file(), "dev").config_value("mail.port", 2700).build().await.unwrap();
        assert_eq!(app.get_object::<MailConfig>().unwrap().port, 2700);
        let from = origin(&app, "mail.port").unwrap();
        assert!(from.starts_with("config_value(\"mail.port\") at "), "{from}");
    }

    #[tokio::test]
    async fn a_missing_required_file_fails_the_build_naming_it() {
        let absent = std::env::temp_dir().join(format!("example-config-{}-absent.toml", std::process::id()));
        let e = builder(absent.clone(), "dev").build().await.unwrap_err();
        assert_eq!(e.to_string(), format!("file {}: not found", absent.display()));
    }

    #[tokio::test]
    async fn a_bad_value_names_the_key_the_section_and_the_variable() {
        if !in_clean_child(
            "tests::a_bad_value_names_the_key_the_section_and_the_variable",
            "NEWS_",
            &[("NEWS_MAIL__PORT", "many")],
        ) {
            return;
        }
        let e = builder(config_file(), "dev").build().await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "config key mail.port of `example_config::MailConfig`: invalid type: expected u16, found a string of 4 characters (from env NEWS_MAIL__PORT)"
        );
    }

    #[tokio::test]
    async fn a_missing_key_says_where_it_could_be_set() {
        if !in_clean_child("tests::a_missing_key_says_where_it_could_be_set", "NEWS_", &[]) {
            return;
        }
        let file = write("missing-key", "config.toml", "[mail]\nhost = \"localhost\"\nport = 2525\n");
        let e = builder(file.clone(), "dev").build().await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "config key mail.from is missing (`example_config::MailConfig` needs it; set it in {} or NEWS_MAIL__FROM)",
                file.display()
            )
        );
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }
}
