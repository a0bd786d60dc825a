//! Whether an OpenAI-compatible endpoint answers as the chat will use it, for `ethan init` and
//! `ethan doctor`:
//! 1. `GET {base_url}/models`: the models the server lists, spending nothing. When it lists the
//!    configured model, the endpoint is good.
//! 2. Otherwise (no list: HTTP 404; or a list without the model), one completion of one token,
//!    `POST {base_url}/chat/completions` with `max_tokens: 1`: the request every chat makes.
//!
//! A 404 on both means the URL is not the API's base: when `{base_url}/v1` answers, the
//! failure says "did you mean …/v1?". A key refused (401/403) is named as such; a network
//! failure is named as one (no such host, connection refused, timed out, TLS failed) and never
//! as a refused key. The Anthropic provider keeps its own check
//! ([`ethan_core::provider::ModelProvider::check`]).

use crate::config::{ModelEndpoint, Secret};
use serde_json::{json, Value};
use std::time::Duration;

/// An endpoint that answers: what to say about it, and the models it lists (empty when it has
/// no list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub line: String,
    pub models: Vec<String>,
}

/// Why an endpoint does not answer as the chat will use it, in one sentence, and the base URL
/// that does answer when `/v1` was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub message: String,
    pub suggestion: Option<String>,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for Failed {
    fn from(message: String) -> Self {
        Failed {
            message,
            suggestion: None,
        }
    }
}

/// How one request failed.
#[derive(Debug)]
enum Failure {
    /// The server answered with this status (and its error text).
    Http(u16, String),
    /// The request did not get an answer: the cause in plain words.
    Network(String),
}

impl Failure {
    fn describe(&self, url: &str) -> String {
        match self {
            Failure::Http(401 | 403, m) => format!("{url} refuses the API key ({m})"),
            Failure::Http(status, m) if m.is_empty() => format!("{url} answers HTTP {status}"),
            Failure::Http(status, m) => format!("{url} answers HTTP {status}: {m}"),
            Failure::Network(cause) => format!("network error reaching {url}: {cause}"),
        }
    }
}

/// A request to an endpoint.
struct Endpoint<'a> {
    http: reqwest::Client,
    key: &'a Secret,
    timeout_secs: u64,
}

impl Endpoint<'_> {
    async fn send(&self, rb: reqwest::RequestBuilder) -> Result<String, Failure> {
        let rb = if self.key.is_empty() {
            rb
        } else {
            rb.bearer_auth(self.key.expose())
        };
        let resp = rb.send().await.map_err(|e| self.network(&e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| self.network(&e))?;
        if (200..300).contains(&status) {
            Ok(text)
        } else {
            Err(Failure::Http(status, super::http::error_message(&text)))
        }
    }

    fn network(&self, e: &reqwest::Error) -> Failure {
        Failure::Network(if e.is_timeout() {
            format!("timed out (no answer within {} s)", self.timeout_secs)
        } else {
            ethan_channels::net::describe(e)
        })
    }

    /// `GET {base}/models`: the ids it lists.
    async fn models(&self, base: &str) -> Result<Vec<String>, Failure> {
        let text = self.send(self.http.get(format!("{base}/models"))).await?;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(v.get("data")
            .and_then(Value::as_array)
            .map(|d| {
                d.iter()
                    .filter_map(|m| m.get("id").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// One completion of one token from `model` at `base`.
    async fn one_token(&self, base: &str, model: &str) -> Result<(), Failure> {
        let body = json!({
            "model": model,
            "messages": [{"role": "user", "content": "Say OK."}],
            "max_tokens": 1,
        });
        self.send(
            self.http
                .post(format!("{base}/chat/completions"))
                .json(&body),
        )
        .await
        .map(|_| ())
    }
}

/// The models `ep` lists (`GET /models`), for `ethan init` to offer; empty when it lists none
/// or cannot be asked.
pub async fn listed_models(ep: &ModelEndpoint, timeout_secs: u64) -> Vec<String> {
    let Some(e) = endpoint(ep, timeout_secs) else {
        return Vec::new();
    };
    e.models(ep.base_url.trim_end_matches('/'))
        .await
        .unwrap_or_default()
}

fn endpoint(ep: &ModelEndpoint, timeout_secs: u64) -> Option<Endpoint<'_>> {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(timeout_secs.min(10)))
        .timeout(Duration::from_secs(timeout_secs))
        .build()
        .ok()?;
    Some(Endpoint {
        http,
        key: &ep.api_key,
        timeout_secs,
    })
}

/// Judge `ep` as the chat will use it (see the module docs), each request bounded by
/// `timeout_secs`. Errors: one sentence saying what failed and what to do.
pub async fn judge(ep: &ModelEndpoint, timeout_secs: u64) -> Result<Judged, Failed> {
    let base = ep.base_url.trim_end_matches('/');
    let e = endpoint(ep, timeout_secs)
        .ok_or_else(|| Failed::from("cannot build an HTTP client".to_string()))?;
    let listed = e.models(base).await;
    let models = match listed {
        Ok(models) if models.iter().any(|m| m == &ep.name) => {
            return Ok(Judged {
                line: format!("{base} answers and lists the model {}", ep.name),
                models,
            })
        }
        Err(f @ (Failure::Network(_) | Failure::Http(401 | 403, _))) => {
            return Err(f.describe(base).into())
        }
        Ok(models) => models,
        Err(_) => Vec::new(),
    };
    match e.one_token(base, &ep.name).await {
        Ok(()) => {
            let how = if models.is_empty() {
                "no /models list".to_string()
            } else {
                format!("not in its /models list: {}", shortlist(&models))
            };
            Ok(Judged {
                line: format!(
                    "{base} answers a one-token completion from the model {} ({how})",
                    ep.name
                ),
                models,
            })
        }
        Err(f @ Failure::Http(404, _)) => {
            let mut why = format!(
                "{}; the chat would fail the same way",
                f.describe(&format!("{base}/chat/completions"))
            );
            let suggestion = with_v1(&e, base, &ep.name).await;
            if let Some(url) = &suggestion {
                why.push_str(&format!(". Did you mean {url}?"));
            } else if !models.is_empty() {
                why.push_str(&format!(
                    ". The server lists: {} (set model.name to one of them)",
                    shortlist(&models)
                ));
            } else {
                why.push_str(". Check model.base_url (most servers' base URL ends in /v1)");
            }
            Err(Failed {
                message: why,
                suggestion,
            })
        }
        Err(f) => Err(format!(
            "{}; the chat would fail the same way",
            f.describe(&format!("{base}/chat/completions"))
        )
        .into()),
    }
}

/// `{base}/v1` when `base` has no `/v1` and that URL answers (a model list, or a completion).
async fn with_v1(e: &Endpoint<'_>, base: &str, model: &str) -> Option<String> {
    if base.ends_with("/v1") {
        return None;
    }
    let url = format!("{base}/v1");
    let answers = e.models(&url).await.is_ok() || e.one_token(&url, model).await.is_ok();
    answers.then_some(url)
}

/// At most five names, then how many more.
fn shortlist(models: &[String]) -> String {
    let mut s = models
        .iter()
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if models.len() > 5 {
        s.push_str(&format!(" and {} more", models.len() - 5));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderKind;

    /// A loopback server answering `/v1/models` and `/v1/chat/completions` only (as a server
    /// whose base URL ends in /v1), listing `listed`.
    async fn server(listed: &'static [&'static str]) -> String {
        let app = axum::Router::new()
            .route(
                "/v1/models",
                axum::routing::get(move || async move {
                    let data: Vec<Value> = listed.iter().map(|m| json!({"id": m})).collect();
                    axum::Json(json!({"object": "list", "data": data}))
                }),
            )
            .route(
                "/v1/chat/completions",
                axum::routing::post(|| async {
                    axum::Json(json!({"choices": [{"index": 0, "finish_reason": "length",
                        "message": {"role": "assistant", "content": "O"}}]}))
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}")
    }

    fn ep(base_url: String, name: &str) -> ModelEndpoint {
        ModelEndpoint {
            provider: ProviderKind::Openai,
            base_url,
            api_key: Secret::new(""),
            name: name.into(),
            max_tokens: None,
        }
    }

    #[tokio::test]
    async fn a_base_url_without_v1_fails_with_the_suggestion() {
        let root = server(&["local"]).await;
        let e = judge(&ep(root.clone(), "local"), 5).await.unwrap_err();
        assert_eq!(e.suggestion, Some(format!("{root}/v1")));
        let e = e.message;
        assert!(e.contains("HTTP 404"), "{e}");
        assert!(e.contains(&format!("Did you mean {root}/v1?")), "{e}");
        let ok = judge(&ep(format!("{root}/v1/"), "local"), 5).await.unwrap();
        assert_eq!(ok.models, ["local"]);
        assert!(ok.line.contains("lists the model local"), "{}", ok.line);
        // A model the list lacks is tried with one token: this server answers any name.
        let other = judge(&ep(format!("{root}/v1"), "other"), 5).await.unwrap();
        assert!(
            other.line.contains("not in its /models list: local"),
            "{}",
            other.line
        );
        assert_eq!(
            listed_models(&ep(format!("{root}/v1"), "x"), 5).await,
            ["local"]
        );
    }

    #[tokio::test]
    async fn a_network_failure_is_named_as_one() {
        // A port nothing listens on.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let e = judge(&ep(format!("http://{addr}/v1"), "m"), 5)
            .await
            .unwrap_err()
            .message;
        assert!(
            e.starts_with("network error reaching") && e.contains("connection refused"),
            "{e}"
        );
        let e = judge(&ep("http://no-such-host.invalid/v1".into(), "m"), 5)
            .await
            .unwrap_err()
            .message;
        assert!(e.contains("network error") && !e.contains("key"), "{e}");
    }
}
