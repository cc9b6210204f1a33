//! The service of the tests of a transaction's options (`tx_options_*.rs`): accounts whose
//! methods begin transactions with an isolation level and a retry, read-only, with a timeout,
//! or with a rollback rule, and count the events of each try. One macro, for each database.

/// A service of accounts and the events its methods emit, for one database.
macro_rules! accounts {
    ($db:ty) => {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::{Duration, Instant};

        use tegu_core::{App, singleton_proto};
        use tegu_sqlx::Database;
        use tegu_tx::{ErrorClass, TxError, transactional};

        /// The service's error: the transaction's, or a refusal of its own.
        #[derive(Debug)]
        pub(crate) enum AccountError {
            Tx(TxError),
            /// A business refusal: the attempt is recorded all the same (`commit_on`).
            Declined,
            /// Any other refusal: rolled back.
            Refused,
        }

        impl From<TxError> for AccountError {
            fn from(e: TxError) -> Self {
                AccountError::Tx(e)
            }
        }

        /// The rollback rule: a declined payment commits what the method wrote.
        fn is_declined(error: &AccountError) -> bool {
            matches!(error, AccountError::Declined)
        }

        /// Emitted by a deposit that writes: which handlers ran tells what each try became.
        #[derive(Debug)]
        pub(crate) struct Deposited(i64);

        #[derive(Debug)]
        #[singleton_proto]
        pub(crate) struct Accounts {
            #[inject]
            db: Arc<Database<$db>>,
            #[inject]
            events: Arc<tegu_core::events::EventBus>,
            #[inject]
            transactions: Arc<tegu_tx::Transactions>,
            /// Every run of `deposit`, first tries and retries.
            tries: AtomicUsize,
            committed: AtomicUsize,
            rolled_back: AtomicUsize,
        }

        #[tegu_core::handlers]
        impl Accounts {
            #[event_handler]
            async fn deposited(&self, _: &Deposited) {
                self.committed.fetch_add(1, Ordering::SeqCst);
            }

            #[event_handler(after_rollback)]
            async fn not_deposited(&self, _: &Deposited) {
                self.rolled_back.fetch_add(1, Ordering::SeqCst);
            }
        }

        impl Accounts {
            /// Reads the balance, waits for `meet` on the first try of each caller (so that two
            /// callers both read before either writes), then writes the balance plus one.
            #[transactional(requires_new, isolation = "serializable", retry = 5, backoff_ms = 5)]
            pub(crate) async fn deposit(&self, id: i64, meet: &tokio::sync::Barrier) -> Result<i64, AccountError> {
                let first = self.tries.fetch_add(1, Ordering::SeqCst) < 2;
                let balance = self.balance_in_tx(id).await?;
                if first {
                    meet.wait().await;
                }
                // Emitted before the write that conflicts: a failed try's event is released as
                // rolled back, never as committed.
                self.events.emit(Deposited(id));
                let mut conn = self.db.conn().await?;
                let done = sqlx::query("UPDATE accounts SET balance = $1 WHERE id = $2")
                    .bind(balance + 1)
                    .bind(id)
                    .execute(&mut *conn)
                    .await;
                done.map_err(|e| self.db.error("depositing", e))?;
                drop(conn);
                Ok(balance + 1)
            }

            /// The same, with a conflict on every try: always fails, after its retries.
            #[transactional(requires_new, isolation = "serializable", retry = 2, backoff_ms = 1)]
            pub(crate) async fn always_conflicting(&self) -> Result<(), AccountError> {
                self.tries.fetch_add(1, Ordering::SeqCst);
                let tx = self.db_tx();
                tx.note_failure(ErrorClass::SerializationFailure);
                self.events.emit(Deposited(0));
                Err(AccountError::Refused)
            }

            /// A `requires_new` method with no retry: a conflict is its caller's to handle.
            #[transactional(requires_new, isolation = "serializable")]
            pub(crate) async fn conflicting_once(&self) -> Result<(), AccountError> {
                self.tries.fetch_add(1, Ordering::SeqCst);
                self.db_tx().note_failure(ErrorClass::SerializationFailure);
                Err(AccountError::Refused)
            }

            fn db_tx(&self) -> Arc<tegu_tx::Tx> {
                self.transactions.current(self.db.name()).expect("in the method's transaction")
            }

            async fn balance_in_tx(&self, id: i64) -> Result<i64, TxError> {
                let mut conn = self.db.conn().await?;
                let read = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = $1")
                    .bind(id)
                    .fetch_one(&mut *conn)
                    .await;
                read.map_err(|e| self.db.error("reading a balance", e))
            }

            /// Writes a row in a read-only transaction.
            #[transactional(read_only)]
            pub(crate) async fn write_read_only(&self) -> Result<(), AccountError> {
                let mut conn = self.db.conn().await?;
                let done = sqlx::query("INSERT INTO accounts (id, balance) VALUES (99, 0)").execute(&mut *conn).await;
                done.map_err(|e| self.db.error("writing read-only", e))?;
                Ok(())
            }

            /// Reads in a read-only transaction.
            #[transactional(requires_new, read_only)]
            pub(crate) async fn read_only_balance(&self, id: i64) -> Result<i64, AccountError> {
                Ok(self.balance_in_tx(id).await?)
            }

            /// Writes a row, then takes longer than its timeout (`sleep` on the client).
            #[transactional(requires_new, timeout_ms = 200)]
            pub(crate) async fn slow(&self) -> Result<(), AccountError> {
                self.insert(7).await?;
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok(())
            }

            /// Writes a row, then a statement that outlives the timeout while holding the
            /// transaction's connection.
            #[transactional(requires_new, timeout_ms = 200)]
            pub(crate) async fn slow_statement(&self) -> Result<(), AccountError> {
                self.insert(8).await?;
                let mut conn = self.db.conn().await?;
                let done = sqlx::query("SELECT pg_sleep(10)").execute(&mut *conn).await;
                done.map_err(|e| self.db.error("sleeping", e))?;
                Ok(())
            }

            /// Writes account `id`, then fails with `error`: committed when it is `Declined`.
            #[transactional(requires_new, commit_on = is_declined)]
            pub(crate) async fn pay(&self, id: i64, declined: bool) -> Result<(), AccountError> {
                self.insert(id).await?;
                Err(if declined { AccountError::Declined } else { AccountError::Refused })
            }

            async fn insert(&self, id: i64) -> Result<(), TxError> {
                let mut conn = self.db.conn().await?;
                let done =
                    sqlx::query("INSERT INTO accounts (id, balance) VALUES ($1, 0)").bind(id).execute(&mut *conn).await;
                done.map(drop).map_err(|e| self.db.error("inserting an account", e))
            }
        }

        async fn setup(test: &str, max_connections: u64) -> Option<(App, Arc<Accounts>, Arc<Database<$db>>)> {
            let url = url(test).await?;
            let app = App::builder()
                .link::<Database<$db>>()
                .config_value("database.url", url)
                .config_value("database.max_connections", max_connections)
                .build()
                .await
                .expect("the App builds");
            let db = app.get_object::<Database<$db>>().unwrap();
            sqlx::query("CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)")
                .execute(db.pool())
                .await
                .unwrap();
            sqlx::query("INSERT INTO accounts VALUES (1, 0)").execute(db.pool()).await.unwrap();
            let accounts = app.get_object::<Accounts>().unwrap();
            Some((app, accounts, db))
        }

        async fn ids(db: &Database<$db>) -> Vec<i64> {
            sqlx::query_scalar("SELECT id FROM accounts ORDER BY id").fetch_all(db.pool()).await.unwrap()
        }

        /// A method that conflicts on every try runs `1 + retry` times, each in a new
        /// transaction rolled back with its events, then fails; without `retry`, once.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_method_that_always_conflicts_runs_its_retries_then_fails() {
            let Some((app, accounts, _db)) = setup("always_conflicting", 4).await else { return };
            let out = app.run_in_context(accounts.always_conflicting()).await;
            assert!(matches!(out, Err(AccountError::Refused)), "{out:?}");
            assert_eq!(accounts.tries.load(Ordering::SeqCst), 3);
            let out = app.run_in_context(accounts.conflicting_once()).await;
            assert!(matches!(out, Err(AccountError::Refused)), "{out:?}");
            assert_eq!(accounts.tries.load(Ordering::SeqCst), 4);
            // The handlers of the released events have run once the App is shut down.
            app.shutdown().await.unwrap();
            assert_eq!(accounts.rolled_back.load(Ordering::SeqCst), 3);
            assert_eq!(accounts.committed.load(Ordering::SeqCst), 0);
        }

        /// A method past its timeout is cancelled and its transaction rolled back; the
        /// connection goes back sound (a pool of one serves the next call).
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_method_past_its_timeout_is_cancelled_and_rolls_back() {
            let Some((app, accounts, db)) = setup("timeout", 1).await else { return };
            let started = Instant::now();
            let out = app.run_in_context(accounts.slow()).await;
            let Err(AccountError::Tx(error @ TxError::TimedOut { .. })) = &out else { panic!("{out:?}") };
            assert_eq!(error.class(), ErrorClass::TimedOut);
            assert!(error.to_string().contains("Accounts::slow"), "{error}");
            assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
            assert_eq!(ids(&db).await, [1]);
            assert_eq!(app.run_in_context(accounts.read_only_balance(1)).await.unwrap(), 0);
        }

        /// A rollback rule: an `Err` it names commits what the method wrote, and is still the
        /// method's error; any other `Err` rolls back.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_rollback_rule_commits_on_the_error_it_names() {
            let Some((app, accounts, db)) = setup("commit_on", 4).await else { return };
            let out = app.run_in_context(accounts.pay(2, true)).await;
            assert!(matches!(out, Err(AccountError::Declined)), "{out:?}");
            let out = app.run_in_context(accounts.pay(3, false)).await;
            assert!(matches!(out, Err(AccountError::Refused)), "{out:?}");
            assert_eq!(ids(&db).await, [1, 2]);
        }

        /// A read-only method's write is refused by the database, and nothing is stored; the
        /// connection goes back writable (a pool of one serves a write next).
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_read_only_method_s_write_is_refused() {
            let Some((app, accounts, db)) = setup("read_only", 1).await else { return };
            let out = app.run_in_context(accounts.write_read_only()).await;
            let Err(AccountError::Tx(error)) = &out else { panic!("{out:?}") };
            assert!(error.to_string().to_lowercase().contains("read"), "{error}");
            assert_eq!(ids(&db).await, [1]);
            assert!(matches!(app.run_in_context(accounts.pay(4, true)).await, Err(AccountError::Declined)));
            assert_eq!(ids(&db).await, [1, 4]);
        }
    };
}
