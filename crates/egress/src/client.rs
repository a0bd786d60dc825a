//! HTTP through the egress guard, for the paths built on `reqwest` (`web_fetch`, `web_search`,
//! MCP over HTTP, media downloads, transcription).
//!
//! An [`EgressClient`] owns its `reqwest::Client` and never hands it out: every request is an
//! [`EgressRequest`] whose [`EgressRequest::send`] judges the URL first (scheme, configured
//! endpoint ports, IP-literal hosts, which `reqwest` connects to without resolving), records
//! it, and marks the turn's taint when the host is on the owner's network. Host names are
//! resolved by the guard's resolver ([`GuardedResolver`]), which checks every address and hands
//! `reqwest` only the ones that passed; `reqwest` dials those, with no lookup of its own.
//! A browser proxy of the daemon is refused as a destination, whatever `allow_private` lists:
//! by [`EgressGuard::check_url`] and [`EgressGuard::check_proxies`] before a request, and by
//! the connector ([`super::refuse`]) for each connection made.
//! The client uses no system proxy and follows no redirect, unless built with
//! [`EgressClient::following`]: then each redirect target is judged like a first URL (and a
//! redirect to a host of the owner's network, which the first request did not go to, is
//! refused: what it returns would be private). A caller that follows redirects itself sends a
//! new request for each, judged like the first.

use super::{find_refusal, EgressGuard, Endpoint, Reach, Refused, Route};
use ethan_core::tool::Taint;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// An HTTP client whose requests all pass the egress guard.
#[derive(Clone)]
pub struct EgressClient {
    http: reqwest::Client,
    guard: EgressGuard,
    route: Route,
    endpoints: Arc<[Endpoint]>,
}

impl std::fmt::Debug for EgressClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressClient")
            .field("route", &self.route)
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

/// Why a request did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// The guard refused the destination; nothing was sent.
    #[error("{0}")]
    Refused(Refused),
    /// The network or the server failed.
    #[error("{0}")]
    Http(reqwest::Error),
}

impl EgressError {
    /// Whether the request ran out of time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, EgressError::Http(e) if e.is_timeout())
    }
}

impl From<reqwest::Error> for EgressError {
    fn from(e: reqwest::Error) -> Self {
        match find_refusal(&e) {
            Some(r) => EgressError::Refused(r),
            None => EgressError::Http(e),
        }
    }
}

impl EgressClient {
    /// A client for `route` that may reach `endpoints` (the owner's configured destinations of
    /// this path) besides what the address rule allows. `configure` sets timeouts and the user
    /// agent; the resolver, redirects and proxies are the guard's and set after it.
    pub fn new(
        guard: &EgressGuard,
        route: Route,
        endpoints: Vec<Endpoint>,
        configure: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<Self, String> {
        Self::build(guard, route, endpoints, 0, configure)
    }

    /// As [`EgressClient::new`], following at most `max_redirects` redirects, each judged by the
    /// guard before it is followed.
    pub fn following(
        guard: &EgressGuard,
        route: Route,
        endpoints: Vec<Endpoint>,
        max_redirects: usize,
        configure: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<Self, String> {
        Self::build(guard, route, endpoints, max_redirects, configure)
    }

    fn build(
        guard: &EgressGuard,
        route: Route,
        endpoints: Vec<Endpoint>,
        max_redirects: usize,
        configure: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<Self, String> {
        let endpoints: Arc<[Endpoint]> = endpoints.into();
        let policy = if max_redirects == 0 {
            reqwest::redirect::Policy::none()
        } else {
            redirects(guard.clone(), route, endpoints.clone(), max_redirects)
        };
        let http = configure(reqwest::Client::builder())
            .dns_resolver(Arc::new(GuardedResolver {
                guard: guard.clone(),
                endpoints: endpoints.clone(),
            }))
            .connector_layer(super::refuse::RefuseProxies {
                shared: guard.shared().clone(),
            })
            .redirect(policy)
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            http,
            guard: guard.clone(),
            route,
            endpoints,
        })
    }

    /// The guard this client's requests pass.
    pub fn guard(&self) -> &EgressGuard {
        &self.guard
    }

    /// A request to `url` (judged when sent).
    pub fn request(&self, method: reqwest::Method, url: &str) -> EgressRequest<'_> {
        let parsed =
            reqwest::Url::parse(url).map_err(|e| Refused(format!("{url:?} is not a URL: {e}")));
        let builder = match &parsed {
            Ok(u) => Some(self.http.request(method, u.clone())),
            Err(_) => None,
        };
        EgressRequest {
            client: self,
            url: parsed,
            builder,
            turn: None,
        }
    }

    pub fn get(&self, url: &str) -> EgressRequest<'_> {
        self.request(reqwest::Method::GET, url)
    }

    pub fn post(&self, url: &str) -> EgressRequest<'_> {
        self.request(reqwest::Method::POST, url)
    }

    pub fn delete(&self, url: &str) -> EgressRequest<'_> {
        self.request(reqwest::Method::DELETE, url)
    }
}

/// One request of an [`EgressClient`], built like a `reqwest` request; only
/// [`EgressRequest::send`] sends it.
pub struct EgressRequest<'a> {
    client: &'a EgressClient,
    url: Result<reqwest::Url, Refused>,
    builder: Option<reqwest::RequestBuilder>,
    turn: Option<Taint>,
}

impl EgressRequest<'_> {
    fn map(mut self, f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder) -> Self {
        self.builder = self.builder.map(f);
        self
    }

    pub fn header<K, V>(self, key: K, value: V) -> Self
    where
        reqwest::header::HeaderName: TryFrom<K>,
        <reqwest::header::HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        reqwest::header::HeaderValue: TryFrom<V>,
        <reqwest::header::HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.map(|b| b.header(key, value))
    }

    pub fn bearer_auth<T: std::fmt::Display>(self, token: T) -> Self {
        self.map(|b| b.bearer_auth(token))
    }

    pub fn body<T: Into<reqwest::Body>>(self, body: T) -> Self {
        self.map(|b| b.body(body))
    }

    pub fn json<T: serde::Serialize + ?Sized>(self, json: &T) -> Self {
        self.map(|b| b.json(json))
    }

    pub fn timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.timeout(timeout))
    }

    /// The turn this request works for: reaching a host of the owner's network marks its
    /// taint (what comes back is private data).
    pub fn for_turn(mut self, taint: &Taint) -> Self {
        self.turn = Some(taint.clone());
        self
    }

    /// Judge the destination, record it, and send. A refusal sends nothing.
    pub async fn send(self) -> Result<reqwest::Response, EgressError> {
        let c = self.client;
        let url = self.url.map_err(EgressError::Refused)?;
        let host = url.host_str().unwrap_or_default().to_string();
        let port = url.port_or_known_default().unwrap_or(0);
        let checked = match c.guard.check_url(&url, &c.endpoints) {
            Ok(r) => c
                .guard
                .check_proxies(&host, port, &c.endpoints)
                .await
                .map(|()| r),
            Err(r) => Err(r),
        };
        let reach = match checked {
            Ok(r) => r,
            Err(r) => {
                c.guard.record(c.route, &host, port, "refused");
                return Err(EgressError::Refused(r));
            }
        };
        if let (Reach::OwnersNetwork, Some(turn)) = (reach, &self.turn) {
            turn.mark(&format!(
                "{} of {host}, a private address",
                c.route.as_str()
            ));
        }
        let Some(builder) = self.builder else {
            return Err(EgressError::Refused(Refused(format!("{url} is not a URL"))));
        };
        let sent = builder.send().await.map_err(EgressError::from);
        // A host name is judged by the resolver, while the request is under way.
        let verdict = match &sent {
            Err(EgressError::Refused(_)) => "refused",
            _ => "allowed",
        };
        c.guard.record(c.route, &host, port, verdict);
        sent
    }
}

/// The redirect policy of [`EgressClient::following`]: at most `max` hops, each target judged
/// by the guard (and recorded) before it is followed; the target's host name is then resolved
/// through the guard's resolver like any other.
fn redirects(
    guard: EgressGuard,
    route: Route,
    endpoints: Arc<[Endpoint]>,
    max: usize,
) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let url = attempt.url().clone();
        let host = url.host_str().unwrap_or_default().to_string();
        let port = url.port_or_known_default().unwrap_or(0);
        if attempt.previous().len() > max {
            return attempt.error(Refused(format!(
                "more than {max} redirects, stopped at {url}"
            )));
        }
        let first_host = attempt
            .previous()
            .first()
            .and_then(|u| u.host_str())
            .unwrap_or_default()
            .to_string();
        let verdict = match guard.check_url(&url, &endpoints) {
            Err(r) => Err(r),
            Ok(Reach::OwnersNetwork) if !host.eq_ignore_ascii_case(&first_host) => Err(Refused(
                format!("a redirect to {url}, on the owner's network, is not followed"),
            )),
            Ok(_) => Ok(()),
        };
        match verdict {
            Ok(()) => {
                guard.record(route, &host, port, "allowed");
                attempt.follow()
            }
            Err(r) => {
                guard.record(route, &host, port, "refused");
                attempt.error(r)
            }
        }
    })
}

/// A `reqwest` DNS resolver that resolves through the guard: every address checked, only the
/// allowed ones returned (see [`EgressGuard::resolve`]).
pub struct GuardedResolver {
    guard: EgressGuard,
    endpoints: Arc<[Endpoint]>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let endpoints = self.endpoints.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let ips = guard.resolve(&host, &endpoints).await?;
            let addrs: reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StaticLookup;

    async fn serve() -> SocketAddr {
        let app = axum::Router::new().fallback(|| async { "hi" });
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(l, app).await;
        });
        addr
    }

    /// A name that resolves to loopback is refused by the resolver, an IP literal by `send`;
    /// the configured endpoint is reached; a host of `allow_private` marks the turn.
    #[tokio::test]
    async fn requests_pass_the_guard() {
        let addr = serve().await;
        let lookup = StaticLookup::new()
            .with("sneaky.test", &["127.0.0.1".parse().unwrap()])
            .with("mine.test", &["127.0.0.1".parse().unwrap()]);
        let guard = EgressGuard::new(&["mine.test".into()], Arc::new(lookup));
        let endpoint = format!("http://{addr}/x");
        let c = EgressClient::new(
            &guard,
            Route::WebSearch,
            Endpoint::all_of([endpoint.as_str()]),
            |b| b,
        )
        .unwrap();
        let port = addr.port();
        let e = c
            .get(&format!("http://sneaky.test:{port}/"))
            .send()
            .await
            .unwrap_err();
        assert!(matches!(e, EgressError::Refused(_)), "{e:?}");
        let e = c
            .get(&format!("http://127.0.0.1:{}/", port + 1))
            .send()
            .await;
        assert!(matches!(e, Err(EgressError::Refused(_))), "{e:?}");
        assert!(c.get(&endpoint).send().await.unwrap().status().is_success());
        let taint = Taint::default();
        let r = c
            .get(&format!("http://mine.test:{port}/"))
            .for_turn(&taint)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
        assert!(taint.source().is_some_and(|s| s.contains("mine.test")));
        let e = c.get("not a url").send().await.unwrap_err();
        assert!(matches!(e, EgressError::Refused(_)), "{e:?}");
    }

    /// A following client follows a redirect the guard allows and refuses one it does not,
    /// before connecting.
    #[tokio::test]
    async fn redirects_are_judged_before_they_are_followed() {
        use axum::response::Redirect;
        let refused = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        let rport = refused.local_addr().unwrap().port();
        let app = axum::Router::new()
            .route("/ok", axum::routing::get(|| async { "landed" }))
            .route(
                "/here",
                axum::routing::get(|| async { Redirect::temporary("/ok") }),
            )
            .route(
                "/away",
                axum::routing::get(move || async move {
                    Redirect::temporary(&format!("http://127.0.0.2:{rport}/x"))
                }),
            );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(l, app).await;
        });
        let guard = EgressGuard::new(&[], Arc::new(StaticLookup::new()));
        let base = format!("http://{addr}");
        let c = EgressClient::following(
            &guard,
            Route::WebSearch,
            Endpoint::all_of([base.as_str()]),
            3,
            |b| b,
        )
        .unwrap();
        let r = c.get(&format!("{base}/here")).send().await.unwrap();
        assert_eq!(r.text().await.unwrap(), "landed");
        let e = c.get(&format!("{base}/away")).send().await.unwrap_err();
        assert!(matches!(e, EgressError::Refused(_)), "{e:?}");
        let accepted = tokio::time::timeout(Duration::from_millis(200), refused.accept()).await;
        assert!(
            accepted.is_err(),
            "the refused redirect target was connected to"
        );
    }
}
