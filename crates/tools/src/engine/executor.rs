//! The executor: between the model and the world. For the `tool_calls` of one assistant
//! message, in the model's order (consecutive read-only calls in parallel, each side-effect call
//! alone), every call goes through these steps (docs/ARCHITECTURE.md, "Where each rule lives"), each of which can end it with a
//! [`ToolResult`] the model reads:
//!
//! 1. resolve aliases (`bash` → `shell`);
//! 2. refuse unknown tools and tools the policy does not allow this turn;
//! 3. parse the arguments (malformed JSON → `validation`);
//! 4. validate them against the tool's schema, listing every violation by JSON path;
//! 5. for side-effect tools, the replay guard ([`crate::replay`]): a call that already ran
//!    is refused; its key is recorded only after consent, when the call starts running;
//! 6. consent (the [`ConsentGate`], when one is installed), after the tool's own assessment of
//!    the call ([`Tool::assess`], awaited once; its result goes to the hooks and `run` in
//!    [`ToolContext::assessment`]). When the owner was asked ([`Consented::Asked`]), the call
//!    is assessed and described again right before it runs; a description that changed while
//!    the owner decided (a link re-pointed meanwhile) refuses the call ([`still_as_approved`]);
//! 7. run under the tool's time limit (`tools.<name>.timeout_secs` overrides), retrying
//!    read-only tools up to `max_retries` (`tools.<name>.max_retries`). Each attempt runs in a
//!    task of its own ([`run_isolated`]): a panic inside a tool becomes an `internal` result,
//!    and the task is aborted when the time runs out or the turn is cancelled (the executor's
//!    future dropped);
//! 8. the model's copy: an output over `tools.summarise_over_chars` is summarised by the
//!    [`OutputSummariser`] when one is installed and the tool does not declare
//!    [`crate::ToolDecl::no_compress`]; otherwise (or when the summary fails) it is cut at 8000 characters
//!    (head + tail). Either way the full output is spilled to `$ETHAN_HOME/spill/` and its path
//!    given.
//!
//! Every proposal gets exactly one audit entry, refused ones included, with its arguments
//! redacted ([`crate::redact`]).

use crate::policy::{Audience, Policy};
use crate::redact::Redactor;
use crate::registry::Registry;
use crate::replay::{replay_key, ReplayGuard};
use crate::settings::ToolOverride;
use crate::truncate::{truncate_for_model, MODEL_OUTPUT_LIMIT};
use crate::{ErrorKind, Tool, ToolContext, ToolResult};
use ethan_core::message::ToolCall;
use ethan_core::store::{AuditEntry, StorageRef};
use ethan_core::tool::CallPlan;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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

pub use ethan_core::consent::{ConsentGate, Consented};

/// Writes the model's copy of a long tool output: a summary of it (the daemon's summary model,
/// `memory.summary_model`).
#[async_trait::async_trait]
pub trait OutputSummariser: Send + Sync {
    /// A summary of `output` (the full text `tool` returned, secrets already redacted) for the
    /// call in `ctx`: `Ok((summary, the model that wrote it))`, or `Err(why)` (then the output
    /// is cut instead).
    async fn summarise(
        &self,
        tool: &str,
        output: &str,
        ctx: &ToolContext,
    ) -> Result<(String, String), String>;
}

/// What became of one call of a turn the user stopped ([`Executor::execute_until`]).
#[derive(Debug)]
pub enum Progress {
    /// It ran to its end (its audit entry is written).
    Ran(Box<CallOutcome>),
    /// It was running and was aborted; it may have done part of its work.
    Stopped,
    /// It never started.
    NotStarted,
}

impl Progress {
    /// What the model is told about a call that did not run to its end.
    pub const STOPPED_TEXT: &'static str = "Error (stopped): the user stopped this turn while \
        this call was running; it may have done part of its work";
    /// What the model is told about a call that never started.
    pub const NOT_STARTED_TEXT: &'static str =
        "Error (not run): the user stopped this turn before this call started";
}

/// What the executor needs besides the registry.
pub struct ExecutorOptions {
    /// Where audit entries and replay keys go (`None`: not recorded).
    pub store: Option<StorageRef>,
    /// The literal secret values of the config, for redaction.
    pub secrets: Vec<String>,
    /// `$ETHAN_HOME/spill` (`None`: no spill files).
    pub spill_dir: Option<PathBuf>,
    /// `tools.<name>` overrides from the config.
    pub overrides: BTreeMap<String, ToolOverride>,
    /// The exposure policy, checked again for every call (`None`: only `allowed` counts).
    pub policy: Option<Policy>,
}

/// The executor's registry, swappable: the MCP manager puts a new one in when a server lists
/// or changes its tools; a turn takes a snapshot ([`Executor::registry`]) and keeps it.
pub type RegistrySlot = Arc<std::sync::RwLock<Arc<Registry>>>;

pub struct Executor {
    registry: RegistrySlot,
    replay: ReplayGuard,
    store: Option<StorageRef>,
    redactor: Redactor,
    spill_dir: Option<PathBuf>,
    overrides: BTreeMap<String, ToolOverride>,
    policy: Option<Policy>,
    gate: Option<Arc<dyn ConsentGate>>,
    /// Long outputs' summariser and the length (characters) above which it is used.
    summariser: Option<(Arc<dyn OutputSummariser>, usize)>,
    /// Where calls are counted (`ethan_tool_calls_total`).
    metrics: Arc<ethan_metrics::Metrics>,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Executor {
    pub fn new(registry: Arc<Registry>, opts: ExecutorOptions) -> Self {
        Self {
            replay: ReplayGuard::new(opts.store.clone()),
            registry: Arc::new(std::sync::RwLock::new(registry)),
            store: opts.store,
            redactor: Redactor::new(opts.secrets),
            spill_dir: opts.spill_dir,
            overrides: opts.overrides,
            policy: opts.policy,
            gate: None,
            summariser: None,
            metrics: Default::default(),
        }
    }

    /// Count calls in `metrics` (the daemon's registry) instead of a registry of its own.
    pub fn with_metrics(mut self, metrics: Arc<ethan_metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Summarise outputs longer than `over_chars` characters (0: never) with `summariser`.
    pub fn with_summariser(
        mut self,
        summariser: Arc<dyn OutputSummariser>,
        over_chars: usize,
    ) -> Self {
        if over_chars > 0 {
            self.summariser = Some((summariser, over_chars));
        }
        self
    }

    /// Just before a call with side effects runs: the turn's fence (a turn whose replica lost
    /// the session to another, after a pause or a partition, acts no more: `Err(Some(why))`),
    /// then the replay guard records the call's key (`Err(None)`: it already ran).
    async fn may_run(
        &self,
        ctx: &ToolContext,
        name: &str,
        side_effects: bool,
    ) -> Result<(), Option<ToolResult>> {
        if !side_effects {
            return Ok(());
        }
        if let Some(refused) = fenced(ctx, true).await {
            return Err(Some(refused));
        }
        let first = self
            .replay
            .first_time(&ctx.idempotency_key, &ctx.trace_id, name)
            .await;
        if first {
            Ok(())
        } else {
            Err(None)
        }
    }

    /// Install the consent step.
    pub fn with_gate(mut self, gate: Arc<dyn ConsentGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The current registry (a snapshot: later swaps do not change it).
    pub fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The slot the registry lives in, for whoever swaps it (the MCP manager).
    pub fn registry_slot(&self) -> RegistrySlot {
        self.registry.clone()
    }

    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Execute `calls` for a turn whose policy allows the tools in `allowed`.
    pub async fn execute(
        &self,
        calls: &[ToolCall],
        allowed: &BTreeSet<String>,
        base: &ToolContext,
    ) -> Vec<CallOutcome> {
        match self
            .execute_until(calls, allowed, base, &CancellationToken::new())
            .await
        {
            Ok(out) => out,
            // Cannot happen: the token is never cancelled.
            Err(progress) => progress
                .into_iter()
                .filter_map(|p| match p {
                    Progress::Ran(o) => Some(*o),
                    _ => None,
                })
                .collect(),
        }
    }

    /// [`Executor::execute`] until `cancel` fires (the user stopped the turn). Then the calls
    /// still running are aborted and the answer says, call by call in order, what became of
    /// each: `Err(progress)` with one [`Progress`] per call.
    pub async fn execute_until(
        &self,
        calls: &[ToolCall],
        allowed: &BTreeSet<String>,
        base: &ToolContext,
        cancel: &CancellationToken,
    ) -> Result<Vec<CallOutcome>, Vec<Progress>> {
        use futures::StreamExt;
        let mut out = Vec::with_capacity(calls.len());
        let mut i = 0;
        while i < calls.len() {
            // A run of read-only calls goes in parallel; a side-effect (or unknown) call alone.
            let mut j = i;
            while j < calls.len() && self.is_read_only(&calls[j].name) {
                j += 1;
            }
            if j == i {
                j = i + 1;
            }
            let mut slots: Vec<Option<CallOutcome>> = (i..j).map(|_| None).collect();
            let mut batch: futures::stream::FuturesUnordered<_> = calls[i..j]
                .iter()
                .enumerate()
                .map(|(k, c)| async move { (k, self.execute_one(c, i + k, allowed, base).await) })
                .collect();
            let stopped = loop {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => break true,
                    next = batch.next() => match next {
                        Some((k, o)) => slots[k] = Some(o),
                        None => break false,
                    },
                }
            };
            // Dropping the batch aborts the calls still running (each runs in a task of its own
            // that is aborted when its future is dropped).
            drop(batch);
            if stopped {
                // Every proposal gets its audit row, the interrupted ones too.
                for (k, slot) in slots.iter().enumerate() {
                    if slot.is_none() {
                        self.audit_interrupted(&calls[i + k], base, "stopped").await;
                    }
                }
                for c in &calls[j..] {
                    self.audit_interrupted(c, base, "not_run").await;
                }
                let mut progress: Vec<Progress> = out
                    .into_iter()
                    .map(|o| Progress::Ran(Box::new(o)))
                    .collect();
                progress.extend(slots.into_iter().map(|s| match s {
                    Some(o) => Progress::Ran(Box::new(o)),
                    None => Progress::Stopped,
                }));
                progress.extend(calls[j..].iter().map(|_| Progress::NotStarted));
                return Err(progress);
            }
            out.extend(slots.into_iter().flatten());
            i = j;
        }
        Ok(out)
    }

    /// The audit row of a call the user's `/stop` cut short (`kind`: `stopped` while running or
    /// waiting for approval, `not_run` before it started).
    async fn audit_interrupted(&self, call: &ToolCall, base: &ToolContext, kind: &str) {
        let Some(store) = &self.store else {
            return;
        };
        let now = now_ms();
        let args = match serde_json::from_str::<Value>(&call.arguments) {
            Ok(v) => self.redactor.value(&v).to_string(),
            Err(_) => self.redactor.text(&call.arguments),
        };
        let entry = AuditEntry {
            execution_id: uuid::Uuid::new_v4().to_string(),
            trace_id: base.trace_id.clone(),
            model: (!base.model.is_empty()).then(|| base.model.clone()),
            session_key: base.session_key.clone(),
            user_id: base.user_id.clone(),
            channel: base.channel.as_str().to_string(),
            tool: self
                .registry()
                .resolve(&call.name)
                .map(str::to_string)
                .unwrap_or_else(|| self.redactor.text(&call.name)),
            args,
            started_ms: now,
            ended_ms: now,
            ok: false,
            attempt: 0,
            error_kind: Some(kind.to_string()),
            error: Some(match kind {
                "not_run" => "the user stopped the turn before this call started".to_string(),
                _ => "the user stopped the turn while this call was running or waiting".to_string(),
            }),
            output_bytes: 0,
            spill_path: None,
        };
        if let Err(e) = store.insert_audit(&entry).await {
            tracing::error!("audit write failed: {e}");
        }
    }

    fn is_read_only(&self, name: &str) -> bool {
        let registry = self.registry();
        registry
            .resolve(name)
            .and_then(|n| registry.get(n))
            .is_some_and(|t| !t.decl().risk.has_side_effects())
    }

    fn limits(&self, tool: &dyn Tool, plan: &CallPlan) -> (Duration, u32) {
        let o = self.overrides.get(&tool.decl().name);
        let timeout = o
            .and_then(|o| o.timeout_secs)
            .map(Duration::from_secs)
            .unwrap_or(plan.timeout);
        let retries = if tool.decl().risk.has_side_effects() {
            0
        } else {
            o.and_then(|o| o.max_retries)
                .unwrap_or_else(|| tool.decl().max_retries)
        };
        (timeout, retries)
    }

    async fn execute_one(
        &self,
        call: &ToolCall,
        index: usize,
        allowed: &BTreeSet<String>,
        base: &ToolContext,
    ) -> CallOutcome {
        let started = std::time::Instant::now();
        let started_ms = now_ms();
        let mut ctx = base.clone();
        ctx.execution_id = uuid::Uuid::new_v4().to_string();
        let requested = call.name.clone();
        let registry = self.registry();

        // 1-7: each step may end the call with the result the model reads.
        let mut trail = Trail::default();
        let result = match self
            .propose(call, index, allowed, &registry, &mut ctx, &mut trail)
            .await
        {
            Ok(r) | Err(r) => r,
        };
        let Trail {
            tool: tool_name,
            args: parsed,
            attempts,
        } = trail;

        // 8. the model's copy, and the spill file
        let tool_for_output = tool_name.as_deref().and_then(|n| registry.get(n));
        let ModelCopy {
            result,
            model_text,
            full,
            spill_path,
        } = self.model_copy(result, tool_for_output, &ctx).await;

        let args_text = match &parsed {
            Some(v) => self.redactor.value(v).to_string(),
            None => self.redactor.text(&call.arguments),
        };
        let entry = AuditEntry {
            execution_id: ctx.execution_id.clone(),
            trace_id: ctx.trace_id.clone(),
            model: (!ctx.model.is_empty()).then(|| ctx.model.clone()),
            session_key: ctx.session_key.clone(),
            user_id: ctx.user_id.clone(),
            channel: ctx.channel.as_str().to_string(),
            tool: tool_name
                .clone()
                .unwrap_or_else(|| self.redactor.text(&requested)),
            args: args_text,
            started_ms,
            ended_ms: now_ms(),
            ok: result.ok,
            attempt: attempts,
            error_kind: result.error_kind.map(|k| k.as_str().to_string()),
            error: result.error.as_deref().map(|e| self.redactor.text(e)),
            output_bytes: full.len() as u64,
            spill_path,
        };
        self.metrics
            .tool_calls
            .with_label_values(&[&entry.tool, entry.error_kind.as_deref().unwrap_or("ok")])
            .inc();
        if let Some(store) = &self.store {
            if let Err(e) = store.insert_audit(&entry).await {
                tracing::error!("audit write failed: {e}");
            }
        }
        CallOutcome {
            tool_call_id: call.id.clone(),
            requested,
            tool: tool_name,
            result,
            model_text,
            attempts,
            elapsed_ms: started.elapsed().as_millis() as u64,
        }
    }

    /// Steps 1-7 of one call, in this order: `Err` is the refusal that ended it before it ran,
    /// `Ok` the result of running it. `trail` learns the tool, the parsed arguments and the
    /// attempts as they become known (the audit entry records them, refusals included).
    async fn propose(
        &self,
        call: &ToolCall,
        index: usize,
        allowed: &BTreeSet<String>,
        registry: &Registry,
        ctx: &mut ToolContext,
        trail: &mut Trail,
    ) -> Result<ToolResult, ToolResult> {
        // 1-2. alias, existence, policy
        let name = resolve(registry, &call.name, allowed)?;
        trail.tool = Some(name.to_string());
        let tool = self.admit(registry, name, allowed, ctx)?;
        // 3. parse
        let args = parse_arguments(&call.arguments)?;
        trail.args = Some(args.clone());
        // 4. validate
        validate(registry, name, &args)?;
        // 5-6. replay guard, consent (on the tool's plan of this call, worked out once)
        let plan = self.consent(tool.as_ref(), name, index, &args, ctx).await?;
        // 7. run (a tool that reads private data taints the turn, whatever its outcome)
        if tool.decl().reads_private {
            ctx.taint.mark(name);
        }
        let (limit, retries) = self.limits(tool.as_ref(), &plan);
        let (r, n) = run_with_retries(tool.clone(), args, ctx, limit, retries).await;
        trail.attempts = n;
        Ok(r)
    }

    /// Step 2: the tool `name` if the policy, checked again at execution time, and the turn's
    /// `allowed` set let it run.
    fn admit<'r>(
        &self,
        registry: &'r Registry,
        name: &str,
        allowed: &BTreeSet<String>,
        ctx: &ToolContext,
    ) -> Result<&'r Arc<dyn Tool>, ToolResult> {
        let tool = registry
            .get(name)
            .ok_or_else(|| ToolResult::err(ErrorKind::Internal, "resolved tool vanished"))?;
        // The policy again, at execution time.
        let refusal = match &self.policy {
            Some(p) => p.refusal(tool.as_ref(), &Audience::of(ctx)),
            None => None,
        };
        if let Some(why) = refusal.or_else(|| {
            (!allowed.contains(name)).then(|| format!("{name} is not enabled for this turn"))
        }) {
            return Err(ToolResult::err(
                ErrorKind::Denied,
                format!("{why} (policy). Available tools: {}", list(allowed)),
            ));
        }
        Ok(tool)
    }

    /// Steps 5-6: the replay guard, then consent on the tool's assessment of this very call,
    /// then (for side effects) the fence and the recording of the call's replay key.
    async fn consent(
        &self,
        tool: &dyn Tool,
        name: &str,
        index: usize,
        args: &Value,
        ctx: &mut ToolContext,
    ) -> Result<CallPlan, ToolResult> {
        // 5. replay guard: a call that already ran is refused before anyone is asked; its
        // key is recorded only once consent let it run (a denied call may come again).
        let side_effects = tool.decl().risk.has_side_effects();
        let replayed = || {
            ToolResult::err(
                ErrorKind::Denied,
                format!(
                    "replay refused: this exact {name} call (same turn, position and arguments) \
                     was already executed; its result is earlier in the conversation"
                ),
            )
        };
        if side_effects {
            let key = replay_key(&ctx.trace_id, name, index, args);
            ctx.idempotency_key = key;
            if self.replay.seen(&ctx.idempotency_key).await {
                return Err(replayed());
            }
        } else {
            ctx.idempotency_key = format!("{}:{index}", ctx.trace_id);
        }
        // 6. consent, on the tool's assessment and plan of this very call
        ctx.assessment = tool.assess(args, ctx).await;
        let described_at = ctx.services.clock.now();
        let plan = describe_at(tool, args, ctx, described_at);
        // A turn that lost its session's lease asks nobody (checked again before it runs).
        if let Some(refused) = fenced(ctx, side_effects).await {
            return Err(refused);
        }
        let mut plan = plan;
        if let Some(gate) = &self.gate {
            if gate.check(tool, args, &plan, ctx).await? == Consented::Asked {
                plan = still_as_approved(tool, args, plan, described_at, ctx).await?;
            }
        }
        if let Err(refusal) = self.may_run(ctx, name, side_effects).await {
            return Err(refusal.unwrap_or_else(replayed));
        }
        Ok(plan)
    }

    /// Step 8: the model's copy of `result` — summarised or cut when long, the full text spilled
    /// to a file then. A configured secret (a key, a token, an MCP server's header or env
    /// value) that a tool printed never reaches either.
    async fn model_copy(
        &self,
        mut result: ToolResult,
        tool: Option<&Arc<dyn Tool>>,
        ctx: &ToolContext,
    ) -> ModelCopy {
        let full = self.redactor.known(&result.model_text()).into_owned();
        let summary = match (&self.summariser, &tool) {
            (Some((summariser, over)), Some(tool))
                if !tool.decl().no_compress && full.chars().count() > *over =>
            {
                Some(summariser.summarise(&tool.decl().name, &full, ctx).await)
            }
            _ => None,
        };
        let (mut model_text, cut) = match &summary {
            Some(Ok((text, model))) => (
                format!(
                    "[summary by {model} of an output of {} characters; the exact text is in \
                     the file named below]\n{text}",
                    full.chars().count()
                ),
                true,
            ),
            _ => truncate_for_model(&full, MODEL_OUTPUT_LIMIT),
        };
        if let Some(Err(why)) = &summary {
            tracing::warn!("cannot summarise the output of {}: {why}", ctx.execution_id);
            model_text.push_str(&format!("\n[the output could not be summarised: {why}]"));
        }
        let mut spill_path = None;
        if cut {
            if let Some(dir) = &self.spill_dir {
                let summarised = matches!(summary, Some(Ok(_)));
                spill_path = spill(dir, &mut result, &full, summarised, &mut model_text, ctx);
            }
        }
        ModelCopy {
            result,
            model_text,
            full,
            spill_path,
        }
    }
}

/// What a call's way through steps 1-7 learnt, for its audit entry and outcome.
#[derive(Default)]
struct Trail {
    /// The tool the requested name resolved to.
    tool: Option<String>,
    /// The arguments, once they parsed.
    args: Option<Value>,
    /// How many attempts ran (0: it never ran).
    attempts: u32,
}

/// A call's result as the model gets it (step 8).
struct ModelCopy {
    /// The result, its metadata naming the spill file (or why there is none) when cut.
    result: ToolResult,
    /// What the model reads.
    model_text: String,
    /// The full output, secrets redacted.
    full: String,
    /// Where the full output was saved.
    spill_path: Option<String>,
}

/// Step 1: the tool the model's `requested` name stands for (aliases resolved).
fn resolve<'r>(
    registry: &'r Registry,
    requested: &str,
    allowed: &BTreeSet<String>,
) -> Result<&'r str, ToolResult> {
    registry.resolve(requested).ok_or_else(|| {
        ToolResult::err(
            ErrorKind::Validation,
            format!(
                "there is no tool named {requested:?}. Available tools: {}",
                list(allowed)
            ),
        )
    })
}

/// Step 4: `args` against the tool's schema, every violation listed by JSON path.
fn validate(registry: &Registry, name: &str, args: &Value) -> Result<(), ToolResult> {
    match registry.validator(name) {
        Some(Ok(v)) => {
            if let Err(violations) = v.validate(args) {
                return Err(ToolResult::err(
                    ErrorKind::Validation,
                    format!("invalid arguments for {name}:\n{violations}\nFix them and call {name} again."),
                ));
            }
        }
        Some(Err(why)) => {
            tracing::error!("tool {name:?} has a schema that does not compile: {why}");
            return Err(ToolResult::err(
                ErrorKind::Internal,
                format!("{name} cannot be used: its parameters schema is broken ({why}). Use another tool."),
            ));
        }
        None => {}
    }
    Ok(())
}

/// Save the `full` output of a cut call under `dir`, telling the model where (or that it could
/// not be saved) in `model_text` and the result's metadata; the file's path.
fn spill(
    dir: &std::path::Path,
    result: &mut ToolResult,
    full: &str,
    summarised: bool,
    model_text: &mut String,
    ctx: &ToolContext,
) -> Option<String> {
    let mut spill_path = None;
    let mut meta = match result.metadata.take() {
        Value::Object(m) => m,
        Value::Null => Default::default(),
        other => [("tool".to_string(), other)].into_iter().collect(),
    };
    if summarised {
        meta.insert("summarised".into(), json!(true));
    }
    match crate::spill::write(dir, &ctx.execution_id, full) {
        Ok(p) => {
            model_text.push_str(&format!("\n[full output saved to {}]", p.display()));
            meta.insert("spill_path".into(), json!(p.display().to_string()));
            spill_path = Some(p.display().to_string());
        }
        Err(e) => {
            // A full disk or a file-size limit: the model still gets the cut output,
            // and learns that the rest is gone.
            tracing::warn!(
                "cannot save the full output of {} ({} bytes) under {}: {e}",
                ctx.execution_id,
                full.len(),
                dir.display()
            );
            model_text.push_str(&format!("\n[the full output could not be saved: {e}]"));
            meta.insert("spill_error".into(), json!(e.to_string()));
        }
    }
    result.metadata = Value::Object(meta);
    spill_path
}

/// `tool`'s plan of this call, read with the clock stopped at `at` (the first time the call was
/// described): a time the description shows ("first run 09:05", counted from now) that moved
/// on while the owner decided is not a change of what the call does.
fn describe_at(
    tool: &dyn Tool,
    args: &Value,
    ctx: &mut ToolContext,
    at: std::time::SystemTime,
) -> CallPlan {
    let stopped = Arc::new(ethan_core::clock::ManualClock::new(at));
    let clock = std::mem::replace(&mut ctx.services.clock, stopped);
    let plan = tool.describe(args, ctx);
    ctx.services.clock = clock;
    plan
}

/// After the owner said yes to `approved`: the call described again (its assessment and plan,
/// as before asking, the plan on the clock of then), right before it runs. The owner may take
/// minutes; meanwhile something beside the turn (a command, another chat) can re-point a link
/// the call goes through, so the same arguments would do something else. Unchanged: the fresh
/// plan (its assessment stays in `ctx` for `run`). Changed: refused, nothing done.
async fn still_as_approved(
    tool: &dyn Tool,
    args: &Value,
    approved: CallPlan,
    described_at: std::time::SystemTime,
    ctx: &mut ToolContext,
) -> Result<CallPlan, ToolResult> {
    ctx.assessment = tool.assess(args, ctx).await;
    let now = describe_at(tool, args, ctx, described_at);
    let (was, is) = (asked_text(&approved), asked_text(&now));
    if was == is && approved.identity == now.identity {
        return Ok(now);
    }
    if was == is {
        return Err(ToolResult::err(
            ErrorKind::Denied,
            format!(
                "the file this call would act on changed while the owner was deciding (a name \
                 in it now leads to another file: {is}); nothing was done. Call it again to ask \
                 the owner about what it does now."
            ),
        ));
    }
    Err(ToolResult::err(
        ErrorKind::Denied,
        format!(
            "what this call would do changed while the owner was deciding (was: {was}; now: \
             {is}); nothing was done. Call it again to ask the owner about what it does now."
        ),
    ))
}

/// What the owner is asked about a call's plan: its own description, and where its data would
/// go (the approval text is made of these; see the consent step).
fn asked_text(plan: &CallPlan) -> String {
    let own = plan.consent.as_deref().unwrap_or("nothing to approve");
    match &plan.egress {
        Some(e) => format!("{own} [sends to: {}]", e.destination),
        None => own.to_string(),
    }
}

/// The refusal of a call with side effects by the turn's fence (its replica lost the session's
/// lease); `None` when it may go on.
async fn fenced(ctx: &ToolContext, side_effects: bool) -> Option<ToolResult> {
    let fence = ctx.services.fence.as_ref().filter(|_| side_effects)?;
    let why = fence.check().await.err()?;
    Some(ToolResult::err(ErrorKind::Denied, why))
}

fn list(names: &BTreeSet<String>) -> String {
    names.iter().cloned().collect::<Vec<_>>().join(", ")
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
                crate::args::type_name(&other)
            ),
        )),
        Err(e) => Err(ToolResult::err(
            ErrorKind::Validation,
            format!("the arguments are not valid JSON ({e}); send a JSON object matching the tool's parameters"),
        )),
    }
}

/// Run under `limit`; retry up to `retries` times after a timeout or dependency failure.
async fn run_with_retries(
    tool: Arc<dyn Tool>,
    args: Value,
    ctx: &mut ToolContext,
    limit: Duration,
    retries: u32,
) -> (ToolResult, u32) {
    let mut attempt = 0;
    loop {
        attempt += 1;
        ctx.attempt = attempt;
        let r = run_isolated(tool.clone(), args.clone(), ctx.clone(), limit).await;
        let retryable = matches!(
            r.error_kind,
            Some(ErrorKind::Timeout | ErrorKind::Dependency)
        );
        if r.ok || !retryable || attempt > retries {
            return (r, attempt);
        }
        tracing::debug!(
            "{} attempt {attempt} failed ({:?}); retrying",
            tool.decl().name,
            r.error
        );
    }
}

/// The result of a tool whose task panicked (or was torn down by the runtime).
pub const CRASHED: &str = "the tool failed unexpectedly (internal error)";

/// One attempt, in a task of its own, under `limit`. A panic in the tool ends only that task and
/// comes back as an `internal` result; when the limit passes, or when the caller stops waiting
/// (a cancelled turn drops this future), the task is aborted.
async fn run_isolated(
    tool: Arc<dyn Tool>,
    args: Value,
    ctx: ToolContext,
    limit: Duration,
) -> ToolResult {
    let name = tool.decl().name.clone();
    let task = AbortOnDrop(ethan_core::task::spawn(async move {
        tool.run(args, &ctx).await
    }));
    match tokio::time::timeout(limit, task).await {
        // The one place a tool's own outcome becomes the result the executor records.
        Ok(Ok(r)) => ToolResult::from(r),
        Ok(Err(e)) => {
            let why = if e.is_panic() {
                let payload = e.into_panic();
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into());
                format!("panicked: {msg}")
            } else {
                "was cancelled by the runtime".to_string()
            };
            tracing::error!("tool {name} {why}");
            ToolResult::err(
                ErrorKind::Internal,
                format!(
                    "{CRASHED}; {name} stopped before finishing and may have done part of its \
                     work. Do not repeat the same call; use another tool or tell the user that \
                     {name} failed."
                ),
            )
        }
        // `task` was dropped with the timeout future, which aborted it.
        Err(_) => ToolResult::err(
            ErrorKind::Timeout,
            format!("{name} did not finish within {} s", limit.as_secs_f64()),
        ),
    }
}

/// A spawned task that is aborted when its handle is dropped (a plain [`JoinHandle`] detaches).
///
/// [`JoinHandle`]: tokio::task::JoinHandle
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

#[cfg(test)]
pub(crate) mod tests;
