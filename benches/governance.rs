//! Governance overhead per tool call: the executor's steps around a tool that does nothing
//! (alias resolution, policy check, argument parsing, schema validation, replay guard for a
//! side-effect tool, audit write to a real SQLite file in WAL mode, output truncation).
//!
//! Run: `cargo bench --bench governance`. Prints p50/p99/mean in microseconds over 10,000 calls
//! after 1,000 warm-up calls.

use async_trait::async_trait;
use ethan::provider::types::ToolCall;
use ethan::store::Store;
use ethan::tools::executor::{Executor, ExecutorOptions};
use ethan::tools::registry::Registry;
use ethan::tools::{Risk, Tool, ToolContext, ToolDecl, ToolError, ToolOutput};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

struct Noop(ToolDecl);

impl Noop {
    fn new(name: &str, risk: Risk) -> Self {
        let parameters = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "max_lines": {"type": "integer", "minimum": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
                "api_key": {"type": "string"}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        Self(ToolDecl::new(name, "does nothing", parameters).risk(risk))
    }
}

#[async_trait]
impl Tool for Noop {
    fn decl(&self) -> &ToolDecl {
        &self.0
    }
    async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new("ok"))
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("bench.db")).expect("store");
    let mut registry = Registry::default();
    registry.register(Arc::new(Noop::new("noop_read", Risk::ReadOnly)));
    registry.register(Arc::new(Noop::new("noop_write", Risk::Write)));
    let executor = Executor::new(
        Arc::new(registry),
        ExecutorOptions {
            store: Some(store.shared()),
            secrets: vec!["sk-bench-secret".into()],
            spill_dir: Some(dir.path().join("spill")),
            overrides: BTreeMap::new(),
            policy: Some(ethan::tools::policy::Policy::from_config(
                &Default::default(),
            )),
        },
    );
    let allowed: BTreeSet<String> = ["noop_read", "noop_write"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let ctx = ToolContext {
        execution_id: String::new(),
        trace_id: "bench".into(),
        session_key: "terminal:bench".into(),
        chat_id: "bench".into(),
        user_id: "bench".into(),
        idempotency_key: String::new(),
        ..ToolContext::local(dir.path().to_path_buf())
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "call", "p50 µs", "p99 µs", "mean µs"
    );
    for tool in ["noop_read", "noop_write"] {
        let mut samples = Vec::with_capacity(10_000);
        for i in 0..11_000 {
            let args = json!({"path": format!("notes/{i}.md"), "max_lines": 10, "tags": ["a", "b"], "api_key": "sk-x"});
            let call = ToolCall::new(format!("c{i}"), tool, args.to_string());
            let t = Instant::now();
            let out = rt.block_on(executor.execute(std::slice::from_ref(&call), &allowed, &ctx));
            let us = t.elapsed().as_secs_f64() * 1e6;
            assert!(out[0].result.ok, "{:?}", out[0].result);
            if i >= 1_000 {
                samples.push(us);
            }
        }
        samples.sort_by(|a, b| a.total_cmp(b));
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        println!(
            "{:<28} {:>10.1} {:>10.1} {:>10.1}",
            format!("{tool} (validate+policy+audit)"),
            percentile(&samples, 0.5),
            percentile(&samples, 0.99),
            mean
        );
    }
}
