//! JSON Schema handling for tool parameters: registration checks (a valid schema by the
//! `jsonschema` crate's meta-validation, and every `array` has `items`, recursively through
//! `properties`, `items`, `anyOf`, `oneOf`, `allOf`, `additionalProperties`, `$defs`) and argument
//! validation with every violation listed by its JSON path.
//!
//! Models (and some providers, e.g. OpenAI's strict mode) fail on arrays without `items`; that is
//! why it is checked even though JSON Schema allows it.

use serde_json::Value;

/// Check a tool's `parameters` schema; the error says what is wrong and where.
pub fn check_parameters(schema: &Value) -> Result<(), String> {
    if !schema.is_object() {
        return Err("parameters must be a JSON Schema object".into());
    }
    if let Err(e) = jsonschema::meta::validate(schema) {
        return Err(format!(
            "not a valid JSON Schema: {e} (at {})",
            e.instance_path
        ));
    }
    check_arrays(schema, "#")
}

fn is_array_type(t: Option<&Value>) -> bool {
    match t {
        Some(Value::String(s)) => s == "array",
        Some(Value::Array(a)) => a.iter().any(|v| v == "array"),
        _ => false,
    }
}

fn check_arrays(node: &Value, path: &str) -> Result<(), String> {
    let Value::Object(map) = node else {
        return Ok(());
    };
    if is_array_type(map.get("type"))
        && !map.contains_key("items")
        && !map.contains_key("prefixItems")
    {
        return Err(format!("the array at {path} has no `items`"));
    }
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(props)) = map.get(key) {
            for (name, sub) in props {
                check_arrays(sub, &format!("{path}/{key}/{name}"))?;
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(list)) = map.get(key) {
            for (i, sub) in list.iter().enumerate() {
                check_arrays(sub, &format!("{path}/{key}/{i}"))?;
            }
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
    ] {
        if let Some(sub @ Value::Object(_)) = map.get(key) {
            check_arrays(sub, &format!("{path}/{key}"))?;
        }
    }
    Ok(())
}

/// A compiled validator for one tool's arguments.
pub struct ArgsValidator {
    inner: jsonschema::Validator,
}

impl ArgsValidator {
    pub fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(|inner| Self { inner })
            .map_err(|e| format!("cannot compile the schema: {e}"))
    }

    /// `Ok` or one line per violation: `- <JSON path>: <message>`.
    pub fn validate(&self, args: &Value) -> Result<(), String> {
        if self.inner.is_valid(args) {
            return Ok(());
        }
        let mut lines: Vec<String> = self
            .inner
            .iter_errors(args)
            .map(|e| {
                let p = e.instance_path.to_string();
                let at = if p.is_empty() {
                    "(arguments)".to_string()
                } else {
                    format!("${}", p.replace('/', "."))
                };
                format!("- {at}: {e}")
            })
            .collect();
        lines.sort();
        lines.dedup();
        Err(lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arrays_need_items_everywhere() {
        assert!(check_parameters(&json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}})).is_ok());
        let e =
            check_parameters(&json!({"type": "object", "properties": {"a": {"type": "array"}}}))
                .unwrap_err();
        assert!(e.contains("#/properties/a"), "{e}");
        let e = check_parameters(&json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": ["array", "null"]}]}}})).unwrap_err();
        assert!(e.contains("anyOf/1"), "{e}");
        let e = check_parameters(&json!({"allOf": [{"properties": {"x": {"oneOf": [{"type": "array", "items": {"type": "array"}}]}}}]})).unwrap_err();
        assert!(e.contains("items"), "{e}");
    }

    #[test]
    fn invalid_schema_is_refused() {
        let e =
            check_parameters(&json!({"type": "object", "properties": {"a": {"type": "strnig"}}}))
                .unwrap_err();
        assert!(e.contains("not a valid JSON Schema"), "{e}");
        assert!(check_parameters(&json!("object")).is_err());
    }

    #[test]
    fn violations_are_listed_with_paths() {
        let v = ArgsValidator::compile(&json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "list": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["a", "b"]}
            },
            "required": ["n", "list"],
            "additionalProperties": false
        }))
        .unwrap();
        assert!(v.validate(&json!({"n": 1, "list": []})).is_ok());
        let e = v
            .validate(&json!({"n": true, "list": "[\"x\"]", "mode": "c", "extra": 1}))
            .unwrap_err();
        assert!(e.contains("$.n:") && e.contains("integer"), "{e}");
        assert!(e.contains("$.list:") && e.contains("array"), "{e}");
        assert!(e.contains("$.mode:"), "{e}");
        assert!(e.contains("extra"), "{e}");
        let e = v.validate(&json!({})).unwrap_err();
        assert!(e.contains("\"n\" is a required property"), "{e}");
    }
}
