//! The App's metrics: every one is documented in the guide, and (with the `metrics` feature)
//! scopes, hooks and handlers record what they say they do.

#[test]
fn the_guide_documents_every_metric() {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/guide/operating.md")).unwrap();
    for (name, kind, meaning) in di_core::METRICS {
        let row = format!("| `{name}` | {kind} | {meaning} |");
        assert!(guide.contains(&row), "docs/guide/operating.md lacks the row\n{row}");
    }
    let rows = guide.lines().filter(|l| l.starts_with("| `di_")).count();
    assert_eq!(rows, di_core::METRICS.len(), "the guide lists a metric di_core::METRICS does not");
}

#[cfg(feature = "metrics")]
mod recorded {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use di_core::{App, ProtoDef};
    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit,
    };

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
