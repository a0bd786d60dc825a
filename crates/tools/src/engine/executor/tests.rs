use super::*;
use crate::Risk;
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::LazyLock;

pub(crate) fn ctx_in(dir: &Path) -> ToolContext {
    ToolContext {
        trace_id: "t".into(),
        session_key: "terminal:test".into(),
        services: ethan_core::tool::Services {
            sandbox: ethan_sandbox::settings::testing::probed(),
            ..Default::default()
        },
        ..ToolContext::local(dir.to_path_buf())
    }
}

pub(crate) fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}

fn executor_with(
    registry: Registry,
    store: Option<StorageRef>,
    spill: Option<PathBuf>,
) -> Executor {
    Executor::new(
        Arc::new(registry),
        ExecutorOptions {
            store,
            secrets: vec!["sk-config-secret".into()],
            spill_dir: spill,
            overrides: BTreeMap::new(),
            policy: None,
        },
    )
}

fn executor() -> Executor {
    executor_with(crate::setup::default_registry(), None, None)
}

fn all(e: &Executor) -> BTreeSet<String> {
    e.registry()
        .iter()
        .map(|t| t.decl().name.to_string())
        .collect()
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
        call(
            "6",
            "file_read",
            r#"{"path": 5, "max_lines": true, "extra": 1}"#,
        ),
    ];
    let out = e.execute(&calls, &all(&e), &ctx_in(dir.path())).await;
    let ids: Vec<_> = out.iter().map(|o| o.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["1", "2", "3", "4", "5", "6"]);
    assert_eq!(out[0].model_text, "A");
    assert!(out[1].model_text.contains("no tool named \"nope\""));
    assert_eq!(out[2].tool.as_deref(), Some("file_read"));
    assert_eq!(out[3].result.error_kind, Some(ErrorKind::Validation));
    assert!(out[3].model_text.contains("not valid JSON"));
    assert!(out[4].model_text.contains("JSON object"));
    let v = &out[5].model_text;
    assert!(
        v.contains("$.path") && v.contains("$.max_lines") && v.contains("extra"),
        "{v}"
    );
}

#[tokio::test]
async fn unexposed_tool_is_denied() {
    let dir = tempfile::tempdir().unwrap();
    let e = executor();
    let allowed: BTreeSet<String> = ["file_read".to_string()].into();
    let out = e
        .execute(
            &[call("1", "bash", r#"{"command":"true"}"#)],
            &allowed,
            &ctx_in(dir.path()),
        )
        .await;
    assert_eq!(out[0].result.error_kind, Some(ErrorKind::Denied));
    assert!(
        out[0].model_text.contains("not enabled"),
        "{}",
        out[0].model_text
    );
}

#[tokio::test]
async fn long_output_is_cut_for_the_model_and_spilled() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    std::fs::write(dir.path().join("big"), "y".repeat(20_000)).unwrap();
    let e = executor_with(crate::setup::default_registry(), None, Some(spill.clone()));
    let out = e
        .execute(
            &[call("1", "file_read", r#"{"path":"big"}"#)],
            &all(&e),
            &ctx_in(dir.path()),
        )
        .await;
    assert!(out[0].model_text.contains("20000 characters"));
    assert!(out[0].model_text.chars().count() <= MODEL_OUTPUT_LIMIT + 200);
    let p = out[0].result.metadata["spill_path"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(p).unwrap().len(), 20_000);
}

/// Records how many of its calls overlap.
struct Probe {
    decl: ToolDecl,
    running: Arc<AtomicU32>,
    peak: Arc<AtomicU32>,
}

impl Probe {
    fn new(name: &str, risk: Risk, running: Arc<AtomicU32>, peak: Arc<AtomicU32>) -> Self {
        let parameters = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        Self {
            decl: ToolDecl::new(name, "probe", parameters).risk(risk),
            running,
            peak,
        }
    }
}

#[async_trait]
impl Tool for Probe {
    fn decl(&self) -> &ToolDecl {
        &self.decl
    }
    async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(ToolOutput::new(""))
    }
}

#[tokio::test]
async fn read_only_calls_run_in_parallel_side_effects_alone() {
    let dir = tempfile::tempdir().unwrap();
    let running = Arc::new(AtomicU32::new(0));
    let (read_peak, write_peak) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let mut r = Registry::default();
    let (look, touch) = (Risk::ReadOnly, Risk::Write);
    r.register(Arc::new(Probe::new(
        "look",
        look,
        running.clone(),
        read_peak.clone(),
    )));
    r.register(Arc::new(Probe::new(
        "touch",
        touch,
        running.clone(),
        write_peak.clone(),
    )));
    let e = executor_with(r, None, None);
    let ctx = ctx_in(dir.path());
    let calls: Vec<ToolCall> = ["look", "look", "look", "touch", "touch", "look"]
        .iter()
        .enumerate()
        .map(|(i, n)| call(&i.to_string(), n, &format!("{{\"n\":{i}}}")))
        .collect();
    let out = e.execute(&calls, &all(&e), &ctx).await;
    assert!(out.iter().all(|o| o.result.ok));
    assert_eq!(
        read_peak.load(Ordering::SeqCst),
        3,
        "the three leading read-only calls overlap"
    );
    assert_eq!(
        write_peak.load(Ordering::SeqCst),
        1,
        "side-effect calls run alone"
    );
    // Side-effect calls keep the model's order.
    let b = executor();
    let order: Vec<ToolCall> = (1..=5)
        .map(|i| {
            call(
                &i.to_string(),
                "shell",
                &format!("{{\"command\":\"echo {i} >> order\"}}"),
            )
        })
        .collect();
    let out = b.execute(&order, &all(&b), &ctx).await;
    assert!(out.iter().all(|o| o.result.ok));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("order")).unwrap(),
        "1\n2\n3\n4\n5\n"
    );
}

/// Sleeps, then leaves a mark (which an aborted call never does).
struct Slow(Arc<std::sync::atomic::AtomicBool>);

#[async_trait]
impl Tool for Slow {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new("slow", "slow", json!({"type": "object"}))
                .risk(Risk::ReadOnly)
                .timeout(Duration::from_millis(200))
        });
        &DECL
    }
    async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_millis(400)).await;
        self.0.store(true, Ordering::SeqCst);
        Ok(ToolOutput::new("finished"))
    }
}

#[tokio::test]
async fn a_call_is_aborted_on_timeout_and_when_the_turn_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx_in(dir.path());
    // Timeout: the result says so, and the tool does not go on in the background.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut r = Registry::default();
    r.register(Arc::new(Slow(done.clone())));
    let e = executor_with(r, None, None);
    let out = e.execute(&[call("1", "slow", "{}")], &all(&e), &ctx).await;
    assert_eq!(out[0].result.error_kind, Some(ErrorKind::Timeout));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!done.load(Ordering::SeqCst), "the timed-out call ran on");
    // Cancellation: the executor's future is dropped mid-call (as `/stop` does).
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut r = Registry::default();
    r.register(Arc::new(Slow(done.clone())));
    let mut overrides = BTreeMap::new();
    overrides.insert(
        "slow".to_string(),
        ToolOverride {
            timeout_secs: Some(10),
            ..Default::default()
        },
    );
    let e = Executor::new(
        Arc::new(r),
        ExecutorOptions {
            store: None,
            secrets: vec![],
            spill_dir: None,
            overrides,
            policy: None,
        },
    );
    let allowed = all(&e);
    let calls = [call("1", "slow", "{}")];
    let cut = tokio::time::timeout(
        Duration::from_millis(100),
        e.execute(&calls, &allowed, &ctx),
    )
    .await;
    assert!(cut.is_err());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!done.load(Ordering::SeqCst), "the cancelled call ran on");
}

/// A side-effect tool whose question names what a file beside the turn (`world`) says now;
/// counts how often it was described and run.
struct Worldly {
    decl: ToolDecl,
    world: PathBuf,
    described: AtomicU32,
    ran: AtomicU32,
}

#[async_trait]
impl Tool for Worldly {
    fn decl(&self) -> &ToolDecl {
        &self.decl
    }
    fn describe(&self, args: &Value, _: &ToolContext) -> CallPlan {
        self.described.fetch_add(1, Ordering::SeqCst);
        let now = std::fs::read_to_string(&self.world).unwrap_or_default();
        CallPlan {
            consent: Some(format!("act on {now}")),
            always: true,
            ..CallPlan::of(&self.decl, args)
        }
    }
    async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.ran.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::new("acted"))
    }
}

/// The consent step's answer, as the trait gives it: whether the owner was asked, and what
/// something beside the turn writes into the world while they decide.
struct Answer {
    asked: bool,
    meanwhile: Option<(PathBuf, &'static str)>,
}

#[async_trait]
impl ConsentGate for Answer {
    async fn check(
        &self,
        _: &dyn Tool,
        _: &Value,
        _: &CallPlan,
        _: &mut ToolContext,
    ) -> Result<Consented, ToolResult> {
        if let Some((path, text)) = &self.meanwhile {
            std::fs::write(path, text).unwrap();
        }
        Ok(if self.asked {
            Consented::Asked
        } else {
            Consented::Unasked
        })
    }
}

/// A call the owner approved is described again right before it runs and refused when what it
/// would do changed meanwhile; a call nobody was asked about is described once.
#[tokio::test]
async fn an_approved_call_runs_only_as_it_was_approved() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world");
    for (asked, meanwhile, described, ran) in [
        (false, None, 1, 1),
        (true, None, 2, 1),
        (true, Some("B"), 2, 0),
    ] {
        std::fs::write(&world, "A").unwrap();
        let tool = Arc::new(Worldly {
            decl: ToolDecl::new("act", "acts", json!({"type": "object"})).risk(Risk::Write),
            world: world.clone(),
            described: AtomicU32::new(0),
            ran: AtomicU32::new(0),
        });
        let mut r = Registry::default();
        r.register(tool.clone());
        let meanwhile = meanwhile.map(|t| (world.clone(), t));
        let e = executor_with(r, None, None).with_gate(Arc::new(Answer { asked, meanwhile }));
        let out = e
            .execute(&[call("1", "act", "{}")], &all(&e), &ctx_in(dir.path()))
            .await;
        let case = format!("asked {asked}: {}", out[0].model_text);
        assert_eq!(tool.described.load(Ordering::SeqCst), described, "{case}");
        assert_eq!(tool.ran.load(Ordering::SeqCst), ran, "{case}");
        if ran == 0 {
            assert_eq!(out[0].result.error_kind, Some(ErrorKind::Denied), "{case}");
            assert!(
                out[0].model_text.contains("(was: act on A; now: act on B)")
                    && out[0].model_text.contains("nothing was done"),
                "{case}"
            );
        } else {
            assert!(out[0].result.ok, "{case}");
        }
    }
}

/// A side-effect tool whose question shows a time counted from now (as `schedule_create`'s
/// "first run" does).
struct Timed(ToolDecl);

#[async_trait]
impl Tool for Timed {
    fn decl(&self) -> &ToolDecl {
        &self.0
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        let first = ctx.services.clock.unix_secs() + 300;
        CallPlan {
            consent: Some(format!("first run at {first}")),
            ..CallPlan::of(&self.0, args)
        }
    }
    async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new("scheduled"))
    }
}

/// An owner who takes two minutes to say yes.
struct SlowYes(Arc<ethan_core::clock::ManualClock>);

#[async_trait]
impl ConsentGate for SlowYes {
    async fn check(
        &self,
        _: &dyn Tool,
        _: &Value,
        _: &CallPlan,
        _: &mut ToolContext,
    ) -> Result<Consented, ToolResult> {
        self.0.advance(Duration::from_secs(120));
        Ok(Consented::Asked)
    }
}

/// The time the owner took is no change of what the call does: a description counted from now
/// is read again on the clock of the question, and the approved call runs.
#[tokio::test]
async fn the_time_the_owner_took_does_not_refuse_an_approved_call() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ethan_core::clock::ManualClock::new(
        std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ));
    let mut r = Registry::default();
    let decl = ToolDecl::new("plan", "plans", json!({"type": "object"})).risk(Risk::Write);
    r.register(Arc::new(Timed(decl)));
    let e = executor_with(r, None, None).with_gate(Arc::new(SlowYes(clock.clone())));
    let mut ctx = ctx_in(dir.path());
    ctx.services.clock = clock.clone();
    let out = e.execute(&[call("1", "plan", "{}")], &all(&e), &ctx).await;
    assert!(out[0].result.ok, "{}", out[0].model_text);
    assert_eq!(out[0].model_text, "scheduled");
    use ethan_core::clock::Clock;
    assert_eq!(clock.unix_secs(), 1_800_000_120, "the real clock moved on");
}
