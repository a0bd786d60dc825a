//! `lark_message_send`: send a Lark message (text or card) to a chat or a user, as the bot or
//! as the configured user. A side effect: the owner is asked every time (`consent_always`),
//! and non-owners never get it (policy). Returns the new message id.
//!
//! `POST /open-apis/im/v1/messages?receive_id_type=chat_id|open_id`
//! `{receive_id, msg_type: text|interactive, content: <JSON string>, uuid}`.

use crate::lark_common::{api_error, LarkClient, HOW_TO_USER_TOKEN};
use crate::{CallPlan, ToolDecl, ToolError, ToolOutput};
use crate::{ErrorKind, Tool, ToolContext};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;

const SCOPES: &[&str] = &["im:message:send_as_bot", "im:message"];

pub struct LarkMessageSend {
    client: Arc<LarkClient>,
}

impl LarkMessageSend {
    pub fn new(client: Arc<LarkClient>) -> Self {
        Self { client }
    }
}

/// `(receive_id_type, receive_id, msg_type, content)` from the arguments.
fn request(args: &Value) -> Result<(&'static str, String, &'static str, String), String> {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    let (id_type, id) = match (s("chat_id"), s("open_id")) {
        (Some(c), None) => ("chat_id", c),
        (None, Some(o)) => ("open_id", o),
        _ => return Err("give exactly one of chat_id (oc_…) or open_id (ou_…)".into()),
    };
    let card = args.get("card").filter(|c| !c.is_null());
    let (msg_type, content) = match (s("text"), card) {
        (Some(t), None) => ("text", json!({ "text": t }).to_string()),
        (None, Some(c)) => {
            let c = match c {
                Value::String(s) => serde_json::from_str::<Value>(s)
                    .map_err(|e| format!("card is not JSON: {e}"))?,
                v => v.clone(),
            };
            if !c.is_object() {
                return Err("card must be a card JSON object".into());
            }
            ("interactive", c.to_string())
        }
        _ => return Err("give exactly one of text or card".into()),
    };
    Ok((id_type, id.to_string(), msg_type, content))
}

#[async_trait]
impl Tool for LarkMessageSend {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "lark_message_send",
                "Send a Lark message: text or a card (JSON) to a chat (chat_id) or a person (open_id), as \
                 the bot or, with as_user=true, as the configured user. Asks the owner every time. \
                 Returns the message id.",
                json!({
                    "type": "object",
                    "properties": {
                        "chat_id": {"type": "string"},
                        "open_id": {"type": "string"},
                        "text": {"type": "string"},
                        "card": {"type": ["object", "string"], "description": "card JSON (1.0 or schema 2.0)"},
                        "as_user": {"type": "boolean", "default": false}
                    },
                    "additionalProperties": false
                }),
            )
            // Its output is the sent message's id.
            .not_private()
            .no_compress()
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            consent: self.consent_check(args, ctx),
            egress: self.egress(args, ctx),
            always: self.consent_always(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (id_type, id, msg_type, content) = match request(&args) {
            Ok(r) => r,
            Err(e) => return Err(ToolError::new(ErrorKind::Validation, e)),
        };
        let as_user = args.get("as_user").and_then(Value::as_bool) == Some(true);
        if as_user && !self.client.user.is_configured() {
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!(
                    "as_user needs a Lark user access token and none is configured: \
                     {HOW_TO_USER_TOKEN}. Or send with as_user=false (as the bot)."
                ),
            ));
        }
        // One uuid per call: a retried request is delivered at most once.
        let uuid: String = if ctx.execution_id.is_empty() {
            uuid::Uuid::new_v4().simple().to_string()
        } else {
            ctx.execution_id.chars().take(50).collect()
        };
        let body = json!({
            "receive_id": id,
            "msg_type": msg_type,
            "content": content,
            "uuid": uuid,
        });
        let r = self
            .client
            .call(
                as_user,
                reqwest::Method::POST,
                "/open-apis/im/v1/messages",
                &[("receive_id_type", id_type)],
                Some(&body),
                ctx,
            )
            .await;
        match r {
            Ok(v) => {
                let mid = v
                    .pointer("/data/message_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                Ok(ToolOutput::new(format!("sent (message_id {mid})"))
                    .with_metadata(json!({"message_id": mid, "receive_id": id})))
            }
            Err(e) => api_error("sending the message", &e, SCOPES, as_user),
        }
    }
}

impl LarkMessageSend {
    fn consent_check(&self, args: &Value, _ctx: &ToolContext) -> Option<String> {
        let who = if args.get("as_user").and_then(Value::as_bool) == Some(true) {
            "as you"
        } else {
            "as the bot"
        };
        Some(match request(args) {
            Ok((t, id, m, content)) => {
                // In full: what is cut off could be the private part.
                let shown = if m == "text" {
                    args.get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                } else {
                    format!("a card: {content}")
                };
                format!("send a Lark message {who} to {t} {id}: {shown}")
            }
            Err(_) => format!("send a Lark message {who}: {args}"),
        })
    }
    /// The message leaves for its recipient; shown in full by `consent_check`.
    fn egress(&self, args: &Value, _ctx: &ToolContext) -> Option<crate::Egress> {
        let (t, id, _, _) = request(args).ok()?;
        Some(crate::Egress {
            destination: format!("a Lark message to {t} {id}"),
            scope: format!("egress:lark:{t}:{id}"),
        })
    }
    /// Every message is its own decision: never remembered for the session.
    fn consent_always(&self, _args: &Value, _ctx: &ToolContext) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_need_one_target_and_one_body() {
        assert!(request(&json!({"chat_id": "oc_1", "text": "hi"})).is_ok());
        assert!(request(&json!({"chat_id": "oc_1", "open_id": "ou_1", "text": "hi"})).is_err());
        assert!(request(&json!({"chat_id": "oc_1"})).is_err());
        let (t, _, m, c) =
            request(&json!({"open_id": "ou_1", "card": "{\"schema\":\"2.0\"}"})).unwrap();
        assert_eq!((t, m), ("open_id", "interactive"));
        assert_eq!(c, "{\"schema\":\"2.0\"}");
    }
}
