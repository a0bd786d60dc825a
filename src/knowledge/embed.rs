//! Semantic search: embeddings from an OpenAI-compatible `POST {base_url}/embeddings` endpoint
//! (`knowledge.embeddings`), stored in the store's knowledge index as little-endian `f32` (normalised, so cosine
//! similarity is a dot product), and reciprocal rank fusion of the semantic and keyword lists.

use crate::config::EmbeddingsConfig;
use serde_json::{json, Value};
use std::time::Duration;

/// The model used when `knowledge.embeddings.model` is empty.
pub const DEFAULT_MODEL: &str = "text-embedding-3-small";
/// Texts per request.
pub const BATCH: usize = 32;
/// Longest text sent for one embedding, in characters (the rest of a long note is not embedded).
pub const MAX_TEXT_CHARS: usize = 6000;

/// Why an embedding request failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embeddings endpoint {url}: {message}")]
    Request { url: String, message: String },
    #[error("embeddings endpoint {url} answered HTTP {status}: {body}")]
    Http {
        url: String,
        status: u16,
        body: String,
    },
    #[error("embeddings endpoint {url} sent an unexpected answer: {message}")]
    Response { url: String, message: String },
}

/// A client of the embeddings endpoint.
#[derive(Clone)]
pub struct Embedder {
    client: reqwest::Client,
    url: String,
    api_key: String,
    model: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// `None` when `knowledge.embeddings.base_url` is empty (keyword search only).
    pub fn from_config(c: &EmbeddingsConfig) -> Option<Embedder> {
        let base = c.base_url.trim().trim_end_matches('/');
        if base.is_empty() {
            return None;
        }
        let model = match c.model.trim() {
            "" => DEFAULT_MODEL,
            m => m,
        };
        Some(Embedder::new(base, c.api_key.expose(), model))
    }

    /// A client for `{base_url}/embeddings`.
    pub fn new(base_url: &str, api_key: &str, model: &str) -> Embedder {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Embedder {
            client,
            url: format!("{}/embeddings", base_url.trim_end_matches('/')),
            api_key: api_key.to_string(),
            model: model.to_string(),
        }
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// One normalised vector per text, in order (batched by [`BATCH`]).
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.embed_batch(chunk).await?);
        }
        Ok(out)
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let input: Vec<String> = texts
            .iter()
            .map(|t| {
                let t: String = t.chars().take(MAX_TEXT_CHARS).collect();
                // Some servers refuse empty input.
                if t.trim().is_empty() {
                    " ".to_string()
                } else {
                    t
                }
            })
            .collect();
        let mut req = self
            .client
            .post(&self.url)
            .json(&json!({"model": self.model, "input": input}));
        if !self.api_key.is_empty() {
            req = req.bearer_auth(&self.api_key);
        }
        let resp = req.send().await.map_err(|e| EmbedError::Request {
            url: self.url.clone(),
            message: ethan_channels::net::describe(&e),
        })?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| EmbedError::Request {
            url: self.url.clone(),
            message: ethan_channels::net::describe(&e),
        })?;
        if !status.is_success() {
            return Err(EmbedError::Http {
                url: self.url.clone(),
                status: status.as_u16(),
                body: text.chars().take(300).collect(),
            });
        }
        let bad = |message: String| EmbedError::Response {
            url: self.url.clone(),
            message,
        };
        let v: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no `data` array".into()))?;
        if data.len() != texts.len() {
            return Err(bad(format!(
                "{} embeddings for {} inputs",
                data.len(),
                texts.len()
            )));
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for (pos, item) in data.iter().enumerate() {
            let index = item
                .get("index")
                .and_then(Value::as_u64)
                .map_or(pos, |i| i as usize);
            let vec: Vec<f32> = item
                .get("embedding")
                .and_then(Value::as_array)
                .ok_or_else(|| bad(format!("item {pos} has no `embedding` array")))?
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| bad(format!("item {pos} has a non-number in its embedding")))?;
            let vec = normalize(vec).ok_or_else(|| bad(format!("item {pos} is a zero vector")))?;
            match slots.get_mut(index) {
                Some(slot @ None) => *slot = Some(vec),
                _ => return Err(bad(format!("bad or repeated index {index}"))),
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }
}

/// `v / |v|`, or `None` for an empty, zero or non-finite vector.
pub fn normalize(mut v: Vec<f32>) -> Option<Vec<f32>> {
    let norm = v
        .iter()
        .map(|x| (*x as f64) * (*x as f64))
        .sum::<f64>()
        .sqrt();
    if v.is_empty() || !norm.is_finite() || norm == 0.0 {
        return None;
    }
    for x in &mut v {
        *x = (*x as f64 / norm) as f32;
    }
    Some(v)
}

/// Little-endian `f32` bytes.
pub fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`to_bytes`] (`None` when the length is not a multiple of 4).
pub fn from_bytes(b: &[u8]) -> Option<Vec<f32>> {
    b.len().is_multiple_of(4).then(|| {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

/// Cosine similarity of two normalised vectors (0 when the dimensions differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The `top` most similar of `vectors` to `query`, best first: `(id, similarity)`.
pub fn nearest(query: &[f32], vectors: &[(i64, Vec<f32>)], top: usize) -> Vec<(i64, f32)> {
    let mut scored: Vec<(i64, f32)> = vectors
        .iter()
        .filter(|(_, v)| v.len() == query.len())
        .map(|(id, v)| (*id, cosine(query, v)))
        .collect();
    ethan_core::sort::sort_by(&mut scored, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(top);
    scored
}

pub use crate::store::knowledge_query::{rrf, RRF_K};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_rank() {
        let a = normalize(vec![3.0, 4.0]).unwrap();
        assert_eq!(from_bytes(&to_bytes(&a)).unwrap(), a);
        assert!(from_bytes(&[0, 1, 2]).is_none());
        assert!(normalize(vec![0.0, 0.0]).is_none());
        assert!(normalize(vec![f32::NAN]).is_none());
        let vs = vec![
            (1, normalize(vec![1.0, 0.0]).unwrap()),
            (2, normalize(vec![0.6, 0.8]).unwrap()),
            (3, vec![1.0, 0.0, 0.0]),
        ];
        let near = nearest(&a, &vs, 5);
        assert_eq!(near.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 1]);
        assert!((near[0].1 - 1.0).abs() < 1e-6);
    }
}
