//! A text the session was handed that the index cannot take in (its owner kept only a digest
//! of it): from then on the index is as one that overflowed, so no value turns clean for
//! want of it.

use proto::Class;

use super::ValueIndex;

impl ValueIndex {
    /// Notes that the answer to `call_id`, with `class` and `untrusted`, was handed out but
    /// cannot be indexed (a rebuilt index whose record kept only a digest): a value the index
    /// does not hold is no longer proven new ([`super::Verdict::unproven`]).
    pub fn lost(&mut self, call_id: u64, class: Class, untrusted: bool) {
        self.note_overflow(call_id, class, untrusted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provenance::{Caps, Value, ValueKind};

    #[test]
    fn a_lost_answer_leaves_unheld_values_unproven_and_held_ones_as_they_were() {
        let mut index = ValueIndex::new([7; 16], Caps::default());
        index.add(crate::provenance::Source::OwnerWords, "cargo test");
        index.lost(4, Class::Public, true);
        let value = |text| Value {
            name: "command",
            kind: ValueKind::Identifier,
            text,
        };
        assert!(index.check(&[value("cargo")]).clean());
        let verdict = index.check(&[value("evil.example")]);
        assert!(!verdict.clean());
        assert_eq!(verdict.unproven.map(|u| u.overflow.first_call), Some(4));
    }
}
