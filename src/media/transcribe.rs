//! Speech to text through an OpenAI-compatible endpoint (`media.transcription`):
//! `POST {base_url}/audio/transcriptions`, `multipart/form-data` with `file` (the audio as
//! received, with its file name and type), `model` and `response_format=json`; the answer is
//! `{"text": "…"}` (OpenAI's Whisper API; Groq, a local whisper.cpp or faster-whisper server
//! answer the same). The `api_key` goes in `Authorization: Bearer` and is never logged.

use crate::config::TranscriptionConfig;
use serde_json::Value;
use std::time::Duration;

/// Time limit of one transcription.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// A configured transcription endpoint.
pub struct Transcriber {
    client: crate::egress::EgressClient,
    url: String,
    api_key: String,
    model: String,
}

impl std::fmt::Debug for Transcriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcriber")
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Transcriber {
    /// `None` when `media.transcription.base_url` is empty. Its requests pass a guard of
    /// `egress` (the daemon's).
    pub fn new(cfg: &TranscriptionConfig, egress: &crate::egress::Egress) -> Option<Self> {
        let base = cfg.base_url.trim().trim_end_matches('/');
        if base.is_empty() {
            return None;
        }
        // Through the egress guard: the configured endpoint (often a local whisper server) and
        // nothing else.
        let url = format!("{base}/audio/transcriptions");
        let guard = egress.guard(&[], std::sync::Arc::new(crate::egress::SystemLookup));
        let client = crate::egress::EgressClient::new(
            &guard,
            crate::egress::Route::Transcription,
            crate::egress::Endpoint::all_of([url.as_str()]),
            |b| b.connect_timeout(Duration::from_secs(10)).timeout(TIMEOUT),
        )
        .ok()?;
        Some(Self {
            client,
            url,
            api_key: cfg.api_key.expose().to_string(),
            model: cfg.model.trim().to_string(),
        })
    }

    /// The text spoken in `audio`; the error is a short sentence for the model and the log.
    pub async fn transcribe(
        &self,
        audio: &[u8],
        file_name: &str,
        mime: &str,
    ) -> Result<String, String> {
        let boundary = format!("ethan-{}", uuid::Uuid::new_v4().simple());
        let body = multipart(&boundary, &self.model, audio, file_name, mime);
        let mut req = self
            .client
            .post(&self.url)
            .header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body);
        if !self.api_key.is_empty() {
            req = req.bearer_auth(&self.api_key);
        }
        let resp = req.send().await.map_err(|e| match e {
            crate::egress::EgressError::Refused(r) => {
                format!("the transcription service was refused by the egress guard ({r})")
            }
            crate::egress::EgressError::Http(e) if e.is_timeout() => format!(
                "the transcription service took longer than {} s",
                TIMEOUT.as_secs()
            ),
            crate::egress::EgressError::Http(e) => format!(
                "the transcription service could not be reached ({})",
                e.without_url()
            ),
        })?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| format!("the transcription answer could not be read ({e})"))?;
        if !status.is_success() {
            let msg = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_default();
            return Err(format!(
                "the transcription service answered HTTP {}{}",
                status.as_u16(),
                if msg.is_empty() {
                    String::new()
                } else {
                    format!(": {}", msg.chars().take(200).collect::<String>())
                }
            ));
        }
        let v: Value = serde_json::from_str(&text)
            .map_err(|_| "the transcription answer is not JSON".to_string())?;
        match v.get("text").and_then(Value::as_str) {
            Some(t) => Ok(t.trim().to_string()),
            None => Err("the transcription answer has no text".into()),
        }
    }
}

/// A `multipart/form-data` body (RFC 7578) with the fields `model`, `response_format` and
/// `file`. The file name is reduced to safe characters (it goes inside a quoted header value).
fn multipart(boundary: &str, model: &str, audio: &[u8], file_name: &str, mime: &str) -> Vec<u8> {
    let name: String = file_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mime: String = mime
        .chars()
        .filter(|c| c.is_ascii_graphic() && *c != '"')
        .collect();
    let mut body = Vec::with_capacity(audio.len() + 512);
    for (field, value) in [("model", model), ("response_format", "json")] {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: {mime}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(audio);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_multipart_with_the_three_fields() {
        let b = multipart(
            "XB",
            "whisper-1",
            b"OggS\x00",
            "voice \"1\".ogg",
            "audio/ogg",
        );
        let s = String::from_utf8_lossy(&b);
        assert!(s.starts_with(
            "--XB\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
        ));
        assert!(s.contains("name=\"file\"; filename=\"voice__1_.ogg\"\r\nContent-Type: audio/ogg\r\n\r\nOggS\0\r\n--XB--\r\n"));
        assert!(s.contains("name=\"response_format\"\r\n\r\njson\r\n"));
    }
}
