//! HTTP client for `POST {base_url}/chat/completions` (OpenAI Chat Completions API, non-streaming)
//! and `GET {base_url}/models` (used by `ethan doctor`).

use super::types::{ChatMessage, Role, ToolCall, ToolSpec};
use super::{Completion, FinishReason, ModelProvider, ProviderError, MAX_RETRIES};
use crate::config::{ModelConfig, Secret};
use serde_json::{json, Value};
use std::time::Duration;

/// Chat Completions client. Cheap to clone.
#[derive(Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    base_url: String,
    api_key: Secret,
    model: String,
    timeout_secs: u64,
    /// First backoff delay; doubled per retry.
    backoff: Duration,
}

impl OpenAiClient {
    pub fn new(cfg: &ModelConfig) -> Result<Self, ProviderError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(cfg.timeout_secs))
            .build()
            .map_err(|e| ProviderError::Connect {
                url: cfg.base_url.clone(),
                message: e.to_string(),
            })?;
        Ok(Self {
            http,
            base_url: cfg.base_url.trim_end_matches('/').to_string(),
            api_key: cfg.api_key.clone(),
            model: cfg.name.clone(),
            timeout_secs: cfg.timeout_secs,
            backoff: Duration::from_millis(500),
        })
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let rb = self
            .http
            .request(method, format!("{}{}", self.base_url, path));
        if self.api_key.is_empty() {
            rb
        } else {
            rb.bearer_auth(self.api_key.expose())
        }
    }

    /// One completion, retried on transient failures.
    pub async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        let wire: Vec<Value> = messages.iter().map(to_wire).collect();
        let mut body = json!({ "model": self.model, "messages": wire });
        if !tools.is_empty() {
            body["tools"] = tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect();
        }
        let started = std::time::Instant::now();
        let observe = |outcome: &str| {
            crate::metrics::METRICS
                .model_latency
                .with_label_values(&[outcome])
                .observe(started.elapsed().as_secs_f64());
        };
        let mut attempt = 0;
        loop {
            let (result, retry_after) = self.complete_once(&body).await;
            match result {
                Ok(c) => {
                    observe("ok");
                    return Ok(c);
                }
                Err(e) if e.is_transient() && attempt < MAX_RETRIES => {
                    let wait = retry_after
                        .unwrap_or(self.backoff * 2u32.pow(attempt))
                        .min(Duration::from_secs(30));
                    tracing::warn!(
                        "model request failed ({e}); retry {}/{MAX_RETRIES} in {} ms",
                        attempt + 1,
                        wait.as_millis()
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => {
                    observe("error");
                    return Err(e);
                }
            }
        }
    }

    async fn complete_once(
        &self,
        body: &Value,
    ) -> (Result<Completion, ProviderError>, Option<Duration>) {
        let resp = match self
            .request(reqwest::Method::POST, "/chat/completions")
            .json(body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return (Err(self.transport_error(e)), None),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = match resp.text().await {
            Ok(t) => t,
            Err(e) => return (Err(self.transport_error(e)), None),
        };
        if !(200..300).contains(&status) {
            return (Err(classify_error(status, &text)), retry_after);
        }
        (parse_completion(&text), None)
    }

    fn transport_error(&self, e: reqwest::Error) -> ProviderError {
        if e.is_timeout() {
            ProviderError::Timeout(self.timeout_secs)
        } else if e.is_connect() {
            ProviderError::Connect {
                url: self.base_url.clone(),
                message: e.to_string(),
            }
        } else {
            // A body cut off midway, a reset connection, …
            ProviderError::BadResponse(e.to_string())
        }
    }

    /// `GET {base_url}/models`: whether the endpoint answers and accepts the key.
    pub async fn check(&self) -> Result<String, ProviderError> {
        let resp = self
            .request(reqwest::Method::GET, "/models")
            .send()
            .await
            .map_err(|e| self.transport_error(e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        if (200..300).contains(&status) {
            Ok(format!("{} answers (model {})", self.base_url, self.model))
        } else {
            Err(classify_error(status, &text))
        }
    }
}

/// The `error.message` of an OpenAI-style error body, else the body itself (shortened).
fn error_message(text: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let msg = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let msg = msg.unwrap_or_else(|| text.to_string());
    let mut s: String = msg.chars().take(300).collect();
    if s.len() < msg.len() {
        s.push('…');
    }
    s
}

fn classify_error(status: u16, text: &str) -> ProviderError {
    let message = error_message(text);
    let lower = text.to_ascii_lowercase();
    if status == 400
        && (lower.contains("context_length_exceeded")
            || lower.contains("maximum context length")
            || lower.contains("context length")
            || lower.contains("too many tokens"))
    {
        return ProviderError::ContextLength(message);
    }
    if status == 401 || status == 403 {
        return ProviderError::Auth { status, message };
    }
    ProviderError::Http { status, message }
}

/// A message in the Chat Completions wire shape: `role`, `content` (`null` beside tool calls),
/// `tool_calls[]{id, type: "function", function{name, arguments}}`, `tool_call_id`. The
/// neutral `opaque` field is not sent: this API has none.
fn to_wire(m: &ChatMessage) -> Value {
    let mut v = json!({"role": m.role.as_str(), "content": m.content});
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

/// The assistant message of an answer, from the wire shape ([`to_wire`]).
fn from_wire(v: &Value) -> Result<ChatMessage, String> {
    let role = match v.get("role") {
        None | Some(Value::Null) => Role::Assistant,
        Some(Value::String(r)) => Role::parse(r).ok_or_else(|| format!("unknown role {r:?}"))?,
        Some(other) => return Err(format!("role is not a string: {other}")),
    };
    let content = match v.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(other) => return Err(format!("content is not a string: {other}")),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = v.get("tool_calls").filter(|c| !c.is_null()) {
        let calls = calls
            .as_array()
            .ok_or_else(|| "tool_calls is not a list".to_string())?;
        for (i, c) in calls.iter().enumerate() {
            let text = |field: &Value| -> Result<String, String> {
                match field {
                    Value::Null => Ok(String::new()),
                    Value::String(s) => Ok(s.clone()),
                    other => Err(format!("tool_calls[{i}]: expected a string, got {other}")),
                }
            };
            let f = c
                .get("function")
                .ok_or_else(|| format!("tool_calls[{i}] has no function"))?;
            tool_calls.push(ToolCall {
                id: text(c.get("id").unwrap_or(&Value::Null))?,
                name: text(f.get("name").unwrap_or(&Value::Null))?,
                arguments: text(f.get("arguments").unwrap_or(&Value::Null))?,
            });
        }
    }
    Ok(ChatMessage {
        role,
        content,
        tool_calls,
        tool_call_id: v
            .get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        opaque: None,
    })
}

#[async_trait::async_trait]
impl ModelProvider for OpenAiClient {
    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        OpenAiClient::complete(self, messages, tools).await
    }
}

fn parse_completion(text: &str) -> Result<Completion, ProviderError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ProviderError::BadResponse(format!("not JSON ({e})")))?;
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| ProviderError::BadResponse("no choices[0] in the answer".into()))?;
    let mut message = from_wire(
        choice
            .get("message")
            .ok_or_else(|| ProviderError::BadResponse("no choices[0].message".into()))?,
    )
    .map_err(|e| ProviderError::BadResponse(format!("choices[0].message: {e}")))?;
    // Some servers omit the id of a tool call; every call needs one for its result.
    for (i, c) in message.tool_calls.iter_mut().enumerate() {
        if c.id.is_empty() {
            c.id = format!("call_{i}_{}", uuid::Uuid::new_v4().simple());
        }
    }
    Ok(Completion {
        message,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(FinishReason::parse),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_errors() {
        let ctx = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            classify_error(400, ctx),
            ProviderError::ContextLength(_)
        ));
        assert!(matches!(
            classify_error(401, "{}"),
            ProviderError::Auth { .. }
        ));
        let e = classify_error(503, r#"{"error":{"message":"overloaded"}}"#);
        assert!(e.is_transient());
        assert!(e.to_string().contains("overloaded"));
        assert!(!classify_error(400, "bad").is_transient());
    }

    #[test]
    fn parses_tool_calls_and_garbage() {
        let ok = r#"{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"c1","type":"function","function":{"name":"file_read","arguments":"{\"path\":\"a\"}"}}]}}]}"#;
        let c = parse_completion(ok).unwrap();
        assert_eq!(c.message.tool_calls[0].name, "file_read");
        assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls));
        assert!(!c.truncated());
        let cut = r#"{"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"The first half"}}]}"#;
        let c = parse_completion(cut).unwrap();
        assert!(c.truncated());
        assert_eq!(c.message.content.as_deref(), Some("The first half"));
        assert!(matches!(
            parse_completion("<html>"),
            Err(ProviderError::BadResponse(_))
        ));
        assert!(matches!(
            parse_completion(r#"{"choices":[]}"#),
            Err(ProviderError::BadResponse(_))
        ));
    }
}
