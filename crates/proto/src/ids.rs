//! Typed ids for the frames the broker, the ledger and the owner exchange, so a session id is
//! never passed where a grant id belongs. Each is written on the wire as its bare value
//! (`serde(transparent)`). The seed-shaped types (`ToolRequest`, `ToolResponse`, the turn
//! events) keep their plain `String` and `u64` fields.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                $name(text.to_string())
            }
        }
    };
}

macro_rules! number_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

text_id!(
    /// A broker session: one conversation for its whole life, issued by the broker.
    SessionId
);
text_id!(
    /// A grant, by the `id` its owner wrote.
    GrantId
);
number_id!(
    /// A tool call within its session, numbered by the client from 1.
    CallId
);
number_id!(
    /// A pending approval, numbered by the broker.
    ApprovalId
);

/// SHA-256 of `bytes` as lower-case hex: how tokens are kept and compared, and the content
/// hash of read before write (one digest for the ledger, the tools and `bx mcp`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

/// `digest` as lower-case hex.
pub fn hex(digest: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// Whether two digests (or tokens of a fixed length) are equal, in time that does not depend on
/// where they differ: how resume tokens and bearer tokens are compared, by their hashes.
pub fn digests_equal(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod digest_tests {
    use super::digests_equal;

    #[test]
    fn the_digest_is_sha256_in_lower_case_hex() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(super::hex(&[0, 255, 16]), "00ff10");
    }

    #[test]
    fn digests_are_equal_only_when_every_byte_is() {
        assert!(digests_equal("ab12", "ab12"));
        assert!(!digests_equal("ab12", "ab13"));
        assert!(!digests_equal("ab12", "ab1"));
        assert!(digests_equal("", ""));
    }
}
