//! The resolved-address deny set: addresses the proxy never connects to, whatever name led to
//! them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Rule id of an address refusal.
pub const RULE_ADDRESS: &str = "net_address_denied";

/// Why `ip` is never connected to, or `None` when it may be. `loopback_upstream` lifts the
/// loopback ranges only (tests of the proxy against a local upstream).
pub fn denied(ip: IpAddr, loopback_upstream: bool) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => denied_v4(v4, loopback_upstream),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return denied_v4(v4, loopback_upstream);
            }
            denied_v6(v6, loopback_upstream)
        }
    }
    .or_else(|| {
        (!(loopback_upstream && ip.is_loopback()) && is_own_address(ip))
            .then_some("an address of this host")
    })
}

fn denied_v4(ip: Ipv4Addr, loopback_upstream: bool) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => "the cloud metadata address",
        (127, _) if loopback_upstream => return None,
        (127, _) => "a loopback address",
        (0, _) => "an unspecified (`this network`) address",
        (10, _) | (192, 168) => "a private address",
        (172, 16..=31) => "a private address",
        (100, 64..=127) => "a shared (CGNAT) address",
        (169, 254) => "a link-local address",
        (192, 0) if c == 0 => "an IETF protocol address",
        (198, 18..=19) => "a benchmarking address",
        (224..=239, _) => "a multicast address",
        (240..=255, _) => "a reserved or broadcast address",
        _ => return None,
    })
}

fn denied_v6(ip: Ipv6Addr, loopback_upstream: bool) -> Option<&'static str> {
    let s = ip.segments();
    Some(if ip.is_loopback() {
        if loopback_upstream {
            return None;
        }
        "a loopback address"
    } else if ip.is_unspecified() {
        "an unspecified address"
    } else if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        "the cloud metadata address"
    } else if s[0] & 0xfe00 == 0xfc00 {
        "a unique local (private) address"
    } else if s[0] & 0xffc0 == 0xfe80 || s[0] & 0xffc0 == 0xfec0 {
        "a link-local or site-local address"
    } else if s[0] & 0xff00 == 0xff00 {
        "a multicast address"
    } else {
        return None;
    })
}

/// The IPv4 address an IPv6 one carries (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`,
/// NAT64 `64:ff9b::/96`), which is what it reaches.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = || {
        let [.., a, b, c, d] = ip.octets();
        Ipv4Addr::new(a, b, c, d)
    };
    if s[..5] == [0; 5] && (s[5] == 0xffff || (s[5] == 0 && (s[6] != 0 || s[7] > 1))) {
        return Some(tail());
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail());
    }
    None
}

/// An address one of this host's interfaces holds: only those can be bound.
fn is_own_address(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind((ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Option<&'static str> {
        denied(s.parse().unwrap(), false)
    }

    #[test]
    fn the_deny_set() {
        for a in [
            "127.0.0.1",
            "127.8.9.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.169.254",
            "169.254.1.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00:ec2::254",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(d(a).is_some(), "{a} must be denied");
        }
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(d(a), None, "{a} must be allowed");
        }
        assert_eq!(d("169.254.169.254"), Some("the cloud metadata address"));
    }

    #[test]
    fn loopback_escape_lifts_loopback_only() {
        assert_eq!(denied("127.0.0.1".parse().unwrap(), true), None);
        assert_eq!(denied("::1".parse().unwrap(), true), None);
        assert!(denied("10.0.0.1".parse().unwrap(), true).is_some());
        assert!(denied("169.254.169.254".parse().unwrap(), true).is_some());
    }
}
