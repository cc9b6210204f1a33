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

        use di_core::{App, singleton_proto};
        use di_sqlx::Database;
        use di_tx::{TxError, transactional};
        use futures_util::FutureExt;

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
            /// `mandatory`.
            Mandatory,
            /// `never`.
            Never,
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
        }

        #[di_core::handlers]
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
                    di_core::complete_scope().await.unwrap();
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
            di_test_support::eventually(async || (app.scopes_ending() == 0).then_some(())).await;
            assert_eq!(notes(&db).await, ["after", "kept", "outer"]);
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_failed_scope_rolls_back_and_a_failed_commit_fails_the_scope() {
            let Some((app, ledger, db)) = setup("failed_scope").await else { return };
            app.run_in_context(async {
                ledger.outer("a", Inner::Nothing, false).await.unwrap();
                di_core::fail_scope(); // di-http: a 4xx or 5xx answer
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
                        di_core::fail_scope();
                    }
                }
            };
            app.try_run_in_context(write("a", false)).await.unwrap();
            assert_eq!(notes(&db).await, ["a", "journal:a"]);
            // The scope fails: neither the note nor its journal line is kept.
            app.try_run_in_context(write("b", true)).await.unwrap();
            // The handler fails: the request's completion fails, and its note goes with it.
            let error = app.try_run_in_context(write("refused", false)).await.unwrap_err();
            assert!(matches!(error, di_core::DiError::EventHandler { .. }), "{error}");
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
            drop(held);
            app.run_in_context(ledger.required("a", false)).await.unwrap();
            app.run_in_context(async { db.conn().await.map(drop) }).await.unwrap();
            assert_eq!(notes(&db).await, ["a"]);
        }
    };
}
