//! Which addresses count as not public: loopback, private (RFC 1918), link-local (including
//! the cloud metadata address 169.254.169.254), CGNAT (100.64.0.0/10, which holds Alibaba
//! Cloud's 100.100.100.200), unique-local IPv6 (fc00::/7, which holds AWS's fd00:ec2::254),
//! multicast, documentation, benchmarking and otherwise reserved addresses. IPv4 addresses
//! embedded in IPv6 (`::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64
//! `64:ff9b::/96`, local-use NAT64 `64:ff9b:1::/48`, 6to4 `2002::/16`) are judged by the IPv4
//! address: refused when it would be, allowed when it is public. For `64:ff9b:1::/48`, whose
//! operator may pick any RFC 6052 prefix length, the address is refused when any layout it fits
//! embeds a refused IPv4 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// A host as written in a URL or the config: lowercase, IPv6 brackets and a trailing dot
/// removed.
pub fn normalize_host(host: &str) -> String {
    let h = host.trim().trim_start_matches('[').trim_end_matches(']');
    h.trim_end_matches('.').to_ascii_lowercase()
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
}
