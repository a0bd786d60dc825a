//! The executor: turns one assistant message's `tool_calls` into results, one per
//! `tool_call_id`, in the model's order. Consecutive read-only calls run in parallel; each
//! side-effect call runs alone.
//!
//! Per call: resolve aliases (`bash` → `shell`); refuse unknown tools and tools not exposed to
//! this turn; parse the arguments (malformed JSON → a validation result); run under the tool's
//! timeout, retrying read-only tools up to `max_retries`; cut the model's copy of the output.

use super::registry::Registry;
use super::truncate::{truncate_for_model, MODEL_OUTPUT_LIMIT};
use super::{ErrorKind, Tool, ToolContext, ToolResult};
use crate::provider::types::ToolCall;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The result of one proposed call.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub tool_call_id: String,
    /// The name the model used.
    pub requested: String,
    /// The tool that ran (alias resolved), if any.
    pub tool: Option<String>,
    pub result: ToolResult,
    /// What the model receives (cut to [`MODEL_OUTPUT_LIMIT`] characters).
    pub model_text: String,
    pub attempts: u32,
    pub elapsed_ms: u64,
}

pub struct Executor {
    registry: Arc<Registry>,
}

impl Executor {
    pub fn new(registry: Arc<Registry>) -> Self {
        Self { registry }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Execute `calls` for a turn that may use the tools in `exposed`.
    pub async fn execute(
        &self,
        calls: &[ToolCall],
        exposed: &BTreeSet<String>,
        base: &ToolContext,
    ) -> Vec<CallOutcome> {
        let mut out = Vec::with_capacity(calls.len());
        let mut i = 0;
        while i < calls.len() {
            // A run of read-only calls goes in parallel; a side-effect call alone.
            let mut j = i;
            while j < calls.len() && self.is_read_only(&calls[j].function.name) {
                j += 1;
            }
            if j == i {
                j = i + 1;
            }
            let batch = calls[i..j]
                .iter()
                .enumerate()
                .map(|(k, c)| self.execute_one(c, i + k, exposed, base));
            out.extend(futures::future::join_all(batch).await);
            i = j;
        }
        out
    }

    fn is_read_only(&self, name: &str) -> bool {
        self.registry
            .resolve(name)
            .and_then(|n| self.registry.get(n))
            .is_some_and(|t| !t.risk().has_side_effects())
    }

    async fn execute_one(
        &self,
        call: &ToolCall,
        index: usize,
        exposed: &BTreeSet<String>,
        base: &ToolContext,
    ) -> CallOutcome {
        let started = std::time::Instant::now();
        let requested = call.function.name.clone();
        let mut outcome = CallOutcome {
            tool_call_id: call.id.clone(),
            requested: requested.clone(),
            tool: None,
            result: ToolResult::err(ErrorKind::Internal, "not run"),
            model_text: String::new(),
            attempts: 0,
            elapsed_ms: 0,
        };
        let result = match self.registry.resolve(&requested) {
            None => ToolResult::err(
                ErrorKind::Validation,
                format!(
                    "there is no tool named {requested:?}; available tools: {}",
                    exposed.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            ),
            Some(name) if !exposed.contains(name) => ToolResult::err(
                ErrorKind::Denied,
                format!(
                    "the tool {name:?} is not available in this chat; use one of: {}",
                    exposed.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            ),
            Some(name) => {
                outcome.tool = Some(name.to_string());
                match parse_arguments(&call.function.arguments) {
                    Err(r) => r,
                    Ok(args) => {
                        let tool = self.registry.get(name).expect("resolved tool exists");
                        let mut ctx = base.clone();
                        ctx.execution_id = uuid::Uuid::new_v4().to_string();
                        ctx.idempotency_key = format!("{}:{index}", base.trace_id);
                        let (r, attempts) = run_with_retries(tool.as_ref(), args, ctx).await;
                        outcome.attempts = attempts;
                        r
                    }
                }
            }
        };
        let (model_text, _) = truncate_for_model(&result.model_text(), MODEL_OUTPUT_LIMIT);
        outcome.model_text = model_text;
        outcome.result = result;
        outcome.elapsed_ms = started.elapsed().as_millis() as u64;
        outcome
    }
}

/// Parse the model's `arguments` text into a JSON object (empty text = `{}`).
pub fn parse_arguments(text: &str) -> Result<Value, ToolResult> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(ToolResult::err(
            ErrorKind::Validation,
            format!(
                "the arguments must be a JSON object, got {}",
                super::args::type_name(&other)
            ),
        )),
        Err(e) => Err(ToolResult::err(
            ErrorKind::Validation,
            format!("the arguments are not valid JSON ({e}); send a JSON object matching the tool's parameters"),
        )),
    }
}

/// Run under the tool's timeout; read-only tools are retried up to `max_retries` after a
/// timeout or dependency failure.
async fn run_with_retries(tool: &dyn Tool, args: Value, mut ctx: ToolContext) -> (ToolResult, u32) {
    let retries = if tool.risk().has_side_effects() {
        0
    } else {
        tool.max_retries()
    };
    let limit = tool.timeout_for(&args);
    let mut attempt = 0;
    loop {
        attempt += 1;
        ctx.attempt = attempt;
        let r = match tokio::time::timeout(limit, tool.run(args.clone(), &ctx)).await {
            Ok(r) => r,
            Err(_) => ToolResult::err(
                ErrorKind::Timeout,
                format!(
                    "{} did not finish within {} s",
                    tool.name(),
                    limit.as_secs()
                ),
            ),
        };
        let retryable = matches!(
            r.error_kind,
            Some(ErrorKind::Timeout | ErrorKind::Dependency)
        );
        if r.ok || !retryable || attempt > retries {
            return (r, attempt);
        }
        tracing::debug!(
            "{} attempt {attempt} failed ({:?}); retrying",
            tool.name(),
            r.error
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::provider::types::FunctionCall;
    use ethan_channels::ChannelKind;
    use serde_json::json;
    use std::path::Path;

    pub(crate) fn ctx_in(dir: &Path) -> ToolContext {
        ToolContext {
            execution_id: "e".into(),
            trace_id: "t".into(),
            session_key: "terminal:test".into(),
            channel: ChannelKind::Terminal,
            chat_id: "test".into(),
            user_id: "local".into(),
            is_owner: true,
            attempt: 1,
            idempotency_key: "k".into(),
            unattended: false,
            allowed_tools: None,
            workspace: dir.to_path_buf(),
            ethan_home: None,
        }
    }

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            function: FunctionCall {
                name: name.into(),
                arguments: args.into(),
            },
        }
    }

    fn executor() -> Executor {
        Executor::new(Arc::new(Registry::builtin(
            &crate::config::Config::default(),
        )))
    }

    fn all(e: &Executor) -> BTreeSet<String> {
        e.registry().iter().map(|t| t.name().to_string()).collect()
    }

    #[tokio::test]
    async fn every_call_gets_one_result_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "A").unwrap();
        let e = executor();
        let calls = vec![
            call("1", "file_read", r#"{"path":"a"}"#),
            call("2", "nope", "{}"),
            call("3", "read_file", r#"{"path":"a"}"#),
            call("4", "file_read", "{not json"),
            call("5", "file_read", "[1]"),
        ];
        let out = e.execute(&calls, &all(&e), &ctx_in(dir.path())).await;
        let ids: Vec<_> = out.iter().map(|o| o.tool_call_id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "3", "4", "5"]);
        assert_eq!(out[0].model_text, "A");
        assert!(out[1].model_text.contains("no tool named \"nope\""));
        assert_eq!(out[2].tool.as_deref(), Some("file_read"));
        assert_eq!(out[3].result.error_kind, Some(ErrorKind::Validation));
        assert!(out[3].model_text.contains("not valid JSON"));
        assert!(out[4].model_text.contains("JSON object"));
    }

    #[tokio::test]
    async fn unexposed_tool_is_denied() {
        let dir = tempfile::tempdir().unwrap();
        let e = executor();
        let exposed: BTreeSet<String> = ["file_read".to_string()].into();
        let out = e
            .execute(
                &[call("1", "bash", r#"{"command":"true"}"#)],
                &exposed,
                &ctx_in(dir.path()),
            )
            .await;
        assert_eq!(out[0].result.error_kind, Some(ErrorKind::Denied));
        assert!(out[0].model_text.contains("not available"));
    }

    #[tokio::test]
    async fn long_output_is_cut_for_the_model() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big"), "y".repeat(20_000)).unwrap();
        let e = executor();
        let out = e
            .execute(
                &[call("1", "file_read", r#"{"path":"big"}"#)],
                &all(&e),
                &ctx_in(dir.path()),
            )
            .await;
        assert!(out[0].model_text.chars().count() <= MODEL_OUTPUT_LIMIT);
        assert!(out[0].model_text.contains("20000 characters"));
        assert_eq!(out[0].result.output.len(), 20_000);
        let _ = json!({});
    }
}
