//! The Lark tools (`lark_calendar_events`, `lark_chat_messages`, `lark_message_send`) against a
//! fake Lark Open API: request paths and parameters, pagination, range splitting, user tokens
//! and their refresh, permission errors, and the owner-only, always-ask sending.

#[path = "../support/lark_openapi.rs"]
mod lark_openapi;

use async_trait::async_trait;
use ethan::config::{Config, Profile, Secret};
use ethan::provider::types::ToolCall;
use ethan::store::prelude::*;
use ethan::tools::executor::{ConsentGate, Consented, Executor, ExecutorOptions};
use ethan::tools::lark_calendar::LarkCalendarEvents;
use ethan::tools::lark_common::LarkClient;
use ethan::tools::lark_messages::LarkChatMessages;
use ethan::tools::lark_send::LarkMessageSend;
use ethan::tools::policy::{Audience, Policy};
use ethan::tools::{CallPlan, ErrorKind, Tool, ToolContext, ToolResult};
use ethan_channels::ChannelKind;
use lark_openapi::FakeOpenApi;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const TZ: &str = "Asia/Shanghai";

fn client(fake: &FakeOpenApi, user: &str, refresh: &str) -> Arc<LarkClient> {
    LarkClient::new(&fake.base_url(), "cli_test", "sekret", user, refresh).unwrap()
}

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let c = ToolContext::local(dir.path().to_path_buf());
    (dir, c)
}

fn event(id: &str, start: i64, title: &str) -> Value {
    json!({
        "event_id": id,
        "summary": title,
        "start_time": {"timestamp": start.to_string(), "timezone": TZ},
        "end_time": {"timestamp": (start + 1800).to_string(), "timezone": TZ},
        "location": {"name": "Room 1"},
        "event_organizer": {"display_name": "Ann"},
        "vchat": {"meeting_url": format!("https://vc.example/{id}")},
        "status": "confirmed"
    })
}

fn today_noon() -> i64 {
    let tz: chrono_tz::Tz = TZ.parse().unwrap();
    let d = chrono::Utc::now().with_timezone(&tz).date_naive();
    use chrono::TimeZone;
    tz.from_local_datetime(&d.and_hms_opt(12, 0, 0).unwrap())
        .unwrap()
        .timestamp()
}

#[tokio::test(flavor = "multi_thread")]
async fn agenda_without_a_user_token_reads_the_bots_calendar() {
    let fake = FakeOpenApi::start().await;
    let noon = today_noon();
    fake.set_events(vec![
        event("e2", noon + 3600, "Later"),
        event("e1", noon, "Standup"),
        event("e0", noon + 3 * 86_400, "Not today"),
    ]);
    let tool = LarkCalendarEvents::new(client(&fake, "", ""), Some(TZ.into()));
    let (_d, c) = ctx();
    let r: ethan::tools::ToolResult = tool.run(json!({"action": "agenda"}), &c).await.into();
    assert!(r.ok, "{r:?}");
    let primary = fake.calls_to("/calendars/primary");
    assert_eq!(primary.len(), 1);
    assert_eq!(primary[0].method, "POST");
    assert_eq!(primary[0].auth, "t-bot");
    let views = fake.calls_to("/events/instance_view");
    assert_eq!(views.len(), 1);
    assert_eq!(
        views[0].path,
        "/open-apis/calendar/v4/calendars/cal_primary/events/instance_view"
    );
    let s: i64 = views[0].query["start_time"].parse().unwrap();
    let e: i64 = views[0].query["end_time"].parse().unwrap();
    assert!(s <= noon && noon < e && e - s <= 25 * 3600, "{s} {e}");
    assert!(r.output.contains("BOT's own calendar"), "{}", r.output);
    // Oldest first, with every field.
    let i1 = r.output.find("Standup").unwrap();
    let i2 = r.output.find("Later").unwrap();
    assert!(i1 < i2);
    assert!(!r.output.contains("Not today"));
    for want in ["Room 1", "organiser: Ann", "https://vc.example/e1", "12:00"] {
        assert!(r.output.contains(want), "{want}: {}", r.output);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn long_ranges_are_split_and_merged() {
    let fake = FakeOpenApi::start().await;
    let start = 1_767_225_600; // 2026-01-01T00:00:00Z
    fake.set_events(vec![
        event("late", start + 45 * 86_400, "Late"),
        event("early", start + 86_400, "Early"),
    ]);
    let tool = LarkCalendarEvents::new(client(&fake, "", ""), Some(TZ.into()));
    let (_d, c) = ctx();
    let r: ethan::tools::ToolResult = tool
        .run(
            json!({"action": "list", "start_time": "2026-01-01T00:00:00Z", "end_time": start + 90 * 86_400}),
            &c,
        )
        .await.into();
    assert!(r.ok, "{r:?}");
    let views = fake.calls_to("/events/instance_view");
    assert_eq!(views.len(), 3, "90 days → 40 + 40 + 10");
    let bounds: Vec<(i64, i64)> = views
        .iter()
        .map(|v| {
            (
                v.query["start_time"].parse().unwrap(),
                v.query["end_time"].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(bounds[0].0, start);
    assert_eq!(bounds[0].1, bounds[1].0);
    assert_eq!(bounds[2].1, start + 90 * 86_400);
    assert!(bounds.iter().all(|(s, e)| e - s <= 40 * 86_400));
    let events = r.metadata["events"].as_array().unwrap();
    let titles: Vec<&str> = events
        .iter()
        .map(|e| e["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Early", "Late"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn user_token_is_used_refreshed_and_stored() {
    let fake = FakeOpenApi::start().await;
    // "u-old" is not accepted: the tool refreshes with the refresh token and retries.
    let tool = LarkCalendarEvents::new(client(&fake, "u-old", "r-1"), Some(TZ.into()));
    let (dir, mut c) = ctx();
    let store = ethan::store::Store::open(&dir.path().join("ethan.db")).unwrap();
    c.ethan_home = Some(dir.path().to_path_buf());
    c.services.store = Some(store.shared());
    let r: ethan::tools::ToolResult = tool.run(json!({"action": "agenda"}), &c).await.into();
    assert!(r.ok, "{r:?}");
    assert!(r.output.contains("your primary calendar"), "{}", r.output);
    assert_eq!(fake.refreshes(), 1);
    let refresh = fake.calls_to("/authen/v2/oauth/token");
    assert_eq!(refresh[0].body["grant_type"], "refresh_token");
    assert_eq!(refresh[0].body["refresh_token"], "r-1");
    assert_eq!(refresh[0].body["client_id"], "cli_test");
    let views = fake.calls_to("/events/instance_view");
    assert_eq!(views.last().unwrap().auth, "u-fresh-1");
    assert!(views[0].path.contains("cal_user"));
    let stored = store.kv_get("lark.user_token").await.unwrap().unwrap();
    assert!(
        stored.contains("u-fresh-1") && stored.contains("r-fresh-1"),
        "{stored}"
    );
    // A second call uses the refreshed token without another refresh.
    let r: ethan::tools::ToolResult = tool.run(json!({"action": "agenda"}), &c).await.into();
    assert!(r.ok);
    assert_eq!(fake.refreshes(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_scope_names_the_scope_to_add() {
    let fake = FakeOpenApi::start().await;
    fake.fail(
        "/open-apis/calendar/v4/calendars/primary",
        99991672,
        "Access denied. One of the following scopes is required: [calendar:calendar:readonly].",
    );
    let tool = LarkCalendarEvents::new(client(&fake, "", ""), Some(TZ.into()));
    let (_d, c) = ctx();
    let r: ethan::tools::ToolResult = tool.run(json!({"action": "agenda"}), &c).await.into();
    assert!(!r.ok);
    assert_eq!(r.error_kind, Some(ErrorKind::Dependency));
    let e = r.error.unwrap();
    for want in [
        "99991672",
        "lacks an API scope",
        "calendar:calendar:readonly",
        "developer console",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    assert_eq!(r.metadata["lark_code"], 99991672);

    // The same for the chat history, where the message names no scope: the tool's own.
    fake.fail("/open-apis/im/v1/messages", 99991672, "Access denied");
    let tool = LarkChatMessages::new(client(&fake, "", ""), Some(TZ.into()));
    let r: ethan::tools::ToolResult = tool.run(json!({"chat_id": "oc_1"}), &c).await.into();
    let e = r.error.unwrap();
    assert!(e.contains("im:message:readonly"), "{e}");
}

fn message(i: usize, sender: &str, msg_type: &str, content: Value) -> Value {
    json!({
        "message_id": format!("om_{i}"),
        "msg_type": msg_type,
        "create_time": (1_767_225_600_000i64 + i as i64 * 60_000).to_string(),
        "chat_id": "oc_chat",
        "sender": {"id": sender, "id_type": "open_id", "sender_type": if sender.starts_with("cli_") {"app"} else {"user"}},
        "body": {"content": content.to_string()},
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_history_pages_oldest_first_with_names_and_flat_text() {
    let fake = FakeOpenApi::start().await;
    fake.set_messages(vec![
        message(1, "ou_ann", "text", json!({"text": "first"})),
        message(
            2,
            "ou_bob",
            "post",
            json!({"title": "Plan", "content": [[{"tag": "text", "text": "rich "}, {"tag": "a", "text": "doc", "href": "https://d"}]]}),
        ),
        message(3, "cli_bot", "text", json!({"text": "bot says"})),
        message(4, "ou_ann", "text", json!({"text": "fourth"})),
        message(5, "ou_zed", "text", json!({"text": "last"})),
    ]);
    fake.set_members(vec![
        json!({"member_id": "ou_ann", "member_id_type": "open_id", "name": "Ann"}),
        json!({"member_id": "ou_bob", "member_id_type": "open_id", "name": "Bob"}),
    ]);
    let tool = LarkChatMessages::new(client(&fake, "", ""), Some(TZ.into()));
    let (_d, c) = ctx();
    let r: ethan::tools::ToolResult = tool
        .run(
            json!({"chat_id": "oc_chat", "page_size": 2, "start_time": 1_767_225_600, "end_time": "2026-01-02T00:00:00Z"}),
            &c,
        )
        .await.into();
    assert!(r.ok, "{r:?}");
    let pages = fake.calls_to("/open-apis/im/v1/messages");
    assert_eq!(pages.len(), 3, "5 messages, 2 per page");
    for p in &pages {
        assert_eq!(p.method, "GET");
        assert_eq!(p.query["container_id_type"], "chat");
        assert_eq!(p.query["container_id"], "oc_chat");
        assert_eq!(p.query["sort_type"], "ByCreateTimeAsc");
        assert_eq!(p.query["page_size"], "2");
        assert_eq!(p.query["start_time"], "1767225600");
        assert_eq!(p.query["end_time"], "1767312000");
    }
    assert!(!pages[0].query.contains_key("page_token"));
    assert_eq!(pages[1].query["page_token"], "2");
    assert_eq!(pages[2].query["page_token"], "4");
    let lines: Vec<&str> = r
        .output
        .lines()
        .skip(1)
        .filter(|l| l.starts_with('['))
        .collect();
    assert_eq!(lines.len(), 5, "{}", r.output);
    assert!(lines[0].ends_with("Ann: first"), "{}", lines[0]);
    assert!(lines[1].contains("Bob: "), "{}", lines[1]);
    assert!(
        r.output.contains("    rich [doc](https://d)"),
        "{}",
        r.output
    );
    assert!(lines[2].ends_with("(bot): bot says"), "{}", lines[2]);
    assert!(
        lines[4].ends_with("ou_zed: last"),
        "unknown names fall back to the id"
    );
    assert_eq!(fake.calls_to("/members").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn as_user_without_a_token_says_how_to_provide_one() {
    let fake = FakeOpenApi::start().await;
    let tool = LarkChatMessages::new(client(&fake, "", ""), Some(TZ.into()));
    let (_d, c) = ctx();
    let r: ethan::tools::ToolResult = tool
        .run(json!({"chat_id": "oc_chat", "as_user": true}), &c)
        .await
        .into();
    assert!(!r.ok);
    let e = r.error.unwrap();
    assert!(
        e.contains("channels.lark.user_access_token") && e.contains("user_refresh_token"),
        "{e}"
    );
    assert!(fake.calls_to("/im/v1/messages").is_empty());

    // With one, the call carries it.
    fake.accept_user_token("u-good");
    let tool = LarkChatMessages::new(client(&fake, "u-good", ""), Some(TZ.into()));
    let r: ethan::tools::ToolResult = tool
        .run(json!({"chat_id": "oc_chat", "as_user": true}), &c)
        .await
        .into();
    assert!(r.ok, "{r:?}");
    assert_eq!(fake.calls_to("/im/v1/messages")[0].auth, "u-good");
}

#[tokio::test(flavor = "multi_thread")]
async fn send_posts_text_and_cards_and_returns_the_message_id() {
    let fake = FakeOpenApi::start().await;
    let tool = LarkMessageSend::new(client(&fake, "", ""));
    let (_d, c) = ctx();
    let r: ethan::tools::ToolResult = tool
        .run(json!({"chat_id": "oc_chat", "text": "hello"}), &c)
        .await
        .into();
    assert!(r.ok, "{r:?}");
    assert!(r.output.contains("om_sent_1"));
    assert_eq!(r.metadata["message_id"], "om_sent_1");
    let sent = fake.calls_to("/open-apis/im/v1/messages");
    assert_eq!(sent[0].method, "POST");
    assert_eq!(sent[0].query["receive_id_type"], "chat_id");
    assert_eq!(sent[0].body["receive_id"], "oc_chat");
    assert_eq!(sent[0].body["msg_type"], "text");
    assert_eq!(sent[0].body["content"], r#"{"text":"hello"}"#);
    assert!(!sent[0].body["uuid"].as_str().unwrap().is_empty());

    let card =
        json!({"schema": "2.0", "body": {"elements": [{"tag": "markdown", "content": "hi"}]}});
    let r: ethan::tools::ToolResult = tool
        .run(json!({"open_id": "ou_ann", "card": card}), &c)
        .await
        .into();
    assert!(r.ok, "{r:?}");
    let sent = fake.calls_to("/open-apis/im/v1/messages");
    assert_eq!(sent[1].query["receive_id_type"], "open_id");
    assert_eq!(sent[1].body["msg_type"], "interactive");
    let content: Value = serde_json::from_str(sent[1].body["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, card);

    // Bad arguments and API errors.
    let r: ethan::tools::ToolResult = tool.run(json!({"text": "no target"}), &c).await.into();
    assert_eq!(r.error_kind, Some(ErrorKind::Validation));
    fake.fail(
        "/open-apis/im/v1/messages",
        230002,
        "Bot is not in the chat",
    );
    let r: ethan::tools::ToolResult = tool
        .run(json!({"chat_id": "oc_other", "text": "x"}), &c)
        .await
        .into();
    let e = r.error.unwrap();
    assert!(
        e.contains("230002") && e.contains("add the bot to the chat"),
        "{e}"
    );
}

fn lark_config() -> Config {
    let mut config = Config::default();
    config.channels.lark.app_id = "cli_test".into();
    config.channels.lark.app_secret = Secret::new("sekret");
    config.tools.profile = Profile::Full;
    config
}

#[test]
fn tools_are_registered_only_when_lark_is_configured() {
    let none = ethan::daemon::tool_setup::registry(&Config::default());
    assert!(none.get("lark_message_send").is_none());
    let r = ethan::daemon::tool_setup::registry(&lark_config());
    assert!(r.skipped().is_empty(), "{:?}", r.skipped());
    for name in [
        "lark_calendar_events",
        "lark_chat_messages",
        "lark_message_send",
    ] {
        assert!(r.get(name).is_some(), "{name}");
    }
}

#[test]
fn sending_is_owner_only_and_always_asks() {
    let config = lark_config();
    let r = ethan::daemon::tool_setup::registry(&config);
    let policy = Policy::from_config(&config.tools);
    let send = r.get("lark_message_send").unwrap();
    let non_owner = Audience {
        channel: ChannelKind::Lark,
        is_owner: false,
        unattended: false,
        allowed_tools: None,
    };
    let refusal = policy.refusal(send.as_ref(), &non_owner).unwrap();
    assert!(refusal.contains("only the bot's owner"), "{refusal}");
    let owner = Audience {
        is_owner: true,
        ..non_owner
    };
    assert!(policy.refusal(send.as_ref(), &owner).is_none());
    let args = json!({"chat_id": "oc_chat", "text": "hello team"});
    let c = ToolContext::local(std::env::temp_dir());
    assert!(send.describe(&args, &c).always);
    let ask = send.describe(&args, &c).consent.unwrap();
    assert!(
        ask.contains("oc_chat") && ask.contains("hello team"),
        "{ask}"
    );
    // The read tools never ask.
    let cal = r.get("lark_calendar_events").unwrap();
    assert!(cal
        .describe(&json!({"action": "agenda"}), &c)
        .consent
        .is_none());
}

/// A consent step that records what it is asked and answers as told.
struct Gate {
    asked: Mutex<Vec<(String, bool)>>,
    approve: bool,
}

#[async_trait]
impl ConsentGate for Gate {
    async fn check(
        &self,
        _: &dyn Tool,
        _: &Value,
        plan: &CallPlan,
        _: &mut ToolContext,
    ) -> Result<Consented, ToolResult> {
        let Some(what) = plan.consent.clone() else {
            return Ok(Consented::Unasked);
        };
        self.asked.lock().unwrap().push((what, plan.always));
        if self.approve {
            Ok(Consented::Asked)
        } else {
            Err(ToolResult::err(ErrorKind::Denied, "the owner declined"))
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_executor_refuses_non_owners_and_asks_the_owner_every_time() {
    let fake = FakeOpenApi::start().await;
    let mut config = lark_config();
    config.channels.lark.base_url = fake.base_url();
    let gate = Arc::new(Gate {
        asked: Mutex::new(Vec::new()),
        approve: true,
    });
    let executor = Executor::new(
        Arc::new(ethan::daemon::tool_setup::registry(&config)),
        ExecutorOptions {
            store: None,
            secrets: vec![],
            spill_dir: None,
            overrides: Default::default(),
            policy: Some(Policy::from_config(&config.tools)),
        },
    )
    .with_gate(gate.clone());
    let call = |id: &str| {
        ToolCall::new(
            id,
            "lark_message_send",
            r#"{"chat_id":"oc_chat","text":"hi"}"#,
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let mut base = ToolContext::local(dir.path().to_path_buf());
    base.channel = ChannelKind::Lark;
    base.is_owner = false;
    let allowed = ["lark_message_send".to_string()].into_iter().collect();
    let out = executor.execute(&[call("1")], &allowed, &base).await;
    assert!(!out[0].result.ok);
    assert_eq!(out[0].result.error_kind, Some(ErrorKind::Denied));
    assert!(gate.asked.lock().unwrap().is_empty());
    assert!(fake.calls_to("/im/v1/messages").is_empty(), "nothing sent");

    base.is_owner = true;
    base.trace_id = "turn-2".into();
    let out = executor.execute(&[call("2")], &allowed, &base).await;
    assert!(out[0].result.ok, "{:?}", out[0].result);
    base.trace_id = "turn-3".into();
    let out2 = executor.execute(&[call("3")], &allowed, &base).await;
    assert!(out2[0].result.ok, "{:?}", out2[0].result);
    let asked = gate.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "asked for each send");
    assert!(asked
        .iter()
        .all(|(what, always)| *always && what.contains("oc_chat")));
    assert_eq!(fake.calls_to("/im/v1/messages").len(), 2);
}
