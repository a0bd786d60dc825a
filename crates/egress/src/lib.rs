//! The one way out: every connection a tool causes — `web_fetch`, `web_search`, the browser
//! (all of Chromium's traffic), MCP servers over HTTP, media downloads and transcription —
//! is judged and made here, by [`EgressGuard`]. The daemon's own platform traffic (Telegram,
//! Lark, the model and embedding endpoints) does not pass through it.
//!
//! For each destination the guard:
//! 1. resolves the host ([`lookup`]) and checks **every** address it gets against the address
//!    rule ([`address`]): loopback, private, link-local, metadata, CGNAT and other reserved
//!    addresses are refused unless `tools.web_fetch.allow_private` lists the host, or the
//!    destination is an [`Endpoint`] the owner configured for this path (an MCP server's `url`,
//!    a search provider's `base_url`, the transcription endpoint, a chat platform's API URL),
//!    which is reached on its own host and port only;
//! 2. connects to an address it checked, and only to one: reqwest gets the checked addresses
//!    from the guard's resolver ([`client`]) and dials them without a second lookup; the browser's
//!    proxy ([`proxy`]) dials them itself. A name that resolves to a private address between two
//!    lookups (DNS rebinding) gains nothing: no connection is made to an address that was not
//!    checked;
//! 3. applies the taint rule: a destination that only `allow_private` lets through is on the
//!    owner's own network, so what comes back is private data for the turn ([`Reach::OwnersNetwork`];
//!    the caller marks the turn's [`ethan_core::tool::Taint`]). Whether data may *leave* is the
//!    consent rule's question, asked before the call (the root crate's `consent` module);
//! 4. records the destination: one `ethan::egress` log line per request or tunnel (path, host,
//!    port, verdict; never a URL's path or query, which may carry private data) and the metric
//!    `ethan_egress_total{path, verdict}`.
//!
//! Refusals are [`Refused`], whose text is written for the model: the destination and why.
//!
//! Every guard of a daemon is built from its one [`Egress`] ([`shared`], made by the wiring
//! step), and each counts into the daemon's metrics; a guard made with [`EgressGuard::new`] has
//! an `Egress` of its own. A browser proxy any of a daemon's guards started is never a
//! destination of any path, whatever `allow_private` says: its address and port are refused by
//! [`EgressGuard::check_url`] (an IP literal), [`EgressGuard::check_proxies`] (a name, resolved
//! with the port, before an HTTP request), [`EgressGuard::connect`] (the browser's connections)
//! and, for the HTTP clients, by the connector itself ([`refuse`]: the address each new
//! connection reached).

pub mod address;
pub mod client;
pub mod lookup;
pub mod proxy;
pub mod refuse;
pub mod shared;

pub use client::{EgressClient, EgressError, EgressRequest};
pub use lookup::{Lookup, StaticLookup, SystemLookup};
pub use shared::Egress;

use address::{non_public_reason, normalize_host};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Which path of the daemon a connection belongs to (logs, metrics, refusal texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    WebFetch,
    WebSearch,
    Browser,
    Mcp,
    MediaDownload,
    Transcription,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::WebFetch => "web_fetch",
            Route::WebSearch => "web_search",
            Route::Browser => "browser",
            Route::Mcp => "mcp",
            Route::MediaDownload => "media_download",
            Route::Transcription => "transcription",
        }
    }
}

/// A destination the owner configured for one path: reached on its own host and port even when
/// that is a private address (the owner wrote it in the config), and on no other port of that
/// host unless the address rule allows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    host: String,
    port: u16,
}

impl Endpoint {
    /// The endpoint of a configured URL (`None` when it is not an http(s) URL with a host).
    pub fn of_url(url: &str) -> Option<Self> {
        let u = reqwest::Url::parse(url.trim()).ok()?;
        if u.scheme() != "http" && u.scheme() != "https" {
            return None;
        }
        Some(Self {
            host: normalize_host(u.host_str()?),
            port: u.port_or_known_default()?,
        })
    }

    /// The endpoints of the URLs that parse.
    pub fn all_of<'a>(urls: impl IntoIterator<Item = &'a str>) -> Vec<Self> {
        urls.into_iter().filter_map(Self::of_url).collect()
    }
}

/// A refusal by the guard; its text is written for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// What reaching a destination means for the taint rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// A public address.
    Public,
    /// A host `allow_private` lists: the owner's own network, so what it returns is private.
    OwnersNetwork,
    /// An endpoint the owner configured for this path.
    Endpoint,
}

/// Why a connection could not be made: refused by the guard, or a failure of the network.
#[derive(Debug, thiserror::Error)]
pub enum ConnectFailure {
    #[error("{0}")]
    Refused(#[from] Refused),
    #[error("{0}")]
    Network(String),
}

/// The address rule, its exemptions and the resolver: everything needed to judge and make a
/// connection; and what every guard of the daemon shares ([`Egress`]: its browser proxies, its
/// metrics). Cheap to clone.
#[derive(Clone)]
pub struct EgressGuard {
    allow_private: Arc<Vec<String>>,
    lookup: Arc<dyn Lookup>,
    shared: Egress,
}

impl std::fmt::Debug for EgressGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressGuard")
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl EgressGuard {
    /// A guard of its own, outside any daemon (an [`Egress`] of its own: see [`shared`]),
    /// exempting the hosts of `allow_private`, resolving with `lookup`. The daemon's guards are
    /// built by its [`Egress`] ([`Egress::guard`]).
    pub fn new(allow_private: &[String], lookup: Arc<dyn Lookup>) -> Self {
        Self::within(Egress::default(), allow_private, lookup)
    }

    fn within(shared: Egress, allow_private: &[String], lookup: Arc<dyn Lookup>) -> Self {
        let allow = allow_private
            .iter()
            .map(|h| normalize_host(h))
            .filter(|h| !h.is_empty())
            .collect();
        Self {
            allow_private: Arc::new(allow),
            lookup,
            shared,
        }
    }

    /// What this guard shares with the daemon's other guards.
    pub fn shared(&self) -> &Egress {
        &self.shared
    }

    /// Record one destination: a log line (`ethan::egress`) and the metric. Never a URL's path
    /// or query.
    pub fn record(&self, route: Route, host: &str, port: u16, verdict: &str) {
        tracing::info!(
            target: "ethan::egress",
            "{} {} {host}:{port}",
            route.as_str(),
            verdict
        );
        self.shared
            .metrics()
            .egress
            .with_label_values(&[route.as_str(), verdict])
            .inc();
    }

    /// Whether `tools.web_fetch.allow_private` lists `host`.
    pub fn host_allowed(&self, host: &str) -> bool {
        let h = normalize_host(host);
        self.allow_private.iter().any(|a| {
            *a == h
                || match (a.parse::<IpAddr>(), h.parse::<IpAddr>()) {
                    (Ok(x), Ok(y)) => x == y,
                    _ => false,
                }
        })
    }

    /// What reaching `host` (allowed) means for the taint rule.
    fn reach_of(&self, host: &str, port: u16, endpoints: &[Endpoint]) -> Reach {
        if self.host_allowed(host) {
            Reach::OwnersNetwork
        } else if is_endpoint(host, port, endpoints) {
            Reach::Endpoint
        } else {
            Reach::Public
        }
    }

    /// Judge a URL before connecting: its scheme, a configured endpoint's port, and the address
    /// of an IP-literal host. Host names are judged after resolution ([`EgressGuard::resolve`]).
    pub fn check_url(&self, url: &reqwest::Url, endpoints: &[Endpoint]) -> Result<Reach, Refused> {
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(Refused(format!(
                "{url} is not an http(s) URL; only http:// and https:// are reached"
            )));
        }
        let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
            return Err(Refused(format!("{url} has no host")));
        };
        let port = url.port_or_known_default().unwrap_or(0);
        self.check_host_port(host, port, endpoints)
    }

    /// [`EgressGuard::check_url`] for a `host` and `port` (a CONNECT request's authority).
    pub fn check_host_port(
        &self,
        host: &str,
        port: u16,
        endpoints: &[Endpoint],
    ) -> Result<Reach, Refused> {
        let h = normalize_host(host);
        let literal = h.parse::<IpAddr>().ok();
        if literal.is_none()
            && !is_endpoint(&h, port, endpoints)
            && endpoints.iter().any(|e| e.host == h)
            && !self.host_allowed(&h)
        {
            return Err(Refused(format!(
                "{h}:{port} is not the configured endpoint ({h} is configured on another port); \
                 a configured endpoint is reached on its own port only"
            )));
        }
        if let Some(ip) = literal {
            self.check_ip(&h, port, ip, endpoints)?;
            self.refuse_proxy(&h, SocketAddr::new(ip, port))?;
        }
        Ok(self.reach_of(&h, port, endpoints))
    }

    /// A browser proxy of this daemon is never a destination, whatever the address rule and
    /// `allow_private` say: a request would act through a session's browser.
    fn refuse_proxy(&self, host: &str, addr: SocketAddr) -> Result<(), Refused> {
        if self.shared.is_proxy(addr) {
            return Err(proxy_refusal(host, addr.port()));
        }
        Ok(())
    }

    /// Before an HTTP request to a host name the address rule does not filter (a host of
    /// `allow_private`, a configured endpoint's): resolve it and refuse when any address, on
    /// `port`, is one of the browser proxies. Other names never reach loopback, where the
    /// proxies listen; IP literals are judged by [`EgressGuard::check_url`]. A lookup that fails
    /// is left to the request, which resolves again and fails the same way.
    pub async fn check_proxies(
        &self,
        host: &str,
        port: u16,
        endpoints: &[Endpoint],
    ) -> Result<(), Refused> {
        let h = normalize_host(host);
        let exempt = self.host_allowed(&h) || endpoints.iter().any(|e| e.host == h);
        if h.parse::<IpAddr>().is_ok() || !exempt {
            return Ok(());
        }
        let addrs = self.resolve(&h, endpoints).await.unwrap_or_default();
        addrs
            .into_iter()
            .try_for_each(|ip| self.refuse_proxy(&h, SocketAddr::new(ip, port)))
    }

    fn check_ip(
        &self,
        host: &str,
        port: u16,
        ip: IpAddr,
        endpoints: &[Endpoint],
    ) -> Result<(), Refused> {
        match non_public_reason(ip) {
            Some(why) if !self.host_allowed(host) && !is_endpoint(host, port, endpoints) => {
                Err(refusal(host, ip, why))
            }
            _ => Ok(()),
        }
    }

    /// Resolve `host` and keep the addresses it may reach (every address is checked; refused
    /// ones are dropped); an error when none is left. `endpoints` exempts their host names.
    pub async fn resolve(
        &self,
        host: &str,
        endpoints: &[Endpoint],
    ) -> Result<Vec<IpAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let h = normalize_host(host);
        if let Ok(ip) = h.parse::<IpAddr>() {
            // Exempt only as the endpoint of its port, checked by `check_host_port` before.
            if non_public_reason(ip).is_some()
                && !self.host_allowed(&h)
                && !endpoints.iter().any(|e| e.host == h)
            {
                return Err(Box::new(refusal(
                    &h,
                    ip,
                    non_public_reason(ip).unwrap_or(""),
                )));
            }
            return Ok(vec![ip]);
        }
        let addrs = self.lookup.lookup(&h).await?;
        if self.host_allowed(&h) || endpoints.iter().any(|e| e.host == h) {
            return Ok(addrs);
        }
        let mut allowed = Vec::new();
        let mut refused = None;
        for ip in addrs {
            match non_public_reason(ip) {
                None => allowed.push(ip),
                Some(why) => {
                    refused.get_or_insert((ip, why));
                }
            }
        }
        match (allowed.is_empty(), refused) {
            (false, _) => Ok(allowed),
            (true, Some((ip, why))) => Err(Box::new(refusal(&h, ip, why))),
            (true, None) => Err(Box::new(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{h} has no address"),
            ))),
        }
    }

    /// Whether `url` may be reached, without connecting (the browser's check before it
    /// navigates): the scheme, the port of an endpoint, and every address the host resolves to.
    pub async fn judge(&self, url: &reqwest::Url) -> Result<Reach, Refused> {
        let reach = self.check_url(url, &[])?;
        let host = url.host_str().unwrap_or_default();
        match self.resolve(host, &[]).await {
            Ok(_) => Ok(reach),
            Err(e) => Err(find_refusal(e.as_ref())
                .unwrap_or_else(|| Refused(format!("{host} could not be resolved ({e})")))),
        }
    }

    /// Open a TCP connection to `host`:`port` for `route`: checked as [`EgressGuard::check_host_port`],
    /// resolved and filtered as [`EgressGuard::resolve`], then dialled on the checked addresses
    /// in turn (each within `timeout`) — never on any other. Recorded either way.
    pub async fn connect(
        &self,
        route: Route,
        host: &str,
        port: u16,
        endpoints: &[Endpoint],
        timeout: Duration,
    ) -> Result<(tokio::net::TcpStream, Reach), ConnectFailure> {
        let checked = async {
            let reach = self.check_host_port(host, port, endpoints)?;
            let addrs = self.resolve(host, endpoints).await.map_err(|e| {
                match find_refusal(e.as_ref()) {
                    Some(r) => ConnectFailure::Refused(r),
                    None => ConnectFailure::Network(format!("{host} could not be resolved ({e})")),
                }
            })?;
            Ok::<_, ConnectFailure>((reach, addrs))
        }
        .await;
        let (reach, addrs) = match checked {
            Ok(c) => c,
            Err(e) => {
                self.record(route, host, port, verdict_of(&e));
                return Err(e);
            }
        };
        // A browser proxy of this process is never a destination (a page would act through
        // another session's proxy), whatever the address rule allows.
        let addrs: Vec<IpAddr> = addrs
            .into_iter()
            .filter(|ip| !self.shared.is_proxy(SocketAddr::new(*ip, port)))
            .collect();
        if addrs.is_empty() {
            self.record(route, host, port, "refused");
            return Err(ConnectFailure::Refused(proxy_refusal(host, port)));
        }
        self.record(route, host, port, "allowed");
        let mut last = String::from("no address");
        for ip in addrs {
            let addr = SocketAddr::new(ip, port);
            match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
                Ok(Ok(s)) => return Ok((s, reach)),
                Ok(Err(e)) => last = format!("{addr}: {e}"),
                Err(_) => last = format!("{addr}: no answer within {} s", timeout.as_secs()),
            }
        }
        Err(ConnectFailure::Network(last))
    }
}

fn verdict_of(e: &ConnectFailure) -> &'static str {
    match e {
        ConnectFailure::Refused(_) => "refused",
        ConnectFailure::Network(_) => "failed",
    }
}

/// Whether `host`:`port` is one of `endpoints`.
fn is_endpoint(host: &str, port: u16, endpoints: &[Endpoint]) -> bool {
    let h = normalize_host(host);
    endpoints.iter().any(|e| e.host == h && e.port == port)
}

fn refusal(host: &str, ip: IpAddr, why: &str) -> Refused {
    let shown = if normalize_host(host) == ip.to_string() {
        ip.to_string()
    } else {
        format!("{host} ({ip})")
    };
    Refused(format!(
        "{shown} is {why}; tools only reach public addresses. \
         The owner can exempt a host by listing it in tools.web_fetch.allow_private"
    ))
}

/// The refusal of a browser proxy as a destination, written for the model.
fn proxy_refusal(host: &str, port: u16) -> Refused {
    Refused(format!(
        "{host}:{port} is one of Ethan's own browser proxies; it is never a destination of any \
         tool, whatever tools.web_fetch.allow_private lists. Reach a site by its own address \
         (and a page in the browser through the browser tools)"
    ))
}

/// The guard's refusal inside an error chain (as returned by `reqwest`), if there is one.
pub fn find_refusal(err: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(r.clone());
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn u(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn ip_literal_urls() {
        let g = EgressGuard::new(&["127.0.0.1".into()], Arc::new(StaticLookup::new()));
        assert_eq!(
            g.check_url(&u("http://127.0.0.1:8080/"), &[]),
            Ok(Reach::OwnersNetwork)
        );
        assert!(g.check_url(&u("http://127.0.0.2/"), &[]).is_err());
        assert!(g.check_url(&u("http://[::1]/"), &[]).is_err());
        assert!(g
            .check_url(&u("http://169.254.169.254/latest"), &[])
            .is_err());
        assert!(g.check_url(&u("http://[fd00:ec2::254]/"), &[]).is_err());
        assert!(g.check_url(&u("file:///etc/passwd"), &[]).is_err());
        assert_eq!(
            g.check_url(&u("https://example.com/"), &[]),
            Ok(Reach::Public)
        );
        // Integer and hex spellings are parsed as IPv4 by the URL parser.
        assert!(g.check_url(&u("http://2130706434/"), &[]).is_err());
        assert!(g.check_url(&u("http://0x7f.0.0.2/"), &[]).is_err());
        assert!(g.check_url(&u("http://[::ffff:0:7f00:1]/"), &[]).is_err());
        assert!(g
            .check_url(&u("http://[64:ff9b:1::a9fe:a9fe]/latest"), &[])
            .is_err());
        assert!(g.check_url(&u("http://[64:ff9b:1::101:101]/"), &[]).is_ok());
        let err = g.check_url(&u("http://[::1]/"), &[]).unwrap_err().0;
        assert!(err.contains("loopback"), "{err}");
        assert!(err.contains("allow_private"), "{err}");
    }

    /// A configured endpoint is reached on its own host and port, and nowhere else on that
    /// host: a literal address on another port is judged by the rule, a name on another port
    /// is refused.
    #[tokio::test]
    async fn an_endpoint_is_its_host_and_port_only() {
        let lookup = StaticLookup::new().with("search.lan", &[ip("192.168.1.9")]);
        let g = EgressGuard::new(&[], Arc::new(lookup));
        let eps = Endpoint::all_of(["http://127.0.0.1:3001/mcp", "http://search.lan:8888"]);
        assert_eq!(
            g.check_url(&u("http://127.0.0.1:3001/mcp"), &eps),
            Ok(Reach::Endpoint)
        );
        assert!(g.check_url(&u("http://127.0.0.1:22/"), &eps).is_err());
        assert_eq!(
            g.check_url(&u("http://search.lan:8888/search"), &eps),
            Ok(Reach::Endpoint)
        );
        let e = g
            .check_url(&u("http://search.lan:6379/"), &eps)
            .unwrap_err();
        assert!(e.0.contains("own port"), "{e}");
        assert_eq!(
            g.resolve("search.lan", &eps).await.unwrap(),
            vec![ip("192.168.1.9")]
        );
        assert!(g.resolve("search.lan", &[]).await.is_err());
        // Without the endpoint, the same address is refused.
        assert!(g.check_url(&u("http://127.0.0.1:3001/mcp"), &[]).is_err());
    }

    #[tokio::test]
    async fn resolution_is_filtered() {
        let lookup = StaticLookup::new()
            .with("intranet.example", &[ip("10.0.0.5")])
            .with("mixed.example", &[ip("10.0.0.5"), ip("93.184.216.34")])
            .with("public.example", &[ip("93.184.216.34")])
            .with("dev.local", &[ip("192.168.1.9")]);
        let g = EgressGuard::new(&["DEV.local".into()], Arc::new(lookup));
        let err = g.resolve("intranet.example", &[]).await.unwrap_err();
        let refusal = find_refusal(err.as_ref()).expect("a refusal");
        assert!(
            refusal.0.contains("intranet.example (10.0.0.5)"),
            "{refusal}"
        );
        assert_eq!(
            g.resolve("mixed.example", &[]).await.unwrap(),
            vec![ip("93.184.216.34")]
        );
        assert!(g.resolve("public.example", &[]).await.is_ok());
        assert_eq!(
            g.resolve("dev.local", &[]).await.unwrap(),
            vec![ip("192.168.1.9")]
        );
        assert!(g.resolve("nowhere.example", &[]).await.is_err());
    }

    /// `connect` dials only a checked address: a name resolving to a refused address is never
    /// dialled, and a listener there sees no connection.
    #[tokio::test]
    async fn connect_dials_checked_addresses_only() {
        let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let lookup = StaticLookup::new()
            .with("rebind.example", &[ip("127.0.0.2")])
            .with("mine.example", &[ip("127.0.0.2")]);
        let g = EgressGuard::new(&["mine.example".into()], Arc::new(lookup));
        let t = Duration::from_secs(2);
        let r = g
            .connect(Route::Browser, "rebind.example", port, &[], t)
            .await;
        assert!(matches!(r, Err(ConnectFailure::Refused(_))), "{r:?}");
        let r = g.connect(Route::Browser, "127.0.0.2", port, &[], t).await;
        assert!(matches!(r, Err(ConnectFailure::Refused(_))), "{r:?}");
        let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
        assert!(accepted.is_err(), "a refused destination was connected to");
        let (_, reach) = g
            .connect(Route::Browser, "mine.example", port, &[], t)
            .await
            .unwrap();
        assert_eq!(reach, Reach::OwnersNetwork);
        assert!(listener.accept().await.is_ok());
    }
}
