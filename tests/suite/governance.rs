//! Tool governance through the real binary: `ethan chat -m` with a scripted model proposing a
//! wrong-typed argument, an unknown tool, an alias and a secret-bearing argument; the results
//! the model reads next, the audit table, and `ethan audit` / `ethan tools list`.

use crate::support::{run_cli, run_cli_with_env, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};

fn model_config(home: &TestHome, model: &ScriptedModel, extra: &str) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-governance-test\n  name: test-model\n{extra}",
        model.base_url()
    ));
}

fn tool_results(req: &Value) -> Vec<(String, String)> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_calls_come_back_as_text_and_are_audited() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::tool_calls(&[
            ("c1", "file_read", r#"{"path": 5}"#),
            ("c2", "frobnicate", r#"{}"#),
            ("c3", "bash", r#"{"command": "echo aliased-ok"}"#),
            (
                "c4",
                "shell",
                r#"{"command": "echo hi", "api_key": "sk-very-secret-arg"}"#,
            ),
            ("c5", "file_read", r#"{"path": "x""#),
        ]),
        Step::text("all done"),
    ])
    .await;
    model_config(&home, &model, "");
    let (out, home) = tokio::task::spawn_blocking(move || {
        let o = run_cli_with_env(
            &home,
            &["chat", "-m", "go"],
            None,
            &[("RUST_LOG", "ethan=debug")],
        );
        (o, home)
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "all done");

    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    let results: std::collections::HashMap<_, _> = tool_results(&reqs[1]).into_iter().collect();
    assert_eq!(results.len(), 5);
    let c1 = &results["c1"];
    assert!(
        c1.starts_with("Error (validation)") && c1.contains("$.path") && c1.contains("string"),
        "{c1}"
    );
    let c2 = &results["c2"];
    assert!(
        c2.starts_with("Error (validation)") && c2.contains("no tool named \"frobnicate\""),
        "{c2}"
    );
    assert!(
        c2.contains("file_read"),
        "the error lists the available tools: {c2}"
    );
    let c3 = &results["c3"];
    assert!(
        c3.contains("exit code: 0") && c3.contains("aliased-ok"),
        "{c3}"
    );
    let c4 = &results["c4"];
    assert!(
        c4.starts_with("Error (validation)") && c4.contains("api_key"),
        "{c4}"
    );
    let c5 = &results["c5"];
    assert!(c5.contains("not valid JSON"), "{c5}");
    model.assert_protocol_ok();

    // One audit row per proposal; the secret argument is redacted there and absent from logs.
    let rows: Vec<(String, String, Option<String>)> = crate::support::store::rows(
        &home,
        "SELECT tool, args, error_kind FROM audit ORDER BY id",
        &[],
    )
    .into_iter()
    .map(|r| {
        (
            r[0].clone().unwrap_or_default(),
            r[1].clone().unwrap_or_default(),
            r[2].clone(),
        )
    })
    .collect();
    assert_eq!(rows.len(), 5, "{rows:?}");
    let tools: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        tools,
        ["file_read", "frobnicate", "shell", "shell", "file_read"]
    );
    for (_, args, _) in &rows {
        assert!(!args.contains("sk-very-secret-arg"), "{args}");
    }
    assert!(rows[3].1.contains("<redacted>"));
    assert!(
        !stderr.contains("sk-very-secret-arg"),
        "secret in the log: {stderr}"
    );
    assert!(
        !stderr.contains("sk-governance-test"),
        "config secret in the log"
    );

    let audit = run_cli(&home, &["audit", "-n", "10"], None);
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(audit.status.success());
    assert!(
        text.contains("frobnicate") && text.contains("validation"),
        "{text}"
    );
    assert!(!text.contains("sk-very-secret-arg"));
}

#[tokio::test(flavor = "multi_thread")]
async fn find_tools_activates_deferred_tools_and_policy_denies() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::tool_call("f1", "find_tools", r#"{"query": "write a file"}"#),
        Step::tool_call(
            "w1",
            "file_write",
            r#"{"path": "out.txt", "content": "written"}"#,
        ),
        Step::tool_call("s1", "shell", r#"{"command": "echo should-not-run"}"#),
        Step::text("ok"),
    ])
    .await;
    model_config(&home, &model, "tools:\n  deny: [shell]\n");
    // The workspace lies under the system temp directory, which is no reason to skip consent:
    // the write is approved at the terminal prompt.
    let (out, home) = tokio::task::spawn_blocking(move || {
        (run_cli(&home, &["chat", "-m", "go"], Some("y\n")), home)
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reqs = model.requests();
    let names = |i: usize| -> Vec<String> {
        reqs[i]["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // Up front: the fast path (file_read; shell is denied) and find_tools.
    assert_eq!(names(0), ["file_read", "find_tools"]);
    let found = &tool_results(&reqs[1])[0].1;
    assert!(found.contains("file_write"), "{found}");
    assert!(
        names(1).contains(&"file_write".to_string()),
        "{:?}",
        names(1)
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("workspace/out.txt")).unwrap(),
        "written"
    );
    let denied = &tool_results(&reqs[3])[2].1;
    assert!(
        denied.starts_with("Error (denied)") && denied.contains("policy"),
        "{denied}"
    );

    let list = run_cli(&home, &["tools", "list", "--channel", "telegram"], None);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("find_tools"), "{text}");
    let shell_line = text.lines().find(|l| l.starts_with("shell")).unwrap();
    assert!(shell_line.contains(" no "), "{shell_line}");
    let _ = json!(null);
}
