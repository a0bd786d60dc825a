//! Process metrics in Prometheus form (served by the gateway at `GET /metrics`), kept in one
//! registry with the `prometheus` crate. The registry is a value: the daemon's wiring step
//! (`ethan::daemon::wiring`, docs/ARCHITECTURE.md) builds one and hands it to every part that
//! counts; a part built without the daemon (a test, a CLI command) counts into a registry of its
//! own.
//!
//! | metric | labels |
//! |---|---|
//! | `ethan_messages_in_total` | `channel` |
//! | `ethan_messages_out_total` | `channel` |
//! | `ethan_turns_total` | `channel`, `outcome` (answer, iteration_cap, stopped, failed) |
//! | `ethan_tool_calls_total` | `tool`, `outcome` (ok or the error kind) |
//! | `ethan_model_request_seconds` | histogram of Chat Completions requests (retries included) |
//! | `ethan_consent_requests_total` | `outcome` |
//! | `ethan_scheduler_runs_total` | `status` |
//! | `ethan_egress_total` | `path` (web_fetch, browser, mcp, …), `verdict` (allowed, refused, failed) |

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub messages_in: IntCounterVec,
    pub messages_out: IntCounterVec,
    pub turns: IntCounterVec,
    pub tool_calls: IntCounterVec,
    pub model_latency: HistogramVec,
    /// Duration of one update of a streamed reply (a draft, an edit, a card write).
    pub draft_update: Histogram,
    pub consent: IntCounterVec,
    pub scheduler_runs: IntCounterVec,
    /// Destinations judged by the egress guard (`ethan::egress`).
    pub egress: IntCounterVec,
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric definition");
    registry
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry of its own, every metric at zero.
    pub fn new() -> Self {
        let registry = Registry::new();
        let model_latency = HistogramVec::new(
            HistogramOpts::new(
                "ethan_model_request_seconds",
                "Duration of model (Chat Completions) requests in seconds, retries included",
            )
            .buckets(vec![
                0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
            ]),
            &["outcome"],
        )
        .expect("valid metric definition");
        registry
            .register(Box::new(model_latency.clone()))
            .expect("metric registered once");
        let draft_update = Histogram::with_opts(
            HistogramOpts::new(
                "ethan_draft_update_seconds",
                "Duration of one update of a streamed reply (Telegram draft or edit, Lark card write)",
            )
            .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
        )
        .expect("valid metric definition");
        registry
            .register(Box::new(draft_update.clone()))
            .expect("metric registered once");
        Self {
            draft_update,
            messages_in: counter(
                &registry,
                "ethan_messages_in_total",
                "Inbound messages accepted",
                &["channel"],
            ),
            messages_out: counter(
                &registry,
                "ethan_messages_out_total",
                "Messages delivered",
                &["channel"],
            ),
            turns: counter(
                &registry,
                "ethan_turns_total",
                "Agent turns",
                &["channel", "outcome"],
            ),
            tool_calls: counter(
                &registry,
                "ethan_tool_calls_total",
                "Tool calls proposed by the model",
                &["tool", "outcome"],
            ),
            consent: counter(
                &registry,
                "ethan_consent_requests_total",
                "Consent decisions",
                &["outcome"],
            ),
            scheduler_runs: counter(
                &registry,
                "ethan_scheduler_runs_total",
                "Scheduled job runs",
                &["status"],
            ),
            egress: counter(
                &registry,
                "ethan_egress_total",
                "Connections and requests judged by the egress guard",
                &["path", "verdict"],
            ),
            model_latency,
            registry,
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::error!("cannot encode metrics: {e}");
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_show_in_the_text() {
        let metrics = Metrics::new();
        metrics.tool_calls.with_label_values(&["shell", "ok"]).inc();
        metrics
            .model_latency
            .with_label_values(&["ok"])
            .observe(0.2);
        let text = metrics.render();
        assert!(
            text.contains("ethan_tool_calls_total{outcome=\"ok\",tool=\"shell\"}"),
            "{text}"
        );
        assert!(
            text.contains("ethan_model_request_seconds_bucket"),
            "{text}"
        );
    }
}
