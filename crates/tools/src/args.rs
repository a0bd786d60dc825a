//! Typed access to a call's arguments object, with errors phrased for the model.

use super::ErrorKind;
use crate::ToolError;
use serde_json::Value;

/// Required string field `key`.
pub fn req_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ToolError::new(
            ErrorKind::Validation,
            format!(
                "argument `{key}` must be a string, got {}",
                type_name(other)
            ),
        )),
        None => Err(ToolError::new(
            ErrorKind::Validation,
            format!("missing required argument `{key}` (string)"),
        )),
    }
}

/// Optional non-negative integer field `key`.
pub fn opt_u64(args: &Value, key: &str) -> Result<Option<u64>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
        Some(other) => Err(ToolError::new(
            ErrorKind::Validation,
            format!(
                "argument `{key}` must be a non-negative integer, got {}",
                type_name(other)
            ),
        )),
    }
}

/// Optional boolean field `key`.
pub fn opt_bool(args: &Value, key: &str) -> Result<Option<bool>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ToolError::new(
            ErrorKind::Validation,
            format!(
                "argument `{key}` must be a boolean, got {}",
                type_name(other)
            ),
        )),
    }
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
