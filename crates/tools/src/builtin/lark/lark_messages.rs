//! `lark_chat_messages`: the history of a Lark chat, oldest first.
//!
//! `GET /open-apis/im/v1/messages?container_id_type=chat&container_id=…&start_time&end_time&
//! sort_type=ByCreateTimeAsc&page_size&page_token`, following `page_token` while `has_more`
//! (at most [`MAX_MESSAGES`]). Sender names come from the message's mentions and from
//! `GET /open-apis/im/v1/chats/{chat_id}/members` when the app may read them (otherwise the
//! open_id is shown). Posts are flattened to text. Read-only.

use crate::lark_common::{api_failure, segment, LarkClient, HOW_TO_USER_TOKEN};
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::LazyLock;

/// The most messages one call returns.
pub const MAX_MESSAGES: usize = 200;
const SCOPES: &[&str] = &["im:message:readonly", "im:message.group_msg"];

pub struct LarkChatMessages {
    client: Arc<LarkClient>,
    tz: Option<String>,
}

impl LarkChatMessages {
    pub fn new(client: Arc<LarkClient>, tz: Option<String>) -> Self {
        Self { client, tz }
    }
}

/// The text of one message item.
pub fn flatten(item: &Value) -> String {
    let msg_type = item.get("msg_type").and_then(Value::as_str).unwrap_or("");
    let raw = item
        .pointer("/body/content")
        .and_then(Value::as_str)
        .unwrap_or("");
    let content: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let mut text = match msg_type {
        "text" => content
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        "post" => ethan_lark_api::content::post_to_text(&content, &[], None).0,
        "interactive" => {
            let title = content
                .pointer("/header/title/content")
                .or_else(|| content.get("title"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if title.is_empty() {
                "[card]".to_string()
            } else {
                format!("[card: {title}]")
            }
        }
        t => ethan_lark_api::content::placeholder(t, &content),
    };
    for m in item
        .get("mentions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = m.get("key").and_then(Value::as_str).unwrap_or("");
        let name = m.get("name").and_then(Value::as_str).unwrap_or("");
        if !key.is_empty() && !name.is_empty() {
            text = text.replace(key, &format!("@{name}"));
        }
    }
    if item.get("deleted").and_then(Value::as_bool) == Some(true) {
        text = "[deleted]".into();
    }
    text
}

#[async_trait]
impl Tool for LarkChatMessages {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "lark_chat_messages",
                "Read the history of a Lark chat (chat_id oc_…), oldest first, optionally between \
                 start_time and end_time (Unix seconds or ISO 8601). as_user=true reads as the \
                 configured user instead of the bot. Read-only.",
                json!({
                    "type": "object",
                    "properties": {
                        "chat_id": {"type": "string", "minLength": 1},
                        "start_time": {"type": ["string", "integer"]},
                        "end_time": {"type": ["string", "integer"]},
                        "page_size": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20},
                        "as_user": {"type": "boolean", "default": false}
                    },
                    "required": ["chat_id"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            .timeout(std::time::Duration::from_secs(60))
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let tz = ethan_tz::effective_zone(None, self.tz.as_deref())
            .unwrap_or_else(|_| ethan_tz::system_zone());
        let req = self.request(&args, &tz)?;
        let history = self.history(&req, ctx).await?;
        let names = self.sender_names(&req, &history.items, ctx).await;
        Ok(render(&req, &history, &names, &tz))
    }
}

/// One call's arguments, checked.
struct Request {
    chat_id: String,
    as_user: bool,
    page_size: String,
    /// `start_time` and `end_time` as given (Unix seconds).
    bounds: Vec<(&'static str, String)>,
}

/// The messages read, oldest first.
struct History {
    items: Vec<Value>,
    pages: u32,
    /// More messages exist past the last one read.
    truncated: bool,
}

impl LarkChatMessages {
    fn request(&self, args: &Value, tz: &Tz) -> Result<Request, ToolError> {
        let chat_id = args
            .get("chat_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string();
        if chat_id.is_empty() {
            return Err(ToolError::new(ErrorKind::Validation, "chat_id is required"));
        }
        let as_user = args.get("as_user").and_then(Value::as_bool) == Some(true);
        if as_user && !self.client.user.is_configured() {
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!(
                    "as_user needs a Lark user access token and none is configured: \
                     {HOW_TO_USER_TOKEN}. Or call again with as_user=false to read as the bot."
                ),
            ));
        }
        let page_size = args
            .get("page_size")
            .and_then(Value::as_u64)
            .unwrap_or(20)
            .clamp(1, 50)
            .to_string();
        let mut bounds = Vec::new();
        for key in ["start_time", "end_time"] {
            if let Some(v) = args.get(key).filter(|v| !v.is_null()) {
                let t = crate::lark_calendar::parse_time(v, tz)
                    .map_err(|e| ToolError::new(ErrorKind::Validation, format!("{key}: {e}")))?;
                bounds.push((key, t.to_string()));
            }
        }
        Ok(Request {
            chat_id,
            as_user,
            page_size,
            bounds,
        })
    }

    /// The chat's messages, page after page while there are more (at most [`MAX_MESSAGES`]).
    async fn history(&self, req: &Request, ctx: &ToolContext) -> Result<History, ToolError> {
        let mut items: Vec<Value> = Vec::new();
        let mut page_token = String::new();
        let mut pages = 0;
        let mut more;
        loop {
            let mut q: Vec<(&str, &str)> = vec![
                ("container_id_type", "chat"),
                ("container_id", &req.chat_id),
                ("sort_type", "ByCreateTimeAsc"),
                ("page_size", &req.page_size),
            ];
            for (k, v) in &req.bounds {
                q.push((k, v));
            }
            if !page_token.is_empty() {
                q.push(("page_token", &page_token));
            }
            let v = self
                .client
                .call(
                    req.as_user,
                    reqwest::Method::GET,
                    "/open-apis/im/v1/messages",
                    &q,
                    None,
                    ctx,
                )
                .await
                .map_err(|e| api_failure("reading the chat history", &e, SCOPES, req.as_user))?;
            pages += 1;
            items.extend(
                v.pointer("/data/items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            more = v.pointer("/data/has_more").and_then(Value::as_bool) == Some(true);
            page_token = v
                .pointer("/data/page_token")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if !more || page_token.is_empty() || items.len() >= MAX_MESSAGES || pages >= 50 {
                break;
            }
        }
        let truncated = more && !page_token.is_empty();
        items.truncate(MAX_MESSAGES);
        Ok(History {
            items,
            pages,
            truncated,
        })
    }

    /// Senders' names by open_id: mentions first, then the chat's member list when a sender is
    /// still unnamed (best effort: a failure leaves the open_id shown).
    async fn sender_names(
        &self,
        req: &Request,
        items: &[Value],
        ctx: &ToolContext,
    ) -> HashMap<String, String> {
        let mut names: HashMap<String, String> = HashMap::new();
        for m in items
            .iter()
            .filter_map(|i| i.get("mentions").and_then(Value::as_array))
            .flatten()
        {
            if let (Some(id), Some(name)) = (
                m.get("id").and_then(Value::as_str),
                m.get("name").and_then(Value::as_str),
            ) {
                names.insert(id.to_string(), name.to_string());
            }
        }
        let needs_lookup = items.iter().any(|i| {
            i.pointer("/sender/sender_type").and_then(Value::as_str) == Some("user")
                && i.pointer("/sender/id")
                    .and_then(Value::as_str)
                    .is_some_and(|id| !names.contains_key(id))
        });
        if needs_lookup {
            self.member_names(req, &mut names, ctx).await;
        }
        names
    }

    /// The chat's members' names into `names` (at most 10 pages; stops at the first failure).
    async fn member_names(
        &self,
        req: &Request,
        names: &mut HashMap<String, String>,
        ctx: &ToolContext,
    ) {
        let path = format!("/open-apis/im/v1/chats/{}/members", segment(&req.chat_id));
        let mut token = String::new();
        for _ in 0..10 {
            let mut q = vec![("member_id_type", "open_id"), ("page_size", "100")];
            if !token.is_empty() {
                q.push(("page_token", &token));
            }
            let Ok(v) = self
                .client
                .call(req.as_user, reqwest::Method::GET, &path, &q, None, ctx)
                .await
            else {
                break;
            };
            for m in v
                .pointer("/data/items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(id), Some(name)) = (
                    m.get("member_id").and_then(Value::as_str),
                    m.get("name").and_then(Value::as_str),
                ) {
                    names.insert(id.to_string(), name.to_string());
                }
            }
            token = v
                .pointer("/data/page_token")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if v.pointer("/data/has_more").and_then(Value::as_bool) != Some(true)
                || token.is_empty()
            {
                break;
            }
        }
    }
}

/// The messages as lines `[time] sender: text` for the model, and as a list in the metadata.
fn render(
    req: &Request,
    history: &History,
    names: &HashMap<String, String>,
    tz: &Tz,
) -> ToolOutput {
    let mut lines = Vec::new();
    let mut list = Vec::new();
    for i in &history.items {
        let sender_id = i
            .pointer("/sender/id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let sender = match i.pointer("/sender/sender_type").and_then(Value::as_str) {
            Some("app") => "(bot)".to_string(),
            _ => names
                .get(sender_id)
                .cloned()
                .unwrap_or_else(|| sender_id.to_string()),
        };
        let ms = i
            .get("create_time")
            .and_then(|t| {
                t.as_str()
                    .and_then(|s| s.parse::<i64>().ok())
                    .or(t.as_i64())
            })
            .unwrap_or(0);
        let at = Utc
            .timestamp_millis_opt(ms)
            .single()
            .map(|t| t.with_timezone(tz).format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default();
        let text = flatten(i);
        // Continuation lines of rich text are indented so each message starts a line.
        lines.push(format!("[{at}] {sender}: {}", text.replace('\n', "\n    ")));
        list.push(json!({
            "message_id": i.get("message_id").cloned().unwrap_or(Value::Null),
            "sender": sender,
            "sender_id": sender_id,
            "time": at,
            "text": text,
        }));
    }
    let mut out = format!(
        "{} messages in {} (oldest first, as {}):",
        list.len(),
        req.chat_id,
        if req.as_user { "the user" } else { "the bot" }
    );
    for l in &lines {
        out.push('\n');
        out.push_str(l);
    }
    if history.truncated {
        out.push_str(&format!(
            "\n(more messages exist; narrow the range with start_time/end_time — at most \
             {MAX_MESSAGES} per call)"
        ));
    }
    ToolOutput::new(out).with_metadata(json!({
        "chat_id": req.chat_id,
        "pages": history.pages,
        "truncated": history.truncated,
        "messages": list,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_and_mentions_flatten() {
        let post = json!({
            "msg_type": "post",
            "body": {"content": json!({"title": "T", "content": [[{"tag": "text", "text": "hello "}, {"tag": "a", "text": "link", "href": "https://x"}]]}).to_string()}
        });
        let t = flatten(&post);
        assert!(t.contains("hello") && t.contains("link"), "{t}");
        let text = json!({
            "msg_type": "text",
            "body": {"content": json!({"text": "@_user_1 hi"}).to_string()},
            "mentions": [{"key": "@_user_1", "id": "ou_1", "name": "Ann"}]
        });
        assert_eq!(flatten(&text), "@Ann hi");
    }
}
