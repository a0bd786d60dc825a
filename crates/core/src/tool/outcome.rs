//! What a tool's `run` returns ([`ToolOutput`] or [`ToolError`]) and the one shape the executor
//! records and the model reads ([`ToolResult`]), converted at one place.

use super::ErrorKind;
use serde::Serialize;
use serde_json::Value;

/// A call that did its work: the text the model reads, structured detail (exit code, sizes,
/// spill path) and a card for the channel to render.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolOutput {
    pub text: String,
    pub metadata: Value,
    pub ui: Option<Value>,
}

impl ToolOutput {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            metadata: Value::Null,
            ui: None,
        }
    }
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }
    pub fn with_ui(mut self, ui: Value) -> Self {
        self.ui = Some(ui);
        self
    }
}

/// A call that failed: why ([`ErrorKind`]), a message the model can act on, and what the call
/// produced before it failed (a command's output, detail), where there is any.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolError {
    pub kind: ErrorKind,
    pub message: String,
    pub output: String,
    pub metadata: Value,
}

impl ToolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            output: String::new(),
            metadata: Value::Null,
        }
    }
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }
    pub fn with_output(mut self, output: impl Into<String>) -> Self {
        self.output = output.into();
        self
    }
}

/// The outcome of one call as the executor records it and the model reads it. `output` is the
/// tool's text; `metadata` is structured detail (exit code, sizes, spill path); `ui` carries a
/// card for the channel to render. A tool returns `Result<ToolOutput, ToolError>`; this shape
/// comes from that ([`From`]) or from the executor's own refusals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    pub ok: bool,
    pub output: String,
    pub error: Option<String>,
    pub error_kind: Option<ErrorKind>,
    pub metadata: Value,
    pub ui: Option<Value>,
}

impl ToolResult {
    pub fn ok(output: impl Into<String>) -> Self {
        ToolOutput::new(output).into()
    }

    pub fn err(kind: ErrorKind, message: impl Into<String>) -> Self {
        ToolError::new(kind, message).into()
    }

    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }

    /// The text the model reads as the tool message content.
    pub fn model_text(&self) -> String {
        if self.ok {
            self.output.clone()
        } else {
            let kind = self.error_kind.map(ErrorKind::as_str).unwrap_or("internal");
            let mut s = format!("Error ({kind}): {}", self.error.as_deref().unwrap_or(""));
            if !self.output.is_empty() {
                s.push('\n');
                s.push_str(&self.output);
            }
            s
        }
    }
}

impl From<ToolOutput> for ToolResult {
    fn from(o: ToolOutput) -> Self {
        Self {
            ok: true,
            output: o.text,
            error: None,
            error_kind: None,
            metadata: o.metadata,
            ui: o.ui,
        }
    }
}

impl From<ToolError> for ToolResult {
    fn from(e: ToolError) -> Self {
        Self {
            ok: false,
            output: e.output,
            error: Some(e.message),
            error_kind: Some(e.kind),
            metadata: e.metadata,
            ui: None,
        }
    }
}

impl From<Result<ToolOutput, ToolError>> for ToolResult {
    fn from(r: Result<ToolOutput, ToolError>) -> Self {
        match r {
            Ok(o) => o.into(),
            Err(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The model reads an output as is, and an error as its kind, message and any output.
    #[test]
    fn model_text_of_outputs_and_errors() {
        let ok: ToolResult = Ok(ToolOutput::new("hi").with_metadata(json!({"n": 1}))).into();
        assert!(ok.ok && ok.error.is_none() && ok.metadata == json!({"n": 1}));
        assert_eq!(ok.model_text(), "hi");
        let e: ToolResult = Err(ToolError::new(ErrorKind::Dependency, "down")).into();
        assert_eq!(e.model_text(), "Error (dependency): down");
        let e: ToolResult = ToolError::new(ErrorKind::Timeout, "slow")
            .with_output("partial")
            .into();
        assert_eq!(e.model_text(), "Error (timeout): slow\npartial");
        assert_eq!(e.error_kind, Some(ErrorKind::Timeout));
    }
}
