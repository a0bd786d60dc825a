//! An MCP tool's image content (`{"type": "image", "data": <base64>, "mimeType": …}`, MCP spec
//! 2025-06-18 "Tools › Tool Result") as pictures the model with `model.vision` is shown: each
//! image whose bytes are the picture type it claims (JPEG, PNG, GIF, WebP) is saved under
//! `$ETHAN_HOME/mcp/images/` and named in the result's metadata (`images`), which the agent
//! reads as it reads `file_read`'s picture ([`crate::agent::pictures`]); the text says where
//! each was saved, so a model without vision can name the file.
//!
//! The picture is the server's content as much as its text is: it reaches the model after the
//! result, whose tool already marked the turn as having seen outside text and private data.
//! At most [`MAX_PICTURES`] per result and [`MAX_BYTES`] each are kept, and the folder holds at
//! most [`spill::SAVED_PICTURES_BYTES`] (the oldest go first): a server cannot fill the disk.
//! The agent shows only those within `media.max_image_bytes`.

use crate::tools::spill;
use crate::tools::ToolOutput;
use base64::Engine;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The most images kept from one result.
pub const MAX_PICTURES: usize = 8;
/// The largest image kept, decoded bytes (5 MB, the default `media.max_image_bytes`: a larger
/// one would never be shown).
pub const MAX_BYTES: usize = 5_000_000;

/// The images of a `CallToolResult` (as JSON) whose bytes are the type they claim, decoded.
pub fn decode(result: &Value) -> Vec<(&'static str, Vec<u8>)> {
    let Some(items) = result.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("image"))
        .filter_map(|i| {
            let data = i.get("data")?.as_str()?;
            // Base64 is 4/3 of the bytes: a longer text is not decoded at all.
            if data.len() > MAX_BYTES / 3 * 4 + 4 {
                return None;
            }
            let clean: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(clean)
                .ok()?;
            let mime = ethan_core::message::ImagePart::sniff(&bytes)?;
            (i.get("mimeType").and_then(Value::as_str) == Some(mime)).then_some((mime, bytes))
        })
        .take(MAX_PICTURES)
        .collect()
}

fn extension(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        _ => "webp",
    }
}

/// Save `pictures` under `home/mcp/images/` (names from `stem`) and name them in `result`'s
/// metadata and text. A picture that cannot be saved is left out, with a log line.
pub fn attach(
    mut result: ToolOutput,
    pictures: Vec<(&'static str, Vec<u8>)>,
    home: &Path,
    stem: &str,
) -> ToolOutput {
    if pictures.is_empty() {
        return result;
    }
    let dir = home.join("mcp").join("images");
    let mut saved: Vec<(&str, PathBuf)> = Vec::new();
    for (i, (mime, bytes)) in pictures.into_iter().enumerate() {
        let path = dir.join(format!(
            "{}-{stem}-{i}.{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f"),
            extension(mime)
        ));
        match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, &bytes)) {
            Ok(()) => saved.push((mime, path)),
            Err(e) => tracing::warn!("an MCP image could not be saved to {}: {e}", path.display()),
        }
    }
    spill::keep_within(&dir, spill::SAVED_PICTURES_BYTES);
    saved.retain(|(_, p)| p.exists());
    if saved.is_empty() {
        return result;
    }
    let paths: Vec<String> = saved.iter().map(|(_, p)| p.display().to_string()).collect();
    result.text.push_str(&format!(
        "\n[The images were saved to {}. A model that can see pictures is shown them next.]",
        paths.join(", ")
    ));
    let images: Vec<Value> = saved
        .iter()
        .map(|(mime, p)| json!({"image": mime, "path": p.display().to_string()}))
        .collect();
    if !result.metadata.is_object() {
        result.metadata = json!({});
    }
    result.metadata["images"] = Value::Array(images);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    #[test]
    fn only_images_that_are_what_they_claim_are_kept_and_saved() {
        let v = json!({"content": [
            {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
            {"type": "image", "data": PNG_B64, "mimeType": "image/jpeg"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "image", "data": "***", "mimeType": "image/png"},
            {"type": "audio", "data": PNG_B64, "mimeType": "image/png"},
            {"type": "text", "text": "x"},
        ]});
        let pics = decode(&v);
        assert_eq!(pics.len(), 1);
        assert_eq!(pics[0].0, "image/png");
        let dir = tempfile::tempdir().unwrap();
        let r = attach(ToolOutput::new("x"), pics, dir.path(), "call1");
        let images = r.metadata["images"].as_array().unwrap();
        assert_eq!(images.len(), 1);
        let path = images[0]["path"].as_str().unwrap();
        assert!(path.starts_with(&dir.path().join("mcp/images").display().to_string()));
        assert!(path.ends_with(".png"));
        assert!(r.text.contains(path), "{}", r.text);
        assert_eq!(
            ethan_core::message::ImagePart::sniff(&std::fs::read(path).unwrap()),
            Some("image/png")
        );
        assert!(decode(&json!({"content": 5})).is_empty());
    }
}
