//! A database written by an older release (schema 6, tool calls stored in the Chat Completions
//! wire shape) opens, is migrated once to the provider-neutral history, and its session goes on:
//! the next model request carries the old turns, tool calls included, in the wire shape.

use crate::support::{run_cli, ScriptedModel, Step, TestHome};
use serde_json::json;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store/ethan-schema6.db"
);

fn user_version(db: &std::path::Path) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_6_database_is_migrated_and_its_session_continues() {
    let home = TestHome::new();
    if crate::support::store::skip_unless_sqlite(
        &home,
        "its subject is an old SQLite file's schema",
    ) {
        return;
    }
    let db = home.path().join("ethan.db");
    std::fs::copy(FIXTURE, &db).unwrap();
    assert_eq!(user_version(&db), 6);
    let model = ScriptedModel::start(vec![Step::text("still here")]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n",
        model.base_url()
    ));
    let (out, home) = tokio::task::spawn_blocking(move || {
        (
            run_cli(
                &home,
                &["chat", "--session", "fixture", "-m", "and now?"],
                None,
            ),
            home,
        )
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("still here"));
    assert!(user_version(&home.path().join("ethan.db")) >= 7);

    let req = model.last_request().expect("the model was asked");
    let messages = req["messages"].as_array().unwrap();
    let texts: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .map(crate::support::model::without_sent_time)
        .collect();
    assert!(texts.contains(&"what do my notes say?"), "{req}");
    assert!(texts.contains(&"The notes say: fixture notes"), "{req}");
    // The stored tool call comes back in the wire shape, paired with its result.
    let call = messages
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .expect("the old tool call is in the history");
    assert_eq!(
        call["tool_calls"][0],
        json!({"id": "call_fx1", "type": "function",
               "function": {"name": "file_read", "arguments": "{\"path\": \"notes.txt\"}"}})
    );
    assert!(messages
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_fx1"));
    assert_eq!(texts.last(), Some(&"and now?"));
    model.assert_protocol_ok();

    // Stored once in the neutral form: no row keeps the wire shape.
    let c = rusqlite::Connection::open(home.path().join("ethan.db")).unwrap();
    let wire_rows: i64 = c
        .query_row(
            "SELECT count(*) FROM messages WHERE tool_calls LIKE '%\"function\"%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(wire_rows, 0);
}
