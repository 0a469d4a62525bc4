//! Which IP addresses `http_fetch` may connect to without a grant naming the host explicitly.
//!
//! Everything that is not a public unicast address is refused: loopback, private (RFC 1918,
//! fc00::/7, the old site-local fec0::/10), link-local, the shared CGNAT range, documentation,
//! benchmarking and other reserved ranges, unspecified, broadcast and multicast, and the cloud
//! metadata addresses. IPv6 forms that carry an IPv4 address (mapped `::ffff:a.b.c.d`, NAT64
//! `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`) are judged by that IPv4 address; the deprecated
//! IPv4-compatible `::a.b.c.d` range and the IETF protocol block 2001::/23 (Teredo among them)
//! are refused whole.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The cloud metadata services: AWS/GCP/Azure/OpenStack, AWS over IPv6, Alibaba.
pub const METADATA_ADDRESSES: [IpAddr; 3] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
];

/// Why an address is not a public destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnsafeKind {
    /// A cloud metadata service ([`METADATA_ADDRESSES`]).
    Metadata,
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918, fc00::/7, fec0::/10, local-use NAT64 64:ff9b:1::/48.
    Private,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// 100.64.0.0/10, the carrier-grade NAT range.
    SharedAddressSpace,
    /// 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// Other special-purpose ranges (192.0.0.0/24, 198.18.0.0/15, 240.0.0.0/4, 2001::/23, …).
    Reserved,
    /// 0.0.0.0/8, ::.
    Unspecified,
    /// 255.255.255.255.
    Broadcast,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
}

impl UnsafeKind {
    /// The kind with its article, for messages: "a loopback", "an unspecified".
    pub fn describe(self) -> &'static str {
        match self {
            UnsafeKind::Metadata => "a cloud metadata",
            UnsafeKind::Loopback => "a loopback",
            UnsafeKind::Private => "a private",
            UnsafeKind::LinkLocal => "a link-local",
            UnsafeKind::SharedAddressSpace => "a shared (CGNAT)",
            UnsafeKind::Documentation => "a documentation",
            UnsafeKind::Reserved => "a reserved",
            UnsafeKind::Unspecified => "an unspecified",
            UnsafeKind::Broadcast => "a broadcast",
            UnsafeKind::Multicast => "a multicast",
        }
    }

    /// Kinds refused even for a host named explicitly: the cloud metadata addresses (the
    /// classic way from a fetch to a machine's credentials, whatever name leads there), and
    /// what is no unicast destination at all (0.0.0.0 would reach this machine on Linux).
    pub fn never_allowed(self) -> bool {
        matches!(
            self,
            UnsafeKind::Metadata
                | UnsafeKind::Unspecified
                | UnsafeKind::Broadcast
                | UnsafeKind::Multicast
        )
    }
}

/// `None` for a public unicast address; otherwise why it is not one.
pub fn classify(ip: IpAddr) -> Option<UnsafeKind> {
    if METADATA_ADDRESSES.contains(&ip) {
        return Some(UnsafeKind::Metadata);
    }
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// True when `ip` is a public unicast address.
pub fn is_public(ip: IpAddr) -> bool {
    classify(ip).is_none()
}

fn in_v4(ip: u32, network: [u8; 4], prefix: u32) -> bool {
    let network = u32::from_be_bytes(network);
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    ip & mask == network & mask
}

fn classify_v4(ip: Ipv4Addr) -> Option<UnsafeKind> {
    if METADATA_ADDRESSES.contains(&IpAddr::V4(ip)) {
        return Some(UnsafeKind::Metadata);
    }
    let n = u32::from(ip);
    let ranges: [([u8; 4], u32, UnsafeKind); 16] = [
        ([0, 0, 0, 0], 8, UnsafeKind::Unspecified),
        ([10, 0, 0, 0], 8, UnsafeKind::Private),
        ([100, 64, 0, 0], 10, UnsafeKind::SharedAddressSpace),
        ([127, 0, 0, 0], 8, UnsafeKind::Loopback),
        ([169, 254, 0, 0], 16, UnsafeKind::LinkLocal),
        ([172, 16, 0, 0], 12, UnsafeKind::Private),
        ([192, 0, 0, 0], 24, UnsafeKind::Reserved),
        ([192, 0, 2, 0], 24, UnsafeKind::Documentation),
        ([192, 88, 99, 0], 24, UnsafeKind::Reserved),
        ([192, 168, 0, 0], 16, UnsafeKind::Private),
        ([198, 18, 0, 0], 15, UnsafeKind::Reserved),
        ([198, 51, 100, 0], 24, UnsafeKind::Documentation),
        ([203, 0, 113, 0], 24, UnsafeKind::Documentation),
        ([224, 0, 0, 0], 4, UnsafeKind::Multicast),
        ([255, 255, 255, 255], 32, UnsafeKind::Broadcast),
        ([240, 0, 0, 0], 4, UnsafeKind::Reserved),
    ];
    ranges
        .iter()
        .find(|(network, prefix, _)| in_v4(n, *network, *prefix))
        .map(|(_, _, kind)| *kind)
}

fn in_v6(ip: u128, network: u128, prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    ip & mask == network & mask
}

fn classify_v6(ip: Ipv6Addr) -> Option<UnsafeKind> {
    if METADATA_ADDRESSES.contains(&IpAddr::V6(ip)) {
        return Some(UnsafeKind::Metadata);
    }
    if ip.is_unspecified() {
        return Some(UnsafeKind::Unspecified);
    }
    if ip.is_loopback() {
        return Some(UnsafeKind::Loopback);
    }
    let n = u128::from(ip);
    let low_v4 = Ipv4Addr::from((n & 0xffff_ffff) as u32);
    // ::ffff:a.b.c.d, IPv4-mapped: the IPv4 address is what a socket reaches.
    if in_v6(n, 0xffff_0000_0000, 96) {
        return classify_v4(low_v4);
    }
    // ::a.b.c.d, IPv4-compatible (deprecated) and the rest of ::/96.
    if in_v6(n, 0, 96) {
        return Some(UnsafeKind::Reserved);
    }
    // 64:ff9b::/96, well-known NAT64 prefix: the gateway connects to the embedded address.
    if in_v6(n, 0x0064_ff9b << 96, 96) {
        return classify_v4(low_v4);
    }
    // 2002::/16, 6to4: the IPv4 address is in bits 16..48.
    if in_v6(n, 0x2002 << 112, 16) {
        return classify_v4(Ipv4Addr::from(((n >> 80) & 0xffff_ffff) as u32));
    }
    let ranges: [(u128, u32, UnsafeKind); 10] = [
        (0x0064_ff9b_0001 << 80, 48, UnsafeKind::Private),
        (0x0100 << 112, 64, UnsafeKind::Reserved),
        (0x2001_0db8 << 96, 32, UnsafeKind::Documentation),
        (0x2001 << 112, 23, UnsafeKind::Reserved),
        (0x3fff << 112, 20, UnsafeKind::Documentation),
        (0xfc00 << 112, 7, UnsafeKind::Private),
        (0xfe80 << 112, 10, UnsafeKind::LinkLocal),
        (0xfec0 << 112, 10, UnsafeKind::Private),
        (0xff00 << 112, 8, UnsafeKind::Multicast),
        // Anything else outside the global unicast block 2000::/3 is not assigned.
        (0, 0, UnsafeKind::Reserved),
    ];
    let last = ranges.len() - 1;
    if let Some((_, _, kind)) = ranges[..last]
        .iter()
        .find(|(network, prefix, _)| in_v6(n, *network, *prefix))
    {
        return Some(*kind);
    }
    if in_v6(n, 0x2000 << 112, 3) {
        None
    } else {
        Some(ranges[last].2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(text: &str) -> IpAddr {
        IpAddr::V4(text.parse().unwrap_or(Ipv4Addr::UNSPECIFIED))
    }

    fn v6(text: &str) -> IpAddr {
        IpAddr::V6(text.parse().unwrap_or(Ipv6Addr::UNSPECIFIED))
    }

    fn mapped(ip: Ipv4Addr) -> IpAddr {
        IpAddr::V6(ip.to_ipv6_mapped())
    }

    #[test]
    fn public_addresses_are_safe() {
        for ip in [
            v4("1.1.1.1"),
            v4("8.8.8.8"),
            v4("93.184.216.34"),
            v4("172.32.0.1"),
            v4("100.128.0.1"),
            v4("192.169.0.1"),
            v6("2606:4700:4700::1111"),
            v6("2a00:1450:4001:80b::200e"),
            v6("::ffff:1.1.1.1"),
            v6("64:ff9b::808:808"),
            v6("2002:0808:0808::1"),
        ] {
            assert_eq!(classify(ip), None, "{ip}");
        }
    }

    #[test]
    fn special_addresses_have_their_kind() {
        let cases = [
            (v4("127.0.0.1"), UnsafeKind::Loopback),
            (v4("10.0.0.5"), UnsafeKind::Private),
            (v4("172.31.255.255"), UnsafeKind::Private),
            (v4("192.168.1.1"), UnsafeKind::Private),
            (v4("169.254.1.1"), UnsafeKind::LinkLocal),
            (v4("169.254.169.254"), UnsafeKind::Metadata),
            (v4("100.100.100.200"), UnsafeKind::Metadata),
            (v6("fd00:ec2::254"), UnsafeKind::Metadata),
            (v6("::ffff:169.254.169.254"), UnsafeKind::Metadata),
            (v4("100.64.0.1"), UnsafeKind::SharedAddressSpace),
            (v4("0.0.0.0"), UnsafeKind::Unspecified),
            (v4("0.1.2.3"), UnsafeKind::Unspecified),
            (v4("255.255.255.255"), UnsafeKind::Broadcast),
            (v4("224.0.0.1"), UnsafeKind::Multicast),
            (v4("240.0.0.1"), UnsafeKind::Reserved),
            (v4("192.0.2.1"), UnsafeKind::Documentation),
            (v6("::"), UnsafeKind::Unspecified),
            (v6("::1"), UnsafeKind::Loopback),
            (v6("::ffff:127.0.0.1"), UnsafeKind::Loopback),
            (v6("::ffff:10.1.2.3"), UnsafeKind::Private),
            (v6("::127.0.0.1"), UnsafeKind::Reserved),
            (v6("64:ff9b::a00:5"), UnsafeKind::Private),
            (v6("64:ff9b:1::1"), UnsafeKind::Private),
            (v6("2002:7f00:0001::1"), UnsafeKind::Loopback),
            (v6("2001::1"), UnsafeKind::Reserved),
            (v6("2001:db8::1"), UnsafeKind::Documentation),
            (v6("fc00::1"), UnsafeKind::Private),
            (v6("fd12:3456::1"), UnsafeKind::Private),
            (v6("fe80::1"), UnsafeKind::LinkLocal),
            (v6("fec0::1"), UnsafeKind::Private),
            (v6("ff02::1"), UnsafeKind::Multicast),
            (v6("4000::1"), UnsafeKind::Reserved),
        ];
        for (ip, kind) in cases {
            assert_eq!(classify(ip), Some(kind), "{ip}");
        }
    }

    #[test]
    fn only_metadata_unspecified_broadcast_and_multicast_are_never_allowed() {
        assert!(UnsafeKind::Metadata.never_allowed());
        assert!(UnsafeKind::Unspecified.never_allowed());
        assert!(UnsafeKind::Multicast.never_allowed());
        assert!(UnsafeKind::Broadcast.never_allowed());
        assert!(!UnsafeKind::Loopback.never_allowed());
        assert!(!UnsafeKind::Private.never_allowed());
    }

    const V4_RANGES: [([u8; 4], u32); 6] = [
        ([10, 0, 0, 0], 8),
        ([127, 0, 0, 0], 8),
        ([169, 254, 0, 0], 16),
        ([172, 16, 0, 0], 12),
        ([192, 168, 0, 0], 16),
        ([100, 64, 0, 0], 10),
    ];

    fn in_range_v4(index: usize, bits: u32) -> Ipv4Addr {
        let (network, prefix) = V4_RANGES[index % V4_RANGES.len()];
        let host_mask = u32::MAX.checked_shr(prefix).unwrap_or(0);
        Ipv4Addr::from(u32::from_be_bytes(network) | (bits & host_mask))
    }

    fn in_range_v6(network: u128, prefix: u32, bits: u128) -> IpAddr {
        let host_mask = u128::MAX.checked_shr(prefix).unwrap_or(0);
        IpAddr::V6(Ipv6Addr::from(network | (bits & host_mask)))
    }

    proptest! {
        #[test]
        fn no_address_in_a_special_ipv4_range_is_safe(index in 0usize..6, bits in any::<u32>()) {
            let ip = in_range_v4(index, bits);
            prop_assert!(classify(IpAddr::V4(ip)).is_some(), "{}", ip);
            prop_assert!(classify(mapped(ip)).is_some(), "mapped {}", ip);
            let nat64 = IpAddr::V6(Ipv6Addr::from((0x0064_ff9b_u128 << 96) | u128::from(u32::from(ip))));
            prop_assert!(classify(nat64).is_some(), "{}", nat64);
            let six_to_four = IpAddr::V6(Ipv6Addr::from((0x2002_u128 << 112) | (u128::from(u32::from(ip)) << 80)));
            prop_assert!(classify(six_to_four).is_some(), "{}", six_to_four);
        }

        #[test]
        fn no_unique_local_or_link_local_ipv6_address_is_safe(bits in any::<u128>()) {
            let ula = in_range_v6(0xfc00 << 112, 7, bits);
            prop_assert!(classify(ula).is_some(), "{}", ula);
            let link_local = in_range_v6(0xfe80 << 112, 10, bits);
            prop_assert!(classify(link_local).is_some(), "{}", link_local);
        }

        #[test]
        fn a_safe_address_is_global_unicast(bits in any::<u128>()) {
            let ip = IpAddr::V6(Ipv6Addr::from(bits));
            if classify(ip).is_none() {
                let global = (bits >> 125) == 1;
                let embeds_v4 = Ipv6Addr::from(bits).to_ipv4_mapped().is_some()
                    || (bits >> 32) == (0x0064_ff9b << 64);
                prop_assert!(global || embeds_v4, "{}", ip);
            }
        }

        #[test]
        fn classify_never_panics(bits in any::<u32>()) {
            let _ = classify(IpAddr::V4(Ipv4Addr::from(bits)));
        }
    }
}
