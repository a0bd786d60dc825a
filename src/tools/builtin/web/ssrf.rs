//! The SSRF guard of `web_fetch`: which addresses a URL fetched on the model's behalf may reach.
//!
//! The rule: a fetch may not reach a loopback, private (RFC 1918), link-local (including the
//! cloud metadata address 169.254.169.254), CGNAT (100.64.0.0/10, which holds Alibaba Cloud's
//! 100.100.100.200), unique-local IPv6 (fc00::/7, which holds AWS's fd00:ec2::254), multicast,
//! documentation, benchmarking or otherwise reserved address — unless `tools.web_fetch.
//! allow_private` lists the URL's host (a host name or an IP address, compared
//! case-insensitively). IPv4 addresses embedded in IPv6 (`::ffff:a.b.c.d`, IPv4-translated
//! `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96`, local-use NAT64 `64:ff9b:1::/48`, 6to4
//! `2002::/16`) are judged by the IPv4 address: refused when it would be, allowed when it is
//! public. For `64:ff9b:1::/48`, whose operator may pick any RFC 6052 prefix length, the
//! address is refused when any layout it fits embeds a refused IPv4 address.
//!
//! It is enforced at three points, so neither DNS nor a redirect can get around it:
//! - IP-literal URLs (`http://127.0.0.1/`, `http://[::1]/`) are checked before any connection
//!   ([`SsrfGuard::check_url`]), because the HTTP client does not resolve them;
//! - host names are resolved by [`GuardedResolver`], a `reqwest` DNS resolver that drops every
//!   refused address *after* resolution and fails when none is left, so the connection can only
//!   go to an address that was checked (no time-of-check/time-of-use gap);
//! - redirects are followed by `web_fetch` itself, one hop at a time, each target checked again
//!   as a new URL — an allowed host cannot redirect to one that is not.
//!
//! Name resolution goes through a [`Lookup`]; [`SystemLookup`] asks the system resolver, tests
//! substitute a [`StaticLookup`].

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

/// Resolves a host name to IP addresses.
pub trait Lookup: Send + Sync {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>;
}

/// The system resolver (`getaddrinfo` through tokio).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>> {
        let host = host.to_string();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// A fixed table of host names, for tests: unknown names fail like an NXDOMAIN.
#[derive(Debug, Default, Clone)]
pub struct StaticLookup {
    table: HashMap<String, Vec<IpAddr>>,
}

impl StaticLookup {
    pub fn new() -> Self {
        Self::default()
    }
    /// Make `host` resolve to `addrs`.
    pub fn with(mut self, host: &str, addrs: &[IpAddr]) -> Self {
        self.table.insert(host.to_ascii_lowercase(), addrs.to_vec());
        self
    }
}

impl Lookup for StaticLookup {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>> {
        let r = self
            .table
            .get(&host.to_ascii_lowercase())
            .cloned()
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("no address for {host}"),
                )
            });
        Box::pin(async move { r })
    }
}

/// Why an address is not public, or `None` when it is.
pub fn non_public_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let n = u32::from(ip);
    let in_net = |net: [u8; 4], bits: u32| {
        let mask = if bits == 0 {
            0
        } else {
            u32::MAX << (32 - bits)
        };
        n & mask == u32::from(Ipv4Addr::from(net)) & mask
    };
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        return Some("the cloud metadata address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if ip.is_private() {
        return Some("a private address");
    }
    if ip.is_link_local() {
        return Some("a link-local address");
    }
    if in_net([100, 64, 0, 0], 10) {
        return Some("a shared (CGNAT) address");
    }
    if o[0] == 0 {
        return Some("an unspecified (\"this network\") address");
    }
    if ip.is_broadcast() || in_net([240, 0, 0, 0], 4) {
        return Some("a reserved address");
    }
    if ip.is_multicast() {
        return Some("a multicast address");
    }
    if in_net([192, 0, 0, 0], 24) {
        return Some("an IETF protocol assignment address");
    }
    if in_net([192, 0, 2, 0], 24) || in_net([198, 51, 100, 0], 24) || in_net([203, 0, 113, 0], 24) {
        return Some("a documentation address");
    }
    if in_net([198, 18, 0, 0], 15) {
        return Some("a benchmarking address");
    }
    None
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_reason(v4);
    }
    if ip.is_unspecified() {
        return Some("the unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if s[0..6] == [0, 0, 0, 0, 0, 0] {
        return v4_reason(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ))
        .or(Some("a deprecated IPv4-compatible address"));
    }
    // IPv4-translated (::ffff:0:a.b.c.d, RFC 2765) and NAT64 (64:ff9b::/96) carry an IPv4
    // address in their last 32 bits.
    if s[0..6] == [0, 0, 0, 0, 0xffff, 0] || s[0..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return v4_reason(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    // The local-use NAT64 prefix (64:ff9b:1::/48, RFC 8215) may be used with any RFC 6052
    // prefix length from /48 to /96, so every layout the address is well-formed under is judged.
    if s[0..3] == [0x64, 0xff9b, 1] {
        return local_nat64_reason(ip);
    }
    // 6to4 (2002::/16) carries an IPv4 address in bits 16..48.
    if s[0] == 0x2002 {
        return v4_reason(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("the cloud metadata address");
    }
    if s[0] & 0xfe00 == 0xfc00 {
        return Some("a unique-local (private) address");
    }
    if s[0] & 0xffc0 == 0xfe80 {
        return Some("a link-local address");
    }
    if s[0] & 0xffc0 == 0xfec0 {
        return Some("a site-local address");
    }
    if s[0] & 0xff00 == 0xff00 {
        return Some("a multicast address");
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 {
        return Some("a documentation address");
    }
    if s[0..4] == [0x0100, 0, 0, 0] {
        return Some("a discard-only address");
    }
    None
}

/// The reason to refuse an address of the local-use NAT64 prefix `64:ff9b:1::/48`: the first
/// refused IPv4 address it embeds under the RFC 6052 layouts for prefix lengths /48, /56, /64 and
/// /96 (a layout counts when its `u` octet, bits 64..72, and its suffix are zero; /96 always
/// counts). `None` when every such IPv4 address is public.
fn local_nat64_reason(ip: Ipv6Addr) -> Option<&'static str> {
    let b = ip.octets();
    let zero = |r: std::ops::Range<usize>| b[r].iter().all(|x| *x == 0);
    let layouts = [
        (b[8] == 0 && zero(11..16)).then_some([b[6], b[7], b[9], b[10]]),
        (b[8] == 0 && zero(12..16)).then_some([b[7], b[9], b[10], b[11]]),
        (b[8] == 0 && zero(13..16)).then_some([b[9], b[10], b[11], b[12]]),
        Some([b[12], b[13], b[14], b[15]]),
    ];
    layouts
        .into_iter()
        .flatten()
        .find_map(|v4| v4_reason(Ipv4Addr::from(v4)))
}

/// A refusal by the guard; its text is written for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SsrfRefused(pub String);

/// The allow list plus the resolver: everything needed to judge a URL.
#[derive(Clone)]
pub struct SsrfGuard {
    allow_private: Arc<Vec<String>>,
    lookup: Arc<dyn Lookup>,
}

impl std::fmt::Debug for SsrfGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SsrfGuard")
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

/// A host as written in a URL or the config: lowercase, IPv6 brackets and a trailing dot
/// removed.
fn normalize_host(host: &str) -> String {
    let h = host.trim().trim_start_matches('[').trim_end_matches(']');
    h.trim_end_matches('.').to_ascii_lowercase()
}

impl SsrfGuard {
    pub fn new(allow_private: &[String], lookup: Arc<dyn Lookup>) -> Self {
        let allow = allow_private
            .iter()
            .map(|h| normalize_host(h))
            .filter(|h| !h.is_empty())
            .collect();
        Self {
            allow_private: Arc::new(allow),
            lookup,
        }
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

    /// Check a URL before connecting: scheme, and the address of an IP-literal host. Host names
    /// are judged by [`GuardedResolver`] after resolution.
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), SsrfRefused> {
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(SsrfRefused(format!(
                "{url} is not an http(s) URL; web_fetch fetches http:// and https:// only"
            )));
        }
        let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
            return Err(SsrfRefused(format!("{url} has no host")));
        };
        // The URL parser has already normalised IPv4 spellings (`2130706433`, `0x7f.1`).
        match normalize_host(host).parse::<IpAddr>() {
            Ok(ip) => self.check_ip(host, ip),
            Err(_) => Ok(()),
        }
    }

    fn check_ip(&self, host: &str, ip: IpAddr) -> Result<(), SsrfRefused> {
        match non_public_reason(ip) {
            Some(why) if !self.host_allowed(host) => Err(refusal(host, ip, why)),
            _ => Ok(()),
        }
    }

    /// Resolve `host` and keep the addresses it may reach; an error when none is left.
    pub async fn resolve(
        &self,
        host: &str,
    ) -> Result<Vec<IpAddr>, Box<dyn std::error::Error + Send + Sync>> {
        if let Ok(ip) = normalize_host(host).parse::<IpAddr>() {
            self.check_ip(host, ip)?;
            return Ok(vec![ip]);
        }
        let addrs = self.lookup.lookup(host).await?;
        if self.host_allowed(host) {
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
            (true, Some((ip, why))) => Err(Box::new(refusal(host, ip, why))),
            (true, None) => Err(Box::new(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{host} has no address"),
            ))),
        }
    }

    /// The `reqwest` resolver enforcing this guard.
    pub fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver {
            guard: self.clone(),
        })
    }
}

fn refusal(host: &str, ip: IpAddr, why: &str) -> SsrfRefused {
    let shown = if normalize_host(host) == ip.to_string() {
        ip.to_string()
    } else {
        format!("{host} ({ip})")
    };
    SsrfRefused(format!(
        "{shown} is {why}; web_fetch only reaches public addresses. \
         The owner can exempt a host by listing it in tools.web_fetch.allow_private"
    ))
}

/// A `reqwest` DNS resolver that filters what the system (or test) resolver returns through an
/// [`SsrfGuard`].
pub struct GuardedResolver {
    guard: SsrfGuard,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let ips = guard.resolve(&host).await?;
            let addrs: reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// The guard's refusal inside an error chain (as returned by `reqwest`), if there is one.
pub fn find_refusal(err: &(dyn std::error::Error + 'static)) -> Option<SsrfRefused> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<SsrfRefused>() {
            return Some(r.clone());
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translated_and_local_nat64_forms_are_judged_by_the_ipv4_address() {
        // `::ffff:0:a.b.c.d` (RFC 2765 IPv4-translated) and `64:ff9b:1::/48` (RFC 8215
        // local-use NAT64, IPv4 in the last 32 bits).
        for s in [
            "::ffff:0:127.0.0.1",
            "::ffff:0:10.1.2.3",
            "::ffff:0:169.254.169.254",
            "64:ff9b:1::127.0.0.1",
            "64:ff9b:1::10.1.2.3",
            "64:ff9b:1::169.254.169.254",
            "64:ff9b:1:ffff:ffff:ffff:7f00:1",
            "64:ff9b:1:1234::a00:1",
        ] {
            assert!(non_public_reason(ip(s)).is_some(), "{s} should be refused");
        }
        assert_eq!(
            non_public_reason(ip("::ffff:0:169.254.169.254")),
            Some("the cloud metadata address")
        );
        assert_eq!(
            non_public_reason(ip("64:ff9b:1::169.254.169.254")),
            Some("the cloud metadata address")
        );
        // A public IPv4 address in these forms is public, as with `::ffff:a.b.c.d` and
        // `64:ff9b::/96`.
        for s in [
            "::ffff:0:1.1.1.1",
            "64:ff9b:1::1.1.1.1",
            "64:ff9b:1::8.8.8.8",
        ] {
            assert!(non_public_reason(ip(s)).is_none(), "{s} should be allowed");
        }
        // The shorter RFC 6052 layouts of the local-use prefix put the IPv4 address elsewhere
        // (`/64`: bits 72..104); one that embeds a refused address there is refused too.
        assert!(non_public_reason(ip("64:ff9b:1:0:7f:0:100::")).is_some());
        let g = SsrfGuard::new(&[], Arc::new(StaticLookup::new()));
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(g.check_url(&u("http://[::ffff:0:7f00:1]/")).is_err());
        assert!(g
            .check_url(&u("http://[64:ff9b:1::a9fe:a9fe]/latest"))
            .is_err());
        assert!(g.check_url(&u("http://[64:ff9b:1::101:101]/")).is_ok());
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn classifies_addresses() {
        for s in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "100.100.100.200",
            "100.127.255.255",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(non_public_reason(ip(s)).is_some(), "{s} should be refused");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(non_public_reason(ip(s)).is_none(), "{s} should be allowed");
        }
        assert_eq!(
            non_public_reason(ip("169.254.169.254")),
            Some("the cloud metadata address")
        );
        assert_eq!(
            non_public_reason(ip("fd00:ec2::254")),
            Some("the cloud metadata address")
        );
    }

    #[test]
    fn ip_literal_urls() {
        let g = SsrfGuard::new(&["127.0.0.1".into()], Arc::new(StaticLookup::new()));
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(g.check_url(&u("http://127.0.0.1:8080/")).is_ok());
        assert!(g.check_url(&u("http://127.0.0.2/")).is_err());
        assert!(g.check_url(&u("http://[::1]/")).is_err());
        assert!(g.check_url(&u("http://169.254.169.254/latest")).is_err());
        assert!(g.check_url(&u("http://[fd00:ec2::254]/")).is_err());
        assert!(g.check_url(&u("file:///etc/passwd")).is_err());
        assert!(g.check_url(&u("https://example.com/")).is_ok());
        // Integer and hex spellings are parsed as IPv4 by the URL parser.
        assert!(g.check_url(&u("http://2130706434/")).is_err());
        assert!(g.check_url(&u("http://0x7f.0.0.2/")).is_err());
        let err = g.check_url(&u("http://[::1]/")).unwrap_err().0;
        assert!(err.contains("loopback"), "{err}");
        assert!(err.contains("allow_private"), "{err}");
    }

    #[tokio::test]
    async fn resolution_is_filtered() {
        let lookup = StaticLookup::new()
            .with("intranet.example", &[ip("10.0.0.5")])
            .with("mixed.example", &[ip("10.0.0.5"), ip("93.184.216.34")])
            .with("public.example", &[ip("93.184.216.34")])
            .with("dev.local", &[ip("192.168.1.9")]);
        let g = SsrfGuard::new(&["DEV.local".into()], Arc::new(lookup));
        let err = g.resolve("intranet.example").await.unwrap_err();
        let refusal = find_refusal(err.as_ref()).expect("a refusal");
        assert!(
            refusal.0.contains("intranet.example (10.0.0.5)"),
            "{refusal}"
        );
        assert_eq!(
            g.resolve("mixed.example").await.unwrap(),
            vec![ip("93.184.216.34")]
        );
        assert!(g.resolve("public.example").await.is_ok());
        assert_eq!(
            g.resolve("dev.local").await.unwrap(),
            vec![ip("192.168.1.9")]
        );
        assert!(g.resolve("nowhere.example").await.is_err());
    }
}
