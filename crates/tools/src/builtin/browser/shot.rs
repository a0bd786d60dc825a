//! `browser_page{action: screenshot}`: the tab's viewport as a picture, saved under
//! `$ETHAN_HOME/browser/screenshots/` and named in the result's metadata (`image`, `path`), so
//! a model with `model.vision` is shown it with the next request (the agent's `pictures`);
//! another model is told where the file is.
//!
//! The picture is made to fit the model's limit (`media.max_image_bytes`, [`BrowserHub`]'s
//! image limit) by the browser itself, never by decoding it here: a PNG when it fits, else a
//! JPEG at falling quality, then the viewport scaled down (`Page.captureScreenshot` with a
//! `clip` of scale ½, ¼). What still does not fit is saved and named, but not shown.

use super::hub::{BrowserHub, Tab};
use crate::{ErrorKind, ToolContext};
use crate::{ToolError, ToolOutput};
use chromiumoxide::cdp::browser_protocol::page::{CaptureScreenshotFormat, Viewport};
use chromiumoxide::page::ScreenshotParams;
use serde_json::json;

/// The attempts, in order: (JPEG quality or `None` for PNG, scale of the viewport).
const ATTEMPTS: &[(Option<i64>, f64)] = &[
    (None, 1.0),
    (Some(80), 1.0),
    (Some(60), 1.0),
    (Some(60), 0.5),
    (Some(50), 0.25),
];

/// The picture as (bytes, MIME type): the first attempt that fits `limit` bytes, else the
/// smallest made.
async fn capture(tab: &Tab, limit: u64) -> Result<(Vec<u8>, &'static str), String> {
    let mut smallest: Option<(Vec<u8>, &'static str)> = None;
    for &(quality, scale) in ATTEMPTS {
        let mut params = ScreenshotParams::builder();
        params = match quality {
            None => params.format(CaptureScreenshotFormat::Png),
            Some(q) => params.format(CaptureScreenshotFormat::Jpeg).quality(q),
        };
        if scale < 1.0 {
            let m = tab.page.layout_metrics().await.map_err(|e| e.to_string())?;
            let v = &m.css_visual_viewport;
            params = params.clip(Viewport {
                x: v.page_x,
                y: v.page_y,
                width: v.client_width,
                height: v.client_height,
                scale,
            });
        }
        let bytes = tab
            .page
            .screenshot(params.build())
            .await
            .map_err(|e| e.to_string())?;
        let mime = if quality.is_none() {
            "image/png"
        } else {
            "image/jpeg"
        };
        if bytes.len() as u64 <= limit {
            return Ok((bytes, mime));
        }
        if smallest.as_ref().is_none_or(|(b, _)| bytes.len() < b.len()) {
            smallest = Some((bytes, mime));
        }
    }
    smallest.ok_or_else(|| "no picture was made".into())
}

pub(crate) async fn screenshot(
    hub: &BrowserHub,
    tab: &Tab,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let limit = hub.image_limit();
    let (bytes, mime) = match capture(tab, limit).await {
        Ok(p) => p,
        Err(e) => {
            return Err(ToolError::new(
                ErrorKind::Dependency,
                format!("the screenshot failed: {e}"),
            ))
        }
    };
    let dir = super::home(ctx).join("browser").join("screenshots");
    let name = format!(
        "{}-{}.{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f"),
        &ctx.execution_id.chars().take(8).collect::<String>(),
        if mime == "image/png" { "png" } else { "jpg" }
    );
    let path = dir.join(name);
    let saved = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, &bytes));
    crate::spill::keep_within(&dir, crate::spill::SAVED_PICTURES_BYTES);
    if let Err(e) = saved {
        return Err(ToolError::new(
            ErrorKind::Internal,
            format!(
                "the screenshot could not be saved to {}: {e}",
                path.display()
            ),
        ));
    }
    let url = tab.page.url().await.ok().flatten().unwrap_or_default();
    let fits = bytes.len() as u64 <= limit;
    let shown = if fits {
        "A model that can see pictures is shown it next; otherwise use browser_page \
         {action: read} for the page's text."
    } else {
        "It is too large to be shown to the model; use browser_page {action: read} for the \
         page's text."
    };
    let mut meta = json!({"path": path.display().to_string(), "bytes": bytes.len()});
    if fits {
        meta["image"] = json!(mime);
    }
    Ok(ToolOutput::new(format!(
        "A screenshot of {url} was taken ({} bytes, {mime}) and saved to {}. {shown}",
        bytes.len(),
        path.display()
    ))
    .with_metadata(meta))
}
