//! Metrics through the `metrics` facade (cargo feature `metrics`): what the App counts, under
//! the names of [`METRICS`]. Without the feature nothing is recorded, and the request path pays
//! nothing for it.
//!
//! The App registers its gauges and histogram once, at `build()`: install the recorder (an
//! exporter) before building the App.

/// Every metric the App records, with its kind and meaning: what the guide's table lists.
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "di_scopes_open",
        "gauge",
        "context scopes running now (requests, handlers, jobs), until their output is handed back",
    ),
    (
        "di_scope_duration_seconds",
        "histogram",
        "how long a context scope ran, from its start until its output was handed back",
    ),
    (
        "di_scopes_ending",
        "gauge",
        "context scopes ending now: waiting for background tasks, a streamed body, or running destroy hooks",
    ),
    (
        "di_hook_failures_total",
        "counter",
        "completion and destroy hooks of context objects that failed or panicked (label `stage`)",
    ),
    ("di_event_handlers_running", "gauge", "event handlers started and not finished: the bus's backlog"),
    ("di_event_handler_failures_total", "counter", "event handlers that failed or panicked (label `event`)"),
    ("di_job_runs_total", "counter", "runs of a scheduled job (label `job`)"),
    ("di_job_skips_total", "counter", "runs skipped because the previous run of the job was still going (label `job`)"),
    ("di_job_failures_total", "counter", "runs of a scheduled job that failed or panicked (label `job`)"),
    ("di_job_duration_seconds", "histogram", "how long a run of a scheduled job took (label `job`)"),
    ("di_hosted_restarts_total", "counter", "restarts of a hosted service after a failure (label `service`)"),
];

/// The App's registered metrics (empty without the feature).
pub(crate) struct Metrics {
    #[cfg(feature = "metrics")]
    open: metrics::Gauge,
    #[cfg(feature = "metrics")]
    duration: metrics::Histogram,
    #[cfg(feature = "metrics")]
    ending: metrics::Gauge,
    #[cfg(feature = "metrics")]
    handlers: metrics::Gauge,
}

impl Metrics {
    /// Registers the App's metrics with the recorder installed now.
    pub(crate) fn register() -> Self {
        #[cfg(feature = "metrics")]
        {
            Metrics {
                open: metrics::gauge!("di_scopes_open"),
                duration: metrics::histogram!("di_scope_duration_seconds"),
                ending: metrics::gauge!("di_scopes_ending"),
                handlers: metrics::gauge!("di_event_handlers_running"),
            }
        }
        #[cfg(not(feature = "metrics"))]
        Metrics {}
    }

    /// Counts a scope as open until the returned guard is dropped, and records its duration.
    #[inline]
    pub(crate) fn scope(&self) -> Open {
        #[cfg(feature = "metrics")]
        {
            self.open.increment(1.0);
            Open { open: self.open.clone(), duration: self.duration.clone(), began: std::time::Instant::now() }
        }
        #[cfg(not(feature = "metrics"))]
        Open {}
    }

    /// Counts a scope as ending until the guard is dropped.
    pub(crate) fn ending(&self) -> Count {
        #[cfg(feature = "metrics")]
        {
            self.ending.increment(1.0);
            Count { gauge: self.ending.clone() }
        }
        #[cfg(not(feature = "metrics"))]
        Count {}
    }

    /// Counts an event handler as running until the guard is dropped.
    pub(crate) fn handler(&self) -> Count {
        #[cfg(feature = "metrics")]
        {
            self.handlers.increment(1.0);
            Count { gauge: self.handlers.clone() }
        }
        #[cfg(not(feature = "metrics"))]
        Count {}
    }
}

/// An open scope (zero-sized without the feature).
pub(crate) struct Open {
    #[cfg(feature = "metrics")]
    open: metrics::Gauge,
    #[cfg(feature = "metrics")]
    duration: metrics::Histogram,
    #[cfg(feature = "metrics")]
    began: std::time::Instant,
}

#[cfg(feature = "metrics")]
impl Drop for Open {
    fn drop(&mut self) {
        self.open.decrement(1.0);
        self.duration.record(self.began.elapsed().as_secs_f64());
    }
}

/// One more in a gauge until dropped.
pub(crate) struct Count {
    #[cfg(feature = "metrics")]
    gauge: metrics::Gauge,
}

#[cfg(feature = "metrics")]
impl Drop for Count {
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}

/// A completion or destroy hook of a context object failed.
#[inline]
pub(crate) fn hook_failed(stage: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("di_hook_failures_total", "stage" => stage).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = stage;
}

/// An event handler failed.
pub(crate) fn handler_failed(event: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("di_event_handler_failures_total", "event" => event).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = event;
}

/// A run of a job ended: how long it took and whether it failed.
#[cfg_attr(not(feature = "schedule"), allow(dead_code))]
pub(crate) fn job_ran(job: &str, took: std::time::Duration, failed: bool) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("di_job_runs_total", "job" => job.to_owned()).increment(1);
        metrics::histogram!("di_job_duration_seconds", "job" => job.to_owned()).record(took.as_secs_f64());
        if failed {
            metrics::counter!("di_job_failures_total", "job" => job.to_owned()).increment(1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (job, took, failed);
}

/// A run of a job was skipped.
#[cfg_attr(not(feature = "schedule"), allow(dead_code))]
pub(crate) fn job_skipped(job: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("di_job_skips_total", "job" => job.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = job;
}

/// A hosted service is restarted.
pub(crate) fn hosted_restart(service: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("di_hosted_restarts_total", "service" => service.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = service;
}
