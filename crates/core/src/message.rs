//! The messages of a conversation in a provider-neutral form: what the store keeps and the
//! agent works with. A provider translates them to its wire format and back
//! ([`crate::provider::ModelProvider`]).
//!
//! - text: `role` + `content`;
//! - a tool call: an assistant message's [`ToolCall`]s (`id`, `name`, `arguments` — the model's
//!   JSON text, verbatim and possibly invalid; it is parsed by the tool executor, never here);
//! - a tool result: a `tool` message with `tool_call_id`;
//! - `opaque`: a per-provider value that must survive the round trip through the store and be
//!   given back to the same provider (e.g. a reasoning signature); other providers ignore it;
//! - `images`: pictures sent with a user message, for a model that can see them (OpenAI
//!   `image_url` content parts, Anthropic `image` blocks). They live only for the turn that
//!   received them: the field is never serialised and the store keeps only the text, which
//!   names where each picture was saved, so later turns do not send the bytes again.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod derived;
pub use derived::{Derived, Memo};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return None,
        })
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    /// The text; `None` for an assistant message that only calls tools.
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// On a `tool` message: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A provider's own data for this message, kept as it is (see the module doc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Value>,
    /// On a `tool` message: the call failed or was refused (Anthropic `tool_result.is_error`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// On a `user` message: pictures to show the model with the text (see the module doc).
    /// Never serialised, never stored.
    #[serde(skip)]
    pub images: Vec<ImagePart>,
    /// On a `user` message: when it was sent (Unix seconds), kept by the store as the row's
    /// `created_at`. The agent shows it to the model in front of the text, so the time a person
    /// wrote is part of their message and the prompt before it stays the same from turn to turn
    /// (a provider's prompt cache keeps matching).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<i64>,
    /// What the requests derived from this message once and reuse ([`Derived`]): set only by
    /// the session's kept window. Never serialised, never compared.
    #[serde(skip)]
    pub derived: Derived,
}

/// A picture for the model, as downloaded (not re-encoded).
#[derive(Clone, PartialEq)]
pub struct ImagePart {
    /// `image/jpeg`, `image/png`, `image/gif` or `image/webp`.
    pub mime: String,
    /// The bytes, shared (a turn's requests are built several times).
    pub data: std::sync::Arc<[u8]>,
    /// Where the picture was saved (for the model's `file_read` and the logs).
    pub path: String,
}

impl ImagePart {
    /// The type of a picture a model takes (JPEG, PNG, GIF, WebP), from its first bytes;
    /// `None` for anything else.
    pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
        if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some("image/jpeg")
        } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some("image/png")
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some("image/gif")
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some("image/webp")
        } else {
            None
        }
    }

    /// `data:<mime>;base64,<bytes>` (OpenAI `image_url.url`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.base64())
    }

    /// The bytes in standard base64 (Anthropic `source.data`).
    pub fn base64(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(&self.data)
    }
}

impl std::fmt::Debug for ImagePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImagePart")
            .field("mime", &self.mime)
            .field("bytes", &self.data.len())
            .field("path", &self.path)
            .finish()
    }
}

impl ChatMessage {
    pub fn system(text: impl Into<String>) -> Self {
        Self::plain(Role::System, text)
    }
    pub fn user(text: impl Into<String>) -> Self {
        Self::plain(Role::User, text)
    }
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::plain(Role::Assistant, text)
    }
    fn plain(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(text.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            opaque: None,
            is_error: false,
            images: Vec::new(),
            sent_at: None,
            derived: Derived::default(),
        }
    }
    /// A user message with pictures.
    pub fn user_with_images(text: impl Into<String>, images: Vec<ImagePart>) -> Self {
        Self {
            images,
            ..Self::user(text)
        }
    }
    /// A tool result for `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(tool_call_id.into()),
            opaque: None,
            is_error: false,
            images: Vec::new(),
            sent_at: None,
            derived: Derived::default(),
        }
    }
    /// A tool result for `tool_call_id` that reports a failure or refusal.
    pub fn tool_error(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::tool(tool_call_id, content)
        }
    }
}

/// A tool call the model proposed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The model's JSON text, verbatim.
    #[serde(default)]
    pub arguments: String,
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A tool on offer to the model: name, description and JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}
