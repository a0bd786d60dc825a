//! Who may talk to the gateway from a browser: the checks on `Host`, `Origin` and
//! `Sec-Fetch-Site`, and the headers every page response carries.
//!
//! - **Host** (against DNS rebinding): a page of `evil.example` whose name is made to resolve
//!   to 127.0.0.1 reaches the gateway with `Host: evil.example:8900`. The page and its API
//!   answer only a `Host` that is an IP address (v4 or `[v6]`), `localhost`, or the host of
//!   `gateway.public_url`: a rebinding attack always brings its own name.
//! - **Origin** (against cross-site requests, and other pages of the same machine, which are
//!   "same-site" for cookies since ports do not count): a request that changes something must
//!   carry `Origin`, and it must be this gateway as the browser reached it (`Origin`'s host and
//!   port equal to `Host`) or `gateway.public_url`. A bearer-token request (`/api/*`) from a
//!   program sends no `Origin` and is let through; one from a foreign page is refused.
//! - **Sec-Fetch-Site**: a read of the page's API (the conversation, its event stream) must be
//!   `same-origin` (or come from a browser too old to say).
//! - **Headers**: a Content-Security-Policy allowing only this origin's own scripts, styles and
//!   connections (no inline script, no `eval`, no framing, no plugin, Trusted Types required
//!   for HTML insertion), `X-Frame-Options: DENY`, `nosniff`, no referrer, no DNS prefetching
//!   (`X-DNS-Prefetch-Control: off`: a link in an answer does not make the browser look its
//!   name up), and same-origin opener and resource policies.

use axum::http::header::{HeaderName, HeaderValue};
use axum::http::HeaderMap;
use std::net::IpAddr;

/// The Content-Security-Policy of the page and everything it loads.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
    connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'; object-src 'none'; \
    require-trusted-types-for 'script'; trusted-types ethan";

/// The security headers of every page response.
pub fn security_headers(h: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
        h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
    };
    set(h, "content-security-policy", CSP);
    set(h, "x-frame-options", "DENY");
    set(h, "x-content-type-options", "nosniff");
    set(h, "referrer-policy", "no-referrer");
    set(h, "x-dns-prefetch-control", "off");
    set(h, "cross-origin-opener-policy", "same-origin");
    set(h, "cross-origin-resource-policy", "same-origin");
    set(
        h,
        "permissions-policy",
        "camera=(), microphone=(), geolocation=()",
    );
}

/// The gateway's public address (`gateway.public_url`), when it is served under a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// `https://chat.example.com` (no path, no trailing slash).
    pub origin: String,
    /// `chat.example.com` or `chat.example.com:8443`, lowercase.
    pub host: String,
    pub https: bool,
}

impl PublicUrl {
    /// Parse `gateway.public_url` (`http(s)://host[:port]`, nothing after it but `/`).
    pub fn parse(url: &str) -> Result<PublicUrl, String> {
        let u = reqwest::Url::parse(url.trim()).map_err(|e| format!("{url:?}: {e}"))?;
        let https = match u.scheme() {
            "https" => true,
            "http" => false,
            s => {
                return Err(format!(
                    "{url:?}: the scheme must be http or https, not {s}"
                ))
            }
        };
        if u.path() != "/" || u.query().is_some() || u.fragment().is_some() {
            return Err(format!(
                "{url:?}: only the scheme, host and port (the page is served at /)"
            ));
        }
        let host = u
            .host_str()
            .ok_or_else(|| format!("{url:?}: no host"))?
            .to_ascii_lowercase();
        let host = match u.port() {
            Some(p) => format!("{host}:{p}"),
            None => host,
        };
        let origin = format!("{}://{host}", u.scheme());
        Ok(PublicUrl {
            origin,
            host,
            https,
        })
    }
}

/// The `Host` header, lowercase, if present and readable.
pub fn host(h: &HeaderMap) -> Option<String> {
    h.get(axum::http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
}

/// Whether `host` (a `Host` header value) is one the page answers (see the module docs).
pub fn host_allowed(host: &str, public: Option<&PublicUrl>) -> bool {
    if public.is_some_and(|p| p.host == host) {
        return true;
    }
    if let Some(rest) = host.strip_prefix('[') {
        // [v6] or [v6]:port
        return rest.split_once(']').is_some_and(|(ip, port)| {
            ip.parse::<std::net::Ipv6Addr>().is_ok() && (port.is_empty() || valid_port(port))
        });
    }
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    if port.is_some_and(|p| !valid_port(&format!(":{p}"))) {
        return false;
    }
    name == "localhost" || name.parse::<std::net::Ipv4Addr>().is_ok()
}

fn valid_port(p: &str) -> bool {
    p.strip_prefix(':')
        .is_some_and(|n| !n.is_empty() && n.parse::<u16>().is_ok())
}

/// The `Origin` header, if present (`null`, an unreadable value or several headers count as
/// present and foreign).
pub fn origin(h: &HeaderMap) -> Option<String> {
    let mut all = h.get_all(axum::http::header::ORIGIN).iter();
    let first = all.next()?;
    if all.next().is_some() {
        return Some("null".into());
    }
    Some(first.to_str().unwrap_or("null").trim().to_ascii_lowercase())
}

/// Whether `origin` is this gateway as reached at `host`, or its public URL.
pub fn same_origin(origin: &str, host: &str, public: Option<&PublicUrl>) -> bool {
    if public.is_some_and(|p| p.origin == origin) {
        return true;
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    let rest = rest.trim_end_matches('/');
    // A browser leaves the scheme's default port out of `Origin`; `Host` may carry it.
    let host_default = match scheme {
        "http" => host.strip_suffix(":80"),
        "https" => host.strip_suffix(":443"),
        _ => return false,
    };
    rest == host || host_default == Some(rest)
}

/// A bearer-token request (`/api/*`) from a page of another origin: refused. Programs send no
/// `Origin`.
pub fn foreign_origin(h: &HeaderMap) -> bool {
    match (origin(h), host(h)) {
        (None, _) => false,
        (Some(o), Some(host)) => !same_origin(&o, &host, None),
        (Some(_), None) => true,
    }
}

/// Whether `Sec-Fetch-Site` says the request comes from this origin (or is absent: an old
/// browser, or not a browser).
pub fn fetch_site_ok(h: &HeaderMap) -> bool {
    match h.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        None => true,
        Some(v) => v.eq_ignore_ascii_case("same-origin") || v.eq_ignore_ascii_case("none"),
    }
}

/// Whether the browser reached the gateway over TLS. `gateway.public_url` with `https` says so
/// for every request: the operator has put a TLS proxy in front. Otherwise a proxy's
/// `X-Forwarded-Proto: https` (or `Forwarded: proto=https`) is believed only from a peer on
/// this machine (`peer` on loopback: a proxy there); from anyone else it is ignored. It
/// matters: it makes the cookie `Secure` (and `__Host-`), and it lets sign-in through from
/// another machine, which a client on plain HTTP must not obtain by sending the header.
pub fn over_tls(h: &HeaderMap, public: Option<&PublicUrl>, peer: Option<IpAddr>) -> bool {
    if public.is_some_and(|p| p.https) {
        return true;
    }
    if !peer.is_some_and(is_loopback) {
        return false;
    }
    let header = |k: &str| {
        h.get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };
    header("x-forwarded-proto").is_some_and(|v| v.split(',').next().map(str::trim) == Some("https"))
        || header("forwarded").is_some_and(|v| v.contains("proto=https"))
}

/// Whether `ip` is this machine (a peer on loopback).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_by_address_or_localhost_only() {
        for ok in [
            "127.0.0.1:8900",
            "127.0.0.1",
            "localhost:8900",
            "[::1]:8900",
            "[::1]",
            "192.168.1.5:8900",
        ] {
            assert!(host_allowed(ok, None), "{ok}");
        }
        for bad in [
            "evil.example:8900",
            "evil.example",
            "localhost.evil.example:8900",
            "127.0.0.1.nip.io:8900",
            "localhost:99999",
            "[::1",
            "",
        ] {
            assert!(!host_allowed(bad, None), "{bad}");
        }
        let public = PublicUrl::parse("https://Chat.Example.com/").unwrap();
        assert_eq!(public.origin, "https://chat.example.com");
        assert!(host_allowed("chat.example.com", Some(&public)));
        assert!(PublicUrl::parse("https://chat.example.com/ethan").is_err());
        assert!(PublicUrl::parse("ftp://chat.example.com").is_err());
    }

    #[test]
    fn origin_must_be_the_host_reached() {
        assert!(same_origin("http://127.0.0.1:8900", "127.0.0.1:8900", None));
        assert!(same_origin("http://localhost", "localhost:80", None));
        assert!(!same_origin(
            "http://localhost:3000",
            "localhost:8900",
            None
        ));
        assert!(!same_origin("null", "localhost:8900", None));
        assert!(!same_origin("http://evil.example", "127.0.0.1:8900", None));
        let public = PublicUrl::parse("https://chat.example.com").unwrap();
        assert!(same_origin(
            "https://chat.example.com",
            "127.0.0.1:8900",
            Some(&public)
        ));
    }

    #[test]
    fn a_forwarded_proto_is_believed_only_from_this_machine_or_with_an_https_public_url() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let remote: IpAddr = "192.168.1.9".parse().unwrap();
        assert!(over_tls(&h, None, Some(local)));
        assert!(!over_tls(&h, None, Some(remote)), "a client's own header");
        assert!(!over_tls(&h, None, None));
        assert!(!over_tls(&HeaderMap::new(), None, Some(local)));
        let https = PublicUrl::parse("https://chat.example.com").unwrap();
        assert!(over_tls(&HeaderMap::new(), Some(&https), Some(remote)));
        let http = PublicUrl::parse("http://chat.example.com").unwrap();
        assert!(!over_tls(&h, Some(&http), Some(remote)));
        let mut f = HeaderMap::new();
        f.insert(
            "forwarded",
            HeaderValue::from_static("for=1.2.3.4;proto=https"),
        );
        assert!(over_tls(&f, None, Some(local)) && !over_tls(&f, None, Some(remote)));
    }
}
