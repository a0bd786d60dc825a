//! Credentials pasted into tool arguments, through the real binary (`ethan chat -m` with a
//! scripted model): redacted by their shape in the audit rows stored in SQLite and in the log,
//! wherever they sit in an argument value; the model's own results are untouched.

use crate::support::{run_cli, run_cli_with_env, ScriptedModel, Step, TestHome};
use serde_json::json;

const GITHUB: &str = "ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d";
const OPENAI: &str = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_-Ab3dEf6h";
const AWS: &str = "AKIAIOSFODNN7EXAMPLE";
const TELEGRAM: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
const PEM_BODY: &str = "MIIEowIBAAKCAQEA7bq9pastedkeymaterial";

#[tokio::test(flavor = "multi_thread")]
async fn pasted_credentials_are_redacted_in_audit_rows_and_the_log() {
    let home = TestHome::new();
    let pem = format!("-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----");
    let nested = json!({
        "steps": [
            {"run": format!("git push https://x:{GITHUB}@github.com/o/r")},
            {"env": {"NOTE": format!("the key is {OPENAI}")}},
        ],
        "attachment": pem,
        "comment": format!("bot {TELEGRAM}, aws {AWS}"),
    })
    .to_string();
    let missing = json!({ "path": format!("notes/{AWS}-{JWT}.txt") }).to_string();
    let malformed = format!(r#"{{"path": "{JWT}"#);
    let model = ScriptedModel::start(vec![
        Step::tool_calls(&[
            ("c1", "frobnicate", &nested),
            ("c2", "file_read", &missing),
            ("c3", "file_read", &malformed),
        ]),
        Step::text("all done"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-redaction-test\n  name: test-model\n",
        model.base_url()
    ));
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
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{log}");
    assert_eq!(model.requests().len(), 2, "{}", model.describe());

    let rows: Vec<(String, String, Option<String>)> = crate::support::store::rows(
        &home,
        "SELECT tool, args, error FROM audit ORDER BY id",
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
    assert_eq!(rows.len(), 3, "{rows:?}");
    let secrets = [
        GITHUB,
        OPENAI,
        AWS,
        TELEGRAM,
        JWT,
        PEM_BODY,
        "AAHdqTcvCH1vGWJx",
    ];
    for (tool, args, error) in &rows {
        for s in secrets {
            assert!(!args.contains(s), "{s} in the audit args of {tool}: {args}");
            let error = error.as_deref().unwrap_or_default();
            assert!(
                !error.contains(s),
                "{s} in the audit error of {tool}: {error}"
            );
        }
        assert!(args.contains("<redacted>"), "{tool}: {args}");
    }
    // What is not a credential stays readable.
    assert!(rows[0].1.contains("github.com/o/r"), "{}", rows[0].1);
    assert!(rows[0].1.contains("the key is <redacted>"), "{}", rows[0].1);
    for s in secrets {
        assert!(!log.contains(s), "{s} in the log: {log}");
    }
    let audit = run_cli(&home, &["audit", "-n", "10"], None);
    let text = String::from_utf8_lossy(&audit.stdout);
    assert!(audit.status.success());
    for s in secrets {
        assert!(!text.contains(s), "{s} in `ethan audit`: {text}");
    }
}
