//! Pictures a tool result names, shown to a model with `model.vision` as image parts of the
//! next request only (the history keeps the text, which says where each picture was saved).
//!
//! One path for every tool: a result names its pictures in its metadata, either one as
//! `{"image": <mime>, "path": …}` (`file_read` of a picture, `browser_page` `screenshot`) or
//! several as `{"images": [{"image": <mime>, "path": …}, …]}` (an MCP tool's image content).
//! Each is read again from its file, and shown only when its first bytes are the type it claims
//! and it fits `media.max_image_bytes` (the screenshot is made to fit it; a larger picture from
//! elsewhere stays a path in the text). A picture carries what the text of its result carries:
//! it is added after that result, so the turn is already marked as having seen outside text
//! (and private data) by then, exactly as for the result's text.

use ethan_core::message::{ChatMessage, ImagePart};
use serde_json::Value;

/// The (type, path) of one picture entry.
fn entry(v: &Value) -> Option<(&str, &str)> {
    Some((v.get("image")?.as_str()?, v.get("path")?.as_str()?))
}

/// The (type, path) pairs `metadata` names.
fn named(metadata: &Value) -> Vec<(&str, &str)> {
    // A result's picture list is the tool's own; a bounded number is looked at.
    let many = metadata
        .get("images")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(MAX_PER_RESULT)
        .filter_map(entry);
    entry(metadata).into_iter().chain(many).collect()
}

/// The most pictures taken from one tool result.
pub const MAX_PER_RESULT: usize = 8;

/// The pictures `metadata` names that a model with vision is shown; none without `vision`.
pub async fn of(metadata: &Value, vision: bool, max_bytes: u64) -> Vec<ImagePart> {
    if !vision {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (mime, path) in named(metadata) {
        let Ok(data) = tokio::fs::read(path).await else {
            continue;
        };
        if data.len() as u64 > max_bytes || ImagePart::sniff(&data) != Some(mime) {
            tracing::debug!("the picture {path} is not shown: over the limit or not a {mime}");
            continue;
        }
        out.push(ImagePart {
            mime: mime.to_string(),
            data: data.into(),
            path: path.to_string(),
        });
    }
    out
}

/// The user-role message that carries `pictures` (each with the tool that returned it) after
/// the tool results, for this request only. Its text begins with
/// [`crate::memory::provenance::PICTURE_NOTE`], so it is never read as the person's words.
pub fn message(pictures: Vec<(String, ImagePart)>) -> ChatMessage {
    let text: Vec<String> = pictures
        .iter()
        .map(|(tool, p)| {
            format!(
                "{}{tool}: {}]",
                crate::memory::provenance::PICTURE_NOTE,
                p.path
            )
        })
        .collect();
    ChatMessage::user_with_images(
        text.join(" "),
        pictures.into_iter().map(|(_, p)| p).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn only_a_vision_model_is_shown_pictures_that_are_what_they_claim_and_fit() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("a.png");
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend([0u8; 100]);
        std::fs::write(&png, &bytes).unwrap();
        let fake = dir.path().join("b.png");
        std::fs::write(&fake, b"<svg/>").unwrap();
        let p = |f: &std::path::Path| f.display().to_string();
        let meta = json!({"images": [
            {"image": "image/png", "path": p(&png)},
            {"image": "image/png", "path": p(&fake)},
            {"image": "image/jpeg", "path": p(&png)},
        ]});
        let shown = of(&meta, true, 1000).await;
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].path, p(&png));
        assert!(of(&meta, false, 1000).await.is_empty());
        assert!(of(&meta, true, 50).await.is_empty());
        let one = json!({"image": "image/png", "path": p(&png)});
        assert_eq!(of(&one, true, 1000).await.len(), 1);
        let m = message(vec![("browser_page".into(), shown[0].clone())]);
        let text = m.content.clone().unwrap_or_default();
        assert!(
            text.starts_with(crate::memory::provenance::PICTURE_NOTE)
                && text.contains("browser_page")
                && text.contains("a.png"),
            "{text}"
        );
    }
}
