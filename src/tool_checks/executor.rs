//! The executor with the store: the replay guard across a restart, the audit rows of retried,
//! misnamed and panicking calls.

use super::{call, ctx_in};
use crate::store::Store;
use crate::tools::executor::{Executor, ExecutorOptions, CRASHED};
use crate::tools::registry::Registry;
use crate::tools::{ErrorKind, Risk, Tool, ToolContext, ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_core::store::StorageRef;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

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

fn all(e: &Executor) -> BTreeSet<String> {
    e.registry()
        .iter()
        .map(|t| t.decl().name.to_string())
        .collect()
}

/// Times out twice, then succeeds.
struct Flaky(AtomicU32);

#[async_trait]
impl Tool for Flaky {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "flaky",
                "flaky",
                json!({"type": "object", "properties": {"api_key": {"type": "string"}}}),
            )
            .risk(Risk::ReadOnly)
            .timeout(Duration::from_millis(100))
            .max_retries(2)
        });
        &DECL
    }
    async fn run(&self, _: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(ctx.attempt, n);
        if n <= 2 {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        Ok(ToolOutput::new(format!("done on attempt {n}")))
    }
}

/// Panics when called.
struct Boom;

#[async_trait]
impl Tool for Boom {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new("boom", "panics", json!({"type": "object"})).risk(Risk::ReadOnly)
        });
        &DECL
    }
    async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        panic!("boom went the tool");
    }
}

#[tokio::test]
async fn replayed_side_effect_call_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap().shared();
    let e = executor_with(
        crate::daemon::tool_setup::registry(&crate::config::Config::default()),
        Some(store.clone()),
        None,
    );
    let ctx = ctx_in(dir.path());
    let c = call(
        "1",
        "file_write",
        r#"{"path":"f","content":"x","append":true}"#,
    );
    let first = e.execute(std::slice::from_ref(&c), &all(&e), &ctx).await;
    assert!(first[0].result.ok);
    let again = e.execute(std::slice::from_ref(&c), &all(&e), &ctx).await;
    assert_eq!(again[0].result.error_kind, Some(ErrorKind::Denied));
    assert!(again[0].model_text.contains("replay refused"));
    assert_eq!(std::fs::read_to_string(dir.path().join("f")).unwrap(), "x");
    // A restarted daemon (new executor, same database) recognises the key too.
    let e2 = executor_with(
        crate::daemon::tool_setup::registry(&crate::config::Config::default()),
        Some(store.clone()),
        None,
    );
    let after_restart = e2.execute(std::slice::from_ref(&c), &all(&e2), &ctx).await;
    assert_eq!(after_restart[0].result.error_kind, Some(ErrorKind::Denied));
    // Another turn (trace) may do the same thing again.
    let mut other = ctx.clone();
    other.trace_id = "t2".into();
    assert!(e.execute(&[c], &all(&e), &other).await[0].result.ok);
    // Every proposal was audited, refused ones included.
    let audit = store.recent_audit(10, None).await.unwrap();
    assert_eq!(audit.len(), 4);
    assert_eq!(
        audit
            .iter()
            .filter(|a| a.error_kind.as_deref() == Some("denied"))
            .count(),
        2
    );
}

#[tokio::test]
async fn read_only_timeouts_are_retried_and_secrets_redacted_in_audit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap().shared();
    let mut r = Registry::default();
    r.register(Arc::new(Flaky(AtomicU32::new(0))));
    let e = executor_with(r, Some(store.clone()), None);
    let out = e
        .execute(
            &[call("1", "flaky", r#"{"api_key": "sk-argument-secret"}"#)],
            &all(&e),
            &ctx_in(dir.path()),
        )
        .await;
    assert!(out[0].result.ok, "{:?}", out[0].result);
    assert_eq!(out[0].attempts, 3);
    assert_eq!(out[0].model_text, "done on attempt 3");
    let audit = store.recent_audit(1, None).await.unwrap();
    assert_eq!(audit[0].attempt, 3);
    assert!(
        !audit[0].args.contains("sk-argument-secret"),
        "{}",
        audit[0].args
    );
    assert!(audit[0].args.contains("<redacted>"));
}

#[tokio::test]
async fn a_credential_sent_as_a_tool_name_is_redacted_in_audit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap().shared();
    let e = executor_with(Registry::default(), Some(store.clone()), None);
    let name = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let out = e
        .execute(&[call("1", name, "{}")], &all(&e), &ctx_in(dir.path()))
        .await;
    assert_eq!(out[0].result.error_kind, Some(ErrorKind::Validation));
    let audit = store.recent_audit(1, None).await.unwrap();
    assert!(!audit[0].tool.contains(name), "{}", audit[0].tool);
}

#[tokio::test]
async fn a_panicking_tool_yields_internal_and_its_batch_still_returns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "A").unwrap();
    let store = Store::open_in_memory().unwrap().shared();
    let mut r = crate::daemon::tool_setup::registry(&crate::config::Config::default());
    r.register(Arc::new(Boom));
    let e = executor_with(r, Some(store.clone()), None);
    // One batch of read-only calls, the panicking one in the middle.
    let calls = vec![
        call("1", "file_read", r#"{"path":"a"}"#),
        call("2", "boom", "{}"),
        call("3", "file_read", r#"{"path":"a"}"#),
    ];
    let out = e.execute(&calls, &all(&e), &ctx_in(dir.path())).await;
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].model_text, "A");
    assert_eq!(out[2].model_text, "A");
    assert_eq!(out[1].result.error_kind, Some(ErrorKind::Internal));
    assert!(
        out[1]
            .model_text
            .starts_with(&format!("Error (internal): {CRASHED};")),
        "{}",
        out[1].model_text
    );
    assert!(
        !out[1].model_text.contains("boom went"),
        "{}",
        out[1].model_text
    );
    // Audited like any failure.
    let audit = store.recent_audit(10, None).await.unwrap();
    assert_eq!(audit.len(), 3);
    let row = audit.iter().find(|a| a.tool == "boom").unwrap();
    assert_eq!(row.error_kind.as_deref(), Some("internal"));
    assert_eq!(row.attempt, 1);
}
