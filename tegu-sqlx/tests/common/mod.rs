//! The tests both databases pass: `suite!(Sqlite, fresh_url)` in `sqlite.rs`, and
//! `suite!(Postgres, fresh_url)` in `postgres.rs` (each test binary registers its own protos).
//! `fresh_url(test)` is an async function giving the URL of an empty database per test, or
//! `None` (with the reason printed) where the database cannot be had (`urls.rs`).

pub(crate) mod urls;

/// The protos and tests of the suite, for database `$db`.
#[macro_export]
macro_rules! suite {
    ($db:ty, $fresh_url:path) => {
        use std::sync::Arc;

        use futures_util::FutureExt;
        use tegu_core::{App, singleton_proto};
        use tegu_sqlx::Database;
        use tegu_tx::{ErrorClass, TxError, transactional};

        /// A test's error: the transaction's, or the method's own failure.
        #[derive(Debug)]
        pub enum TestError {
            /// The transaction's.
            Tx(TxError),
            /// The method's own.
            Failed,
        }

        impl From<TxError> for TestError {
            fn from(e: TxError) -> Self {
                TestError::Tx(e)
            }
        }

        /// What a method calls inside its transaction, and whether that call fails.
        #[derive(Debug, Clone, Copy)]
        pub enum Inner {
            /// Nothing.
            Nothing,
            /// `required` writing a note.
            Required(&'static str, bool),
            /// `requires_new` writing a note on the same data source.
            RequiresNew(&'static str, bool),
            /// `requires_new` writing a note on the data source `audit`.
            Audit(&'static str, bool),
            /// `nested` writing a note.
            Nested(&'static str, bool),
            /// `nested` writing a note, then a key twice (`Ledger::key_twice`).
            NestedKeyTwice(&'static str, &'static str),
            /// `mandatory`.
            Mandatory,
            /// `never`.
            Never,
        }

        /// Writes key `key` into `db`'s keys (its primary key), in its current transaction if any.
        async fn insert_key(db: &Database<$db>, key: &str) -> Result<(), TxError> {
            let mut conn = db.conn().await?;
            let done = sqlx::query("INSERT INTO keys (k) VALUES ($1)").bind(key).execute(&mut *conn).await;
            done.map(drop).map_err(|e| db.error("inserting a key", e))
        }

        /// Writes `note` into `db`'s notes, in its current transaction if any.
        async fn insert(db: &Database<$db>, note: &str) -> Result<(), TestError> {
            let mut conn = db.conn().await?;
            let done = sqlx::query("INSERT INTO notes (note) VALUES ($1)").bind(note).execute(&mut *conn).await;
            done.map(drop).map_err(|e| db.error("inserting", e).into())
        }

        /// Writes notes, in every propagation, on the data source `database`; and in a
        /// transaction of its own on the data source `audit`.
        #[derive(Debug)]
        #[singleton_proto]
        pub struct Ledger {
            #[inject(name = "database")]
            db: Arc<Database<$db>>,
            #[inject(name = "audit")]
            audit_db: Arc<Database<$db>>,
        }

        impl Ledger {
            async fn insert(&self, note: &str) -> Result<(), TestError> {
                insert(&self.db, note).await
            }

            /// Writes `note` on the data source `audit`, in a transaction of its own.
            #[transactional(requires_new, source = "audit")]
            pub async fn audit(&self, note: &str, fail: bool) -> Result<(), TestError> {
                insert(&self.audit_db, note).await?;
                if fail { Err(TestError::Failed) } else { Ok(()) }
            }

            /// Writes `note`, calls `inner` (its error returned as text), fails if `fail`.
            #[transactional(source = "database")]
            pub async fn outer(
                &self,
                note: &'static str,
                inner: Inner,
                fail: bool,
            ) -> Result<Option<String>, TestError> {
                self.insert(note).await?;
                let inner = match inner {
                    Inner::Nothing => Ok(()),
                    Inner::Required(note, fail) => self.required(note, fail).await,
                    Inner::RequiresNew(note, fail) => self.requires_new(note, fail).await,
                    Inner::Audit(note, fail) => self.audit(note, fail).await,
                    Inner::Nested(note, fail) => self.nested(note, fail).await,
                    Inner::NestedKeyTwice(note, key) => self.key_twice_nested(note, key).await.map(drop),
                    Inner::Mandatory => self.mandatory().await,
                    Inner::Never => self.never().await,
                };
                if fail {
                    return Err(TestError::Failed);
                }
                Ok(inner.err().map(|e| format!("{e:?}")))
            }

            /// Writes `note` (`required`), fails if `fail`.
            #[transactional(source = "database")]
            pub async fn required(&self, note: &str, fail: bool) -> Result<(), TestError> {
                self.insert(note).await?;
                if fail { Err(TestError::Failed) } else { Ok(()) }
            }

            /// Writes `note` (`requires_new`), fails if `fail`.
            #[transactional(requires_new, source = "database")]
            pub async fn requires_new(&self, note: &str, fail: bool) -> Result<(), TestError> {
                self.insert(note).await?;
                if fail { Err(TestError::Failed) } else { Ok(()) }
            }

            /// Writes `note` (`nested`), fails if `fail`.
            #[transactional(nested, source = "database")]
            pub async fn nested(&self, note: &str, fail: bool) -> Result<(), TestError> {
                self.insert(note).await?;
                if fail { Err(TestError::Failed) } else { Ok(()) }
            }

            /// Nothing (`mandatory`).
            #[transactional(mandatory, source = "database")]
            pub async fn mandatory(&self) -> Result<(), TestError> {
                Ok(())
            }

            /// Nothing (`never`).
            #[transactional(never, source = "database")]
            pub async fn never(&self) -> Result<(), TestError> {
                Ok(())
            }

            /// Writes `note` (`requires_new`), then panics.
            #[transactional(requires_new, source = "database")]
            pub async fn new_then_panic(&self, note: &str) -> Result<(), TestError> {
                self.insert(note).await?;
                panic!("the method panics after writing");
            }

            /// Writes `note` (`required`), then panics.
            #[transactional(source = "database")]
            pub async fn required_then_panic(&self, note: &str) -> Result<(), TestError> {
                self.insert(note).await?;
                panic!("the method panics after writing");
            }

            /// Writes `note`, then `after` once a savepoint's method panicked: the transaction
            /// goes on without what the savepoint held.
            #[transactional(source = "database")]
            pub async fn outer_survives_nested_panic(&self, note: &'static str) -> Result<(), TestError> {
                self.insert(note).await?;
                let panicked = std::panic::AssertUnwindSafe(self.nested_then_panic("lost")).catch_unwind().await;
                assert!(panicked.is_err());
                self.insert("after").await
            }

            /// Writes `note` (`nested`), then panics.
            #[transactional(nested, source = "database")]
            pub async fn nested_then_panic(&self, note: &str) -> Result<(), TestError> {
                self.insert(note).await?;
                panic!("the savepoint's method panics");
            }

            /// Writes `note`, then key `key` twice: the second insert hits the primary key, and
            /// the method takes that in stride ("already there"), as code written for SQLite
            /// does. Returns the class of the second insert's error.
            #[transactional(source = "database")]
            pub async fn key_twice(&self, note: &str, key: &str) -> Result<ErrorClass, TestError> {
                self.write_key_twice(note, key).await
            }

            /// The same, in a transaction of its own.
            #[transactional(requires_new, source = "database")]
            pub async fn key_twice_new(&self, note: &str, key: &str) -> Result<ErrorClass, TestError> {
                self.write_key_twice(note, key).await
            }

            /// Begins the request's transaction with `note`, lets another method join it and
            /// write, then fails: the transaction is rolled back.
            #[transactional(source = "database")]
            pub async fn begin_then_fail(&self, note: &str, steps: &Steps) -> Result<(), TestError> {
                self.insert(note).await?;
                steps.began.wait().await;
                steps.joined.wait().await;
                Err(TestError::Failed)
            }

            /// Joins the request's transaction, writes `first`, then `second` once the method
            /// that began it has failed.
            #[transactional(source = "database")]
            pub async fn join_then_write(&self, first: &str, second: &str, steps: &Steps) -> Result<(), TestError> {
                self.insert(first).await?;
                steps.joined.wait().await;
                steps.failed.wait().await;
                self.insert(second).await
            }

            /// Joins the request's transaction, writes `note` and emits `Noted(note)`, and
            /// returns `Ok` once the method that began the transaction may fail.
            #[transactional(source = "database")]
            pub async fn join_and_emit(
                &self,
                note: &'static str,
                steps: &Steps,
                events: &tegu_core::events::EventBus,
            ) -> Result<(), TestError> {
                self.insert(note).await?;
                events.emit(Noted(note));
                steps.joined.wait().await;
                Ok(())
            }

            /// Writes `first`, then `second` a little later (a task of the request that is
            /// still at work when the request's handler returns).
            #[transactional(source = "database")]
            pub async fn two_writes(&self, first: &str, second: &str) -> Result<(), TestError> {
                self.insert(first).await?;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                self.insert(second).await
            }

            /// A savepoint: writes `note`, lets the other branch of the request try to write
            /// (at most half a second), then fails: rolled back to.
            #[transactional(nested, source = "database")]
            pub async fn nested_then_fail(&self, note: &str, steps: &Steps) -> Result<(), TestError> {
                self.insert(note).await?;
                steps.savepoint_set.notify_one();
                let _ = tokio::time::timeout(std::time::Duration::from_millis(500), steps.other_wrote.notified()).await;
                Err(TestError::Failed)
            }

            /// Writes `note` (`required`) once the other branch's savepoint is set.
            #[transactional(source = "database")]
            pub async fn required_after_savepoint(&self, note: &str, steps: &Steps) -> Result<(), TestError> {
                steps.savepoint_set.notified().await;
                self.insert(note).await?;
                steps.other_wrote.notify_one();
                Ok(())
            }

            /// Writes `note` (`required`), waits at `barrier`, then calls `requires_new`, and
            /// waits at `barrier` again before its own transaction ends: its outcome. The second
            /// wait keeps each caller's connection until every caller's `requires_new` has
            /// ended: one that timed out first would otherwise commit and free its connection
            /// for a later one still waiting.
            #[transactional(source = "database")]
            pub async fn required_then_new(
                &self,
                note: &str,
                barrier: &tokio::sync::Barrier,
            ) -> Result<Result<(), TestError>, TestError> {
                self.insert(note).await?;
                barrier.wait().await;
                let inner = self.requires_new("inner", false).await;
                barrier.wait().await;
                Ok(inner)
            }

            /// Writes `note`, then awaits `inner`, in a transaction of its own.
            #[transactional(requires_new, source = "database")]
            pub async fn new_around(
                &self,
                note: &str,
                inner: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>,
            ) -> Result<(), TestError> {
                self.insert(note).await?;
                inner.await;
                Ok(())
            }

            /// Writes `note` and emits `Noted(note)` and `NoteWritten(note)` in a transaction
            /// of its own, then fails if `fail`.
            #[transactional(requires_new, source = "database")]
            pub async fn emitting_new(
                &self,
                note: &'static str,
                fail: bool,
                events: &tegu_core::events::EventBus,
            ) -> Result<(), TestError> {
                self.emitting(note, fail, events).await
            }

            /// The same, `required`.
            #[transactional(source = "database")]
            pub async fn emitting_required(
                &self,
                note: &'static str,
                fail: bool,
                events: &tegu_core::events::EventBus,
            ) -> Result<(), TestError> {
                self.emitting(note, fail, events).await
            }

            /// The same, `nested`.
            #[transactional(nested, source = "database")]
            pub async fn emitting_nested(
                &self,
                note: &'static str,
                fail: bool,
                events: &tegu_core::events::EventBus,
            ) -> Result<(), TestError> {
                self.emitting(note, fail, events).await
            }

            async fn emitting(
                &self,
                note: &'static str,
                fail: bool,
                events: &tegu_core::events::EventBus,
            ) -> Result<(), TestError> {
                self.insert(note).await?;
                events.emit(Noted(note));
                events.emit(NoteWritten(note));
                if fail { Err(TestError::Failed) } else { Ok(()) }
            }

            /// The same, in a savepoint.
            #[transactional(nested, source = "database")]
            pub async fn key_twice_nested(&self, note: &str, key: &str) -> Result<ErrorClass, TestError> {
                self.write_key_twice(note, key).await
            }

            async fn write_key_twice(&self, note: &str, key: &str) -> Result<ErrorClass, TestError> {
                self.insert(note).await?;
                insert_key(&self.db, key).await?;
                let again = insert_key(&self.db, key).await;
                Ok(again.expect_err("the primary key holds").class())
            }

            /// A child whose parent does not exist: a deferred foreign key, checked at COMMIT.
            #[transactional(source = "database")]
            pub async fn orphan(&self) -> Result<(), TestError> {
                let mut conn = self.db.conn().await?;
                let done = sqlx::query("INSERT INTO children (parent) VALUES (42)").execute(&mut *conn).await;
                done.map(drop).map_err(|e| self.db.error("inserting a child", e).into())
            }
        }

        /// Emitted in a request after a note is written: its `before_commit` handler writes a
        /// journal line in the request's transaction (the note `"refused"` makes it fail).
        #[derive(Debug)]
        pub struct NoteWritten(pub &'static str);

        /// Journals notes inside the request's transaction, and counts rollbacks.
        #[derive(Debug)]
        #[singleton_proto]
        pub struct Journal {
            #[inject(name = "database")]
            db: Arc<Database<$db>>,
            rolled_back: std::sync::atomic::AtomicUsize,
            /// The phases `Noted` events reached: `committed:note`, `rolled back:note`.
            phases: tegu_test_support::Lines,
        }

        #[tegu_core::handlers]
        impl Journal {
            #[event_handler(before_commit)]
            async fn journal(&self, written: &NoteWritten) -> Result<(), TxError> {
                if written.0 == "refused" {
                    let error = "the journal refuses this note".into();
                    return Err(TxError::Database { doing: "journaling", data_source: "database".into(), error });
                }
                // No `#[transactional]`: in the request's transaction all the same.
                assert!(self.db.in_transaction(), "a before_commit handler runs in the transaction");
                let mut conn = self.db.conn().await?;
                let line = format!("journal:{}", written.0);
                let done = sqlx::query("INSERT INTO notes (note) VALUES ($1)").bind(line).execute(&mut *conn).await;
                done.map(drop).map_err(|e| self.db.error("journaling", e))
            }

            #[event_handler(after_rollback)]
            async fn rolled_back(&self, _: &NoteWritten) {
                self.rolled_back.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }

            /// Writes an audit line on a connection of its own when no transaction is open.
            #[event_handler(before_commit)]
            async fn audit(&self, _: &AuditLine) -> Result<(), TxError> {
                let mut conn = self.db.conn().await?;
                let done = sqlx::query("INSERT INTO notes (note) VALUES ('audit')").execute(&mut *conn).await;
                done.map(drop).map_err(|e| self.db.error("auditing", e))
            }

            #[event_handler]
            async fn noted(&self, noted: &Noted) {
                self.phases.push(format!("committed:{}", noted.0));
            }

            #[event_handler(after_rollback)]
            async fn not_noted(&self, noted: &Noted) {
                self.phases.push(format!("rolled back:{}", noted.0));
            }
        }

        /// Emitted in a request: its `before_commit` handler writes a line.
        #[derive(Debug)]
        pub struct AuditLine;

        /// Emitted by `Ledger::emitting`: which of its handlers ran tells which transaction
        /// the event followed.
        #[derive(Debug)]
        pub struct Noted(pub &'static str);

        /// The steps two methods of one request take in turn (`tokio::join!`).
        #[derive(Debug)]
        pub struct Steps {
            began: tokio::sync::Barrier,
            joined: tokio::sync::Barrier,
            failed: tokio::sync::Barrier,
            savepoint_set: tokio::sync::Notify,
            other_wrote: tokio::sync::Notify,
        }

        impl Steps {
            fn new() -> Self {
                let two = || tokio::sync::Barrier::new(2);
                let notify = tokio::sync::Notify::new;
                Steps { began: two(), joined: two(), failed: two(), savepoint_set: notify(), other_wrote: notify() }
            }
        }

        /// An App on a fresh database with its tables, or `None` (skipped) without one.
        async fn setup(test: &str) -> Option<(App, Arc<Ledger>, Arc<Database<$db>>)> {
            setup_with(test, &[]).await
        }

        /// The same, with more settings of the data source `database` (`[database]`).
        async fn setup_with(test: &str, settings: &[(&str, u64)]) -> Option<(App, Arc<Ledger>, Arc<Database<$db>>)> {
            let url = $fresh_url(test).await?;
            let audit_url = $fresh_url(&format!("audit_of_{test}")).await?;
            let mut builder = App::builder()
                .link::<Database<$db>>()
                .config_value("database.url", url)
                .register(Database::<$db>::named("audit", "audit_db"))
                .config_value("audit_db.url", audit_url);
            for (key, value) in settings {
                builder = builder.config_value(&format!("database.{key}"), *value);
            }
            let app = builder.build().await.expect("the App builds");
            let audit = app.get_object_named::<Database<$db>>("audit").unwrap();
            sqlx::query("CREATE TABLE notes (note TEXT NOT NULL)").execute(audit.pool()).await.unwrap();
            let db = app.get_object_named::<Database<$db>>("database").unwrap();
            for ddl in [
                "CREATE TABLE notes (note TEXT NOT NULL)",
                "CREATE TABLE keys (k TEXT PRIMARY KEY)",
                "CREATE TABLE parents (id INTEGER PRIMARY KEY)",
                "CREATE TABLE children (parent INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)",
            ] {
                sqlx::query(ddl).execute(db.pool()).await.expect(ddl);
            }
            let ledger = app.get_object::<Ledger>().unwrap();
            Some((app, ledger, db))
        }

        /// The notes committed, sorted.
        async fn notes(db: &Database<$db>) -> Vec<String> {
            let mut notes: Vec<String> =
                sqlx::query_scalar("SELECT note FROM notes").fetch_all(db.pool()).await.expect("notes read");
            notes.sort();
            notes
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn required_joins_and_the_scope_commits_in_its_completion_phase() {
            let Some((app, ledger, db)) = setup("required_joins").await else { return };
            let seen_inside = app
                .run_in_context(async {
                    ledger.outer("a", Inner::Required("b", false), false).await.unwrap();
                    // Not committed yet: the scope commits in its completion phase.
                    notes(&db).await
                })
                .await;
            assert_eq!(seen_inside, Vec::<String>::new());
            assert_eq!(notes(&db).await, ["a", "b"]);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn required_after_the_completion_phase_commits_when_the_method_returns() {
            let Some((app, ledger, db)) = setup("required_late").await else { return };
            let seen_inside = app
                .run_in_context(async {
                    tegu_core::scope::complete_scope().await.unwrap();
                    // Work after the response: no scope's transaction to join, one of its own.
                    ledger.outer("late", Inner::Required("b", false), false).await.unwrap();
                    notes(&db).await
                })
                .await;
            assert_eq!(seen_inside, ["b", "late"]);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn an_err_rolls_back_what_the_method_began_and_what_joined_it() {
            let Some((app, ledger, db)) = setup("err_rolls_back").await else { return };
            let failed = app.run_in_context(ledger.outer("a", Inner::Required("b", false), true)).await;
            assert!(matches!(failed, Err(TestError::Failed)));
            assert_eq!(notes(&db).await, Vec::<String>::new());
            // The next method of the same scope begins anew.
            app.run_in_context(async {
                assert!(ledger.outer("x", Inner::Nothing, true).await.is_err());
                ledger.outer("y", Inner::Nothing, false).await.unwrap();
            })
            .await;
            assert_eq!(notes(&db).await, ["y"]);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_joined_method_that_fails_rolls_back_nothing_it_did_not_begin() {
            let Some((app, ledger, db)) = setup("joined_fails").await else { return };
            let inner = app.run_in_context(ledger.outer("a", Inner::Required("b", true), false)).await.unwrap();
            assert_eq!(inner.as_deref(), Some("Failed"));
            assert_eq!(notes(&db).await, ["a", "b"]);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn requires_new_on_another_source_commits_while_the_outer_rolls_back_and_the_reverse() {
            let Some((app, ledger, db)) = setup("requires_new_audit").await else { return };
            let audit = app.get_object_named::<Database<$db>>("audit").unwrap();
            let failed = app.run_in_context(ledger.outer("a", Inner::Audit("b", false), true)).await;
            assert!(failed.is_err());
            assert_eq!((notes(&db).await, notes(&audit).await), (vec![], vec!["b".to_owned()]));
            app.run_in_context(ledger.outer("c", Inner::Audit("d", true), false)).await.unwrap();
            assert_eq!((notes(&db).await, notes(&audit).await), (vec!["c".to_owned()], vec!["b".to_owned()]));
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn nested_rolls_back_to_its_savepoint_only() {
            let Some((app, ledger, db)) = setup("nested").await else { return };
            app.run_in_context(ledger.outer("a", Inner::Nested("b", true), false)).await.unwrap();
            assert_eq!(notes(&db).await, ["a"]);
            app.run_in_context(ledger.outer("c", Inner::Nested("d", false), false)).await.unwrap();
            assert_eq!(notes(&db).await, ["a", "c", "d"]);
            // A nested method's work goes with the transaction it is nested in.
            assert!(app.run_in_context(ledger.outer("e", Inner::Nested("f", false), true)).await.is_err());
            assert_eq!(notes(&db).await, ["a", "c", "d"]);
            // Without a transaction to nest in, as `required`.
            app.run_in_context(ledger.nested("g", false)).await.unwrap();
            assert_eq!(notes(&db).await, ["a", "c", "d", "g"]);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn mandatory_outside_a_transaction_fails_naming_the_method() {
            let Some((app, ledger, _db)) = setup("mandatory").await else { return };
            let error = app.run_in_context(ledger.mandatory()).await.unwrap_err();
            let TestError::Tx(error) = error else { panic!("{error:?}") };
            let message = error.to_string();
            assert!(message.contains("Ledger::mandatory") && message.contains("mandatory"), "{message}");
            assert!(matches!(error, TxError::Mandatory { .. }));
            let inner = app.run_in_context(ledger.outer("a", Inner::Mandatory, false)).await.unwrap();
            assert_eq!(inner, None, "joined");
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn never_inside_a_transaction_fails_naming_the_method() {
            let Some((app, ledger, _db)) = setup("never").await else { return };
            app.run_in_context(ledger.never()).await.unwrap();
            let inner = app.run_in_context(ledger.outer("a", Inner::Never, false)).await.unwrap();
            let inner = inner.expect("never refused");
            assert!(inner.contains("Never") && inner.contains("Ledger::never"), "{inner}");
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_panic_rolls_back_what_the_method_began() {
            let Some((app, ledger, db)) = setup("panic").await else { return };
            // Its own transaction, caught where it was called.
            let panicked =
                app.run_in_context(std::panic::AssertUnwindSafe(ledger.new_then_panic("own")).catch_unwind()).await;
            let panic = panicked.unwrap_err();
            assert_eq!(panic.downcast_ref::<&str>(), Some(&"the method panics after writing"));
            // The scope's transaction, in a request that panics: the scope's destroy hook rolls
            // it back (its completion phase never runs).
            let request = tokio::spawn(app.run_in_context({
                let ledger = ledger.clone();
                async move { ledger.required_then_panic("scope's").await }
            }));
            assert!(request.await.unwrap_err().is_panic());
            // The same, the panic caught inside the request, which then succeeds.
            app.run_in_context(async {
                let panicked = std::panic::AssertUnwindSafe(ledger.required_then_panic("caught")).catch_unwind().await;
                assert!(panicked.is_err());
                ledger.required("kept", false).await.unwrap();
            })
            .await;
            // A savepoint whose method panicked is rolled back to; the transaction goes on.
            app.run_in_context(ledger.outer_survives_nested_panic("outer")).await.unwrap();
            tegu_test_support::eventually(async || (app.scopes_ending() == 0).then_some(())).await;
            assert_eq!(notes(&db).await, ["after", "kept", "outer"]);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_failed_scope_rolls_back_and_a_failed_commit_fails_the_scope() {
            let Some((app, ledger, db)) = setup("failed_scope").await else { return };
            app.run_in_context(async {
                ledger.outer("a", Inner::Nothing, false).await.unwrap();
                tegu_core::scope::fail_scope(); // tegu-http: a 4xx or 5xx answer
            })
            .await;
            assert_eq!(notes(&db).await, Vec::<String>::new());
            // A deferred foreign key fails the COMMIT: the scope's completion fails.
            let result = app
                .try_run_in_context(async {
                    ledger.required("b", false).await.unwrap();
                    ledger.orphan().await.unwrap();
                })
                .await;
            let error = result.unwrap_err().to_string();
            assert!(error.contains("committing"), "{error}");
            assert_eq!(notes(&db).await, Vec::<String>::new());
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_before_commit_handler_writes_in_the_request_transaction_and_fails_it_whole() {
            let Some((app, ledger, db)) = setup("before_commit").await else { return };
            let journal = app.get_object::<Journal>().unwrap();
            let write = |note: &'static str, fail: bool| {
                let ledger = ledger.clone();
                let events = app.events();
                async move {
                    ledger.outer(note, Inner::Nothing, false).await.unwrap();
                    events.emit(NoteWritten(note));
                    if fail {
                        tegu_core::scope::fail_scope();
                    }
                }
            };
            app.try_run_in_context(write("a", false)).await.unwrap();
            assert_eq!(notes(&db).await, ["a", "journal:a"]);
            // The scope fails: neither the note nor its journal line is kept.
            app.try_run_in_context(write("b", true)).await.unwrap();
            // The handler fails: the request's completion fails, and its note goes with it.
            let error = app.try_run_in_context(write("refused", false)).await.unwrap_err();
            assert!(matches!(error, tegu_core::DiError::EventHandler { .. }), "{error}");
            assert!(error.to_string().contains("Journal::journal"), "{error}");
            assert_eq!(notes(&db).await, ["a", "journal:a"]);
            app.shutdown().await.unwrap();
            assert_eq!(journal.rolled_back.load(std::sync::atomic::Ordering::SeqCst), 2);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_scopes_each_commit_or_roll_back_their_own() {
            let Some((app, ledger, db)) = setup("concurrent").await else { return };
            let notes_written: Vec<&'static str> =
                (0..40).map(|i| &*Box::leak(format!("n{i:02}").into_boxed_str())).collect();
            let requests: Vec<_> = notes_written
                .iter()
                .enumerate()
                .map(|(i, &note)| {
                    let (app, ledger) = (app.clone(), ledger.clone());
                    // Odd ones fail; of the others, every second one's savepoint fails.
                    tokio::spawn(async move {
                        let inner = Inner::Nested("inner", i % 4 == 0);
                        app.run_in_context(async { ledger.outer(note, inner, i % 2 == 1).await.is_ok() }).await
                    })
                })
                .collect();
            let mut ok = 0;
            for request in requests {
                ok += usize::from(request.await.unwrap());
            }
            assert_eq!(ok, 20);
            let mut expected: Vec<String> = notes_written.iter().step_by(2).map(|n| n.to_string()).collect();
            expected.extend((0..40).step_by(2).filter(|i| i % 4 != 0).map(|_| "inner".to_owned()));
            expected.sort();
            assert_eq!(notes(&db).await, expected);
        }

        /// Two methods of one request share its transaction (`tokio::join!`): the first
        /// begins it, the second joins it and writes, the first fails and rolls it back. The
        /// second's next statement fails: it would otherwise run outside any transaction and
        /// commit on its own, half of a method that then returns `Ok`.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_method_that_joined_a_transaction_rolled_back_never_autocommits() {
            let Some((app, ledger, db)) = setup("joined_rolled_back").await else { return };
            let steps = Steps::new();
            let (first, second) = app
                .run_in_context(async {
                    tokio::join!(
                        async {
                            let failed = ledger.begin_then_fail("a", &steps).await;
                            steps.failed.wait().await;
                            failed
                        },
                        async {
                            steps.began.wait().await;
                            ledger.join_then_write("b1", "b2", &steps).await
                        },
                    )
                })
                .await;
            assert!(matches!(first, Err(TestError::Failed)), "{first:?}");
            let Err(TestError::Tx(TxError::Ended { .. })) = &second else { panic!("{second:?}") };
            assert_eq!(notes(&db).await, Vec::<String>::new());
        }

        /// An event follows the transaction it was emitted in also when the method that emitted
        /// it joined: the transaction rolled back (the method that began it failed), the event
        /// goes to its `after_rollback` handlers though the request, which took the failure in
        /// stride, succeeds.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn an_event_of_a_method_that_joined_follows_the_transaction_not_the_request() {
            let Some((app, ledger, db)) = setup("joined_event").await else { return };
            let (steps, events) = (Steps::new(), app.events());
            app.run_in_context(async {
                let (first, second) = tokio::join!(ledger.begin_then_fail("a", &steps), async {
                    steps.began.wait().await;
                    ledger.join_and_emit("b", &steps, &events).await
                });
                assert!(first.is_err());
                second.unwrap();
            })
            .await;
            app.shutdown().await.unwrap();
            let journal = app.get_object::<Journal>().unwrap();
            assert_eq!(journal.phases.lines(), ["rolled back:b"]);
            assert_eq!(notes(&db).await, Vec::<String>::new());
        }

        /// A task of the request still running a method in the request's transaction when the
        /// handler returns: the commit waits for it, so its work is committed whole, not split
        /// between the commit and a statement refused after it.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_commit_waits_for_a_task_of_the_request_still_in_its_transaction() {
            let Some((app, ledger, db)) = setup("commit_waits").await else { return };
            app.try_run_in_context(async {
                ledger.required("first", false).await.unwrap();
                let task = Arc::clone(&ledger);
                drop(tegu_core::spawn(async move { task.two_writes("x", "y").await.unwrap() }));
                tokio::time::sleep(std::time::Duration::from_millis(20)).await; // the task joined
            })
            .await
            .unwrap();
            assert_eq!(notes(&db).await, ["first", "x", "y"]);
        }

        /// While a `nested` method's savepoint is set, another method of the request sharing
        /// the transaction waits to write: rolling back to the savepoint must not undo what
        /// that other method wrote and returned `Ok` for.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_savepoint_rolled_back_undoes_only_its_own_method() {
            let Some((app, ledger, db)) = setup("savepoint_alone").await else { return };
            let steps = Steps::new();
            let (first, second) = app
                .run_in_context(async {
                    ledger.required("outer", false).await.unwrap();
                    tokio::join!(ledger.nested_then_fail("a", &steps), ledger.required_after_savepoint("b", &steps))
                })
                .await;
            assert!(matches!(first, Err(TestError::Failed)), "{first:?}");
            second.unwrap();
            assert_eq!(notes(&db).await, ["b", "outer"]);
            // Two savepoints at once: each method's work is all or nothing.
            app.run_in_context(async {
                ledger.required("outer2", false).await.unwrap();
                let (a, b) = tokio::join!(ledger.nested("c", true), ledger.nested("d", false));
                assert!(a.is_err());
                b.unwrap();
            })
            .await;
            assert_eq!(notes(&db).await, ["b", "d", "outer", "outer2"]);
        }

        /// A task runs a method of one App inside a method of another with a transaction of
        /// its own (the other's request, opened inside): each App's statements run in its own
        /// transactions, never in the other's of the same data source name.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn two_apps_on_one_task_keep_their_transactions_apart() {
            let Some((app1, ledger1, db1)) = setup("two_apps_one").await else { return };
            let Some((app2, ledger2, db2)) = setup("two_apps_two").await else { return };
            let inner = Box::pin(async {
                app2.try_run_in_context(ledger2.required("b", false)).await.unwrap().unwrap();
            });
            app1.try_run_in_context(ledger1.new_around("a", inner)).await.unwrap().unwrap();
            assert_eq!((notes(&db1).await, notes(&db2).await), (vec!["a".to_owned()], vec!["b".to_owned()]));
        }

        /// An event follows the transaction it was emitted in: a `requires_new` method's,
        /// whatever the request's outcome; a savepoint's, which rolled back; a transaction of
        /// the method's own after the response. Its `before_commit` handler writes in that
        /// transaction.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn an_event_follows_the_transaction_it_was_emitted_in() {
            let Some((app, ledger, db)) = setup("events_follow").await else { return };
            let journal = app.get_object::<Journal>().unwrap();
            let events = app.events();
            // A transaction of its own that rolls back, in a request that succeeds.
            app.run_in_context(async { assert!(ledger.emitting_new("a", true, &events).await.is_err()) }).await;
            // One that commits, in a request that then fails.
            app.run_in_context(async {
                ledger.emitting_new("b", false, &events).await.unwrap();
                tegu_core::scope::fail_scope();
            })
            .await;
            // A savepoint rolled back to, in a request that succeeds.
            app.run_in_context(async {
                ledger.required("outer", false).await.unwrap();
                assert!(ledger.emitting_nested("c", true, &events).await.is_err());
                ledger.emitting_nested("d", false, &events).await.unwrap();
            })
            .await;
            // Work after the response, in a transaction of the method's own, that fails.
            app.run_in_context(async {
                tegu_core::scope::complete_scope().await.unwrap();
                assert!(ledger.emitting_required("e", true, &events).await.is_err());
            })
            .await;
            app.shutdown().await.unwrap();
            let mut phases = journal.phases.lines();
            phases.sort();
            assert_eq!(phases, ["committed:b", "committed:d", "rolled back:a", "rolled back:c", "rolled back:e"]);
            // The before_commit handler's line went with each transaction that committed.
            assert_eq!(notes(&db).await, ["b", "d", "journal:b", "journal:d", "outer"]);
        }

        /// A `before_commit` handler of an event emitted in a transaction of a method's own
        /// that fails fails the method, and its transaction is rolled back.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_before_commit_handler_that_fails_rolls_back_the_transaction_of_its_own() {
            let Some((app, ledger, db)) = setup("own_before_commit").await else { return };
            let events = app.events();
            let failed = app.run_in_context(ledger.emitting_new("refused", false, &events)).await;
            let Err(TestError::Tx(TxError::Events { source, .. })) = &failed else { panic!("{failed:?}") };
            assert!(source.to_string().contains("Journal::journal"), "{source}");
            assert_eq!(notes(&db).await, Vec::<String>::new());
        }

        /// A duplicate key is the same class of error on both databases, whatever their codes
        /// (SQLite's extended result code 1555, PostgreSQL's SQLSTATE 23505); so is a deferred
        /// foreign key that fails the commit.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn errors_are_classified_alike_on_both_databases() {
            let Some((app, ledger, db)) = setup("classes").await else { return };
            let class = app.run_in_context(async { ledger.key_twice("a", "k").await.unwrap() }).await;
            assert_eq!(class, ErrorClass::UniqueViolation);
            let committed = app.try_run_in_context(async { ledger.orphan().await.unwrap() }).await;
            let error = committed.unwrap_err();
            let tegu_core::DiError::Hook { source, .. } = &error else { panic!("{error:?}") };
            let tx = source.downcast_ref::<TxError>().expect("the commit's TxError");
            assert_eq!(tx.class(), ErrorClass::ForeignKeyViolation, "{tx}");
            let _ = db;
        }

        /// A pool with no connection free within its acquire timeout: beginning a transaction,
        /// and `conn()` outside one, fail as `TxError::Busy` (a failure to try again, which a
        /// service answers 503), naming the data source; once the connection is back, both work.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_pool_with_no_connection_free_in_time_is_busy() {
            let settings = [("max_connections", 1), ("acquire_timeout_ms", 100)];
            let Some((app, ledger, db)) = setup_with("pool_busy", &settings).await else { return };
            let held = db.pool().acquire().await.unwrap();
            let began = app.run_in_context(ledger.required("a", false)).await;
            let Err(TestError::Tx(TxError::Busy { doing, data_source, .. })) = &began else { panic!("{began:?}") };
            assert_eq!((*doing, data_source.as_str()), ("beginning a transaction", "database"));
            let outside = app.run_in_context(async { db.conn().await.map(drop) }).await;
            let Err(error @ TxError::Busy { doing: "acquiring a connection", .. }) = &outside else {
                panic!("{outside:?}")
            };
            assert!(error.to_string().contains("data source `database`: the database is busy"), "{error}");
            // Busy in the completion phase (a before_commit handler's statement): the scope's
            // error says so, and tegu-http answers it 503, not 500.
            let events = app.events();
            let completed = app.try_run_in_context(async { events.emit(AuditLine) }).await;
            let error = completed.unwrap_err();
            assert!(error.is_busy(), "{error}");
            drop(held);
            app.run_in_context(ledger.required("a", false)).await.unwrap();
            app.run_in_context(async { db.conn().await.map(drop) }).await.unwrap();
            assert_eq!(notes(&db).await, ["a"]);
        }
    };
}
