//! The App's metrics: every one is documented in the guide, and (with the `metrics` feature)
//! scopes, hooks and handlers record what they say they do.

#[test]
fn the_guide_documents_every_metric() {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/guide/operating.md")).unwrap();
    for (name, kind, meaning) in tegu_core::telemetry::METRICS {
        let row = format!("| `{name}` | {kind} | {meaning} |");
        assert!(guide.contains(&row), "docs/guide/operating.md lacks the row\n{row}");
    }
    let rows = guide.lines().filter(|l| l.starts_with("| `di_")).count();
    assert_eq!(
        rows,
        tegu_core::telemetry::METRICS.len(),
        "the guide lists a metric tegu_core::telemetry::METRICS does not"
    );
}

#[cfg(feature = "metrics")]
mod recorded {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit,
    };
    use tegu_core::{App, ProtoDef};

    /// What was recorded, by key (`name{label=value}`): counters and gauges by value,
    /// histograms by how many values.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<BTreeMap<String, f64>>>);

    struct Cell(String, Seen);

    impl CounterFn for Cell {
        fn increment(&self, value: u64) {
            *self.1.0.lock().unwrap().entry(self.0.clone()).or_default() += value as f64;
        }
        fn absolute(&self, value: u64) {
            self.1.0.lock().unwrap().insert(self.0.clone(), value as f64);
        }
    }

    impl GaugeFn for Cell {
        fn increment(&self, value: f64) {
            *self.1.0.lock().unwrap().entry(self.0.clone()).or_default() += value;
        }
        fn decrement(&self, value: f64) {
            *self.1.0.lock().unwrap().entry(self.0.clone()).or_default() -= value;
        }
        fn set(&self, value: f64) {
            self.1.0.lock().unwrap().insert(self.0.clone(), value);
        }
    }

    impl HistogramFn for Cell {
        fn record(&self, _: f64) {
            *self.1.0.lock().unwrap().entry(self.0.clone()).or_default() += 1.0;
        }
    }

    impl Seen {
        fn cell(&self, key: &Key) -> Arc<Cell> {
            let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
            let name = if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            };
            Arc::new(Cell(name, self.clone()))
        }

        fn get(&self, key: &str) -> f64 {
            self.0.lock().unwrap().get(key).copied().unwrap_or(0.0)
        }
    }

    impl metrics::Recorder for Seen {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.cell(key))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.cell(key))
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::from_arc(self.cell(key))
        }
    }

    struct Upload;

    /// Handles `Charged` (failing for a negative amount), and has a job that runs every 20 ms:
    /// its first run takes 50 ms (the runs due meanwhile are skipped), its second fails.
    #[tegu_core::singleton_proto]
    #[derive(Default)]
    pub(crate) struct Billing {
        runs: std::sync::atomic::AtomicUsize,
    }

    /// An event of this test.
    pub(crate) struct Charged(pub(crate) i64);

    #[tegu_core::handlers]
    impl Billing {
        #[event_handler]
        async fn on_charged(&self, charged: &Charged) -> Result<(), String> {
            if charged.0 < 0 { Err("a negative charge".into()) } else { Ok(()) }
        }

        #[schedule(every = "20ms")]
        async fn settle(&self) -> Result<(), String> {
            match self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    Ok(())
                }
                1 => Err("the bank is closed".into()),
                _ => Ok(()),
            }
        }
    }

    /// A hosted service that fails once, then runs until told to stop.
    #[tegu_core::singleton_proto(provides(dyn tegu_core::hosted::HostedService))]
    #[derive(Default)]
    pub(crate) struct Feed {
        starts: std::sync::atomic::AtomicUsize,
    }

    impl tegu_core::hosted::HostedService for Feed {
        fn run(self: Arc<Self>, stop: tegu_core::hosted::Stop) -> tegu_core::futures::UnitFuture {
            Box::pin(async move {
                if self.starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                    return Err("the feed dropped".into());
                }
                stop.stopped().await;
                Ok(())
            })
        }

        fn on_failure(&self) -> tegu_core::hosted::OnFailure {
            tegu_core::hosted::OnFailure::Restart {
                first: std::time::Duration::from_millis(10),
                max: std::time::Duration::from_millis(10),
            }
        }
    }

    /// Every metric of `tegu_core::telemetry::METRICS` is recorded, with what it says: the handlers running
    /// (back to zero) and those that failed, the job's runs, skips, failures and durations, the
    /// hosted service's restart (the scopes' and hooks' metrics: the test above).
    #[test]
    fn handlers_jobs_and_hosted_services_are_recorded() {
        let seen = Seen::default();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        metrics::with_local_recorder(&seen, || {
            runtime.block_on(async {
                let app = App::builder().build().await.unwrap();
                app.events().emit(Charged(5));
                app.events().emit(Charged(-5));
                let billing = app.get_object::<Billing>().unwrap();
                let feed = app.get_object::<Feed>().unwrap();
                tegu_test_support::eventually(async || {
                    let ran = billing.runs.load(std::sync::atomic::Ordering::SeqCst) >= 3;
                    let restarted = feed.starts.load(std::sync::atomic::Ordering::SeqCst) >= 2;
                    (ran && restarted).then_some(())
                })
                .await;
                app.shutdown().await.unwrap();
            })
        });
        let charged = "di_event_handler_failures_total{event=operate_metrics::recorded::Charged}";
        assert_eq!(seen.get(charged), 1.0);
        assert_eq!(seen.get("di_event_handlers_running"), 0.0, "every handler that ran ended");
        let job = "job=operate_metrics::recorded::Billing::settle";
        let runs = seen.get(&format!("di_job_runs_total{{{job}}}"));
        assert!(runs >= 3.0, "{runs} runs");
        assert_eq!(seen.get(&format!("di_job_duration_seconds{{{job}}}")), runs, "one duration per run");
        assert_eq!(seen.get(&format!("di_job_failures_total{{{job}}}")), 1.0);
        assert!(seen.get(&format!("di_job_skips_total{{{job}}}")) >= 1.0, "the slow run skipped none");
        let service =
            seen.0.lock().unwrap().iter().find(|(k, _)| k.starts_with("di_hosted_restarts_total")).map(|(_, v)| *v);
        assert_eq!(service, Some(1.0));
        // Every metric the App documents was recorded by one test or the other.
        for (name, _, _) in tegu_core::telemetry::METRICS {
            let recorded =
                ["di_scopes_open", "di_scopes_ending", "di_scope_duration_seconds", "di_hook_failures_total"]
                    .contains(name)
                    || seen.0.lock().unwrap().keys().any(|k| k.starts_with(name));
            assert!(recorded, "{name} was not recorded");
        }
    }

    #[test]
    fn scopes_and_failed_hooks_are_recorded_and_the_open_gauge_returns_to_zero() {
        let seen = Seen::default();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        metrics::with_local_recorder(&seen, || {
            runtime.block_on(async {
                let app = App::builder()
                    .without_inventory()
                    .register(
                        ProtoDef::context::<Upload>(|_| Ok(Upload))
                            .on_destroy(|_: Arc<Upload>| async { Err("the temporary file is gone".into()) }),
                    )
                    .build()
                    .await
                    .unwrap();
                let inside = app
                    .run_in_context(async {
                        app.get_object::<Upload>().unwrap();
                        seen.get("di_scopes_open")
                    })
                    .await;
                assert_eq!(inside, 1.0, "one scope open while it ran");
                app.run_in_context(async {}).await;
                app.shutdown().await.unwrap();
            })
        });
        assert_eq!(seen.get("di_scopes_open"), 0.0);
        assert_eq!(seen.get("di_scopes_ending"), 0.0);
        assert_eq!(seen.get("di_scope_duration_seconds"), 2.0, "one duration per scope");
        assert_eq!(seen.get("di_hook_failures_total{stage=destroy}"), 1.0);
    }
}
