//! The shell through the executor and the real consent gate.

use super::{call, ctx_in};
use crate::tools::shell::Shell;
use crate::tools::ToolContext;
use std::time::Duration;

/// A daemon's home with a secret in its config and spill folders, the context's workspace under it.
fn daemon_home() -> (tempfile::TempDir, ToolContext) {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("workspace");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "api_key: sk-SANDBOXED-SECRET\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.path().join("spill")).unwrap();
    std::fs::write(home.path().join("spill/x.txt"), "sk-SANDBOXED-SECRET").unwrap();
    std::fs::write(ws.join("notes.txt"), "visible notes").unwrap();
    let mut ctx = ctx_in(&ws);
    ctx.ethan_home = Some(home.path().to_path_buf());
    (home, ctx)
}

/// Through the executor and the real consent gate (a web session, approved on its event
/// stream): each call's verdict is worked out once, on a thread that is not the runtime's,
/// although `consent_check`, `consent_always` and `run` all use it — and once more for each call
/// the owner was asked about, right before it runs (the executor checks that what was approved
/// is still what the call does).
#[tokio::test]
async fn the_verdict_is_worked_out_once_per_call_and_again_after_an_approval_off_the_runtime_thread(
) {
    use crate::consent::{owners::Owners, Consent};
    use crate::tools::executor::{Executor, ExecutorOptions};
    use std::sync::Arc;

    let (_home, mut ctx) = daemon_home();
    // No sandbox: every command asks, and a protected path asks every time.
    let shell = Shell::new(30).with_sandbox(false);
    let seen = shell.verdict_threads();
    let mut registry = crate::tools::registry::Registry::default();
    registry.register(Arc::new(shell));
    let store = crate::store::Store::open_in_memory().unwrap().shared();
    let consent = Arc::new(Consent::new(
        Owners::new(&Default::default(), store.clone()),
        Duration::from_secs(30),
        None,
    ));
    let executor = Executor::new(
        Arc::new(registry),
        ExecutorOptions {
            store: Some(store),
            secrets: vec![],
            spill_dir: None,
            overrides: Default::default(),
            policy: None,
        },
    )
    .with_gate(consent.clone());
    // Approve every request once, as the web client would.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    ctx.channel = ethan_core::ChannelKind::Web;
    ctx.events = Some(tx);
    let approver = ethan_core::task::spawn(async move {
        let mut asked = Vec::new();
        while let Some(ev) = rx.recv().await {
            if let crate::agent::TurnEvent::ConsentRequest {
                request_id, always, ..
            } = ev
            {
                asked.push(always);
                let ack = consent
                    .decide(&ethan_channels::ApprovalDecision {
                        channel: ethan_core::ChannelKind::Web,
                        request_id,
                        choice: ethan_channels::ApprovalChoice::Once,
                        user_id: "web".into(),
                        chat_id: String::new(),
                    })
                    .await;
                assert!(ack.accepted, "{}", ack.toast);
            }
        }
        asked
    });
    let calls = [
        call("1", "shell", r#"{"command":"echo hello"}"#),
        call("2", "shell", r#"{"command":"cat ../config.yaml"}"#),
    ];
    let allowed = ["shell".to_string()].into();
    let out = executor.execute(&calls, &allowed, &ctx).await;
    assert!(out[0].result.ok, "{:?}", out[0].result);
    assert!(out[0].model_text.contains("hello"), "{}", out[0].model_text);
    // Approved as an always-ask call, the protected read runs outside the sandbox.
    assert!(out[1].result.ok, "{:?}", out[1].result);
    assert!(
        out[1].model_text.contains("sk-SANDBOXED-SECRET"),
        "{}",
        out[1].model_text
    );
    drop(ctx);
    assert_eq!(approver.await.unwrap(), [false, true]);
    let seen = seen.lock().unwrap().clone();
    // Both calls asked (no sandbox): each verdict worked out before asking and once more
    // after the yes.
    assert_eq!(
        seen.len(),
        4,
        "one verdict per call, one more for each approved call before it ran"
    );
    let here = std::thread::current().id();
    assert!(
        seen.iter().all(|t| *t != here),
        "worked out on the runtime thread"
    );
}
