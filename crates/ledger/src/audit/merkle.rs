//! RFC 9162's Merkle tree hashing (section 2.1), pure: no I/O, no knowledge of records. A leaf
//! is `SHA-256(0x00 || bytes)`, a node `SHA-256(0x01 || left || right)`, and a tree of `n > 1`
//! leaves splits at `k`, the largest power of two below `n`. Inclusion proofs (2.1.3) and
//! consistency proofs (2.1.4) are generated from the leaf hashes and verified by the RFC's own
//! algorithms, so a proof made here is checked by any implementation of the RFC.
//!
//! Generating walks every leaf hash once (the tree is not stored); verifying is logarithmic.

use std::fmt;

use sha2::{Digest, Sha256};

/// A SHA-256 digest: a leaf's, a node's or a tree's root.
pub type Hash = [u8; 32];

/// The root of the empty tree: SHA-256 of no bytes.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// A leaf's hash: `SHA-256(0x00 || bytes)`.
pub fn leaf_hash(bytes: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0u8]);
    hasher.update(bytes);
    hasher.finalize().into()
}

/// An interior node's hash: `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([1u8]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// Why a proof cannot be made or does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProofError {
    /// The leaf asked for is not in a tree of that size.
    LeafOutsideTree {
        /// The leaf's index, from 0.
        index: u64,
        /// The tree's size.
        size: u64,
    },
    /// The sizes of a consistency proof are not `0 < old <= new`, or the tree asked for is
    /// larger than the leaves given.
    Sizes {
        /// The older (smaller) size.
        old: u64,
        /// The newer size.
        new: u64,
    },
    /// The proof has too many or too few hashes for the sizes it is for.
    Length,
    /// The proof's hashes do not lead to the root (or roots) given.
    Mismatch,
}

impl fmt::Display for ProofError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProofError::LeafOutsideTree { index, size } => {
                write!(f, "leaf {index} is not in a tree of {size} leaves")
            }
            ProofError::Sizes { old, new } => write!(
                f,
                "no consistency proof between sizes {old} and {new}: it needs 0 < old <= new <= the log's size"
            ),
            ProofError::Length => write!(
                f,
                "the proof has the wrong number of hashes for the sizes it is for"
            ),
            ProofError::Mismatch => write!(f, "the proof's hashes do not lead to the root given"),
        }
    }
}

/// The largest power of two strictly below `n` (`n >= 2`).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k << 1 < n {
        k <<= 1;
    }
    k
}

/// MTH: the root of the tree over `leaves` (leaf hashes, in order).
pub fn root(leaves: &[Hash]) -> Hash {
    match leaves {
        [] => empty_root(),
        [one] => *one,
        _ => {
            let (left, right) = leaves.split_at(split(leaves.len()));
            node_hash(&root(left), &root(right))
        }
    }
}

/// PATH(index, D\[n\]): the inclusion proof of leaf `index` in the tree over `leaves`, from the
/// leaf's sibling up.
pub fn inclusion_proof(leaves: &[Hash], index: u64) -> Result<Vec<Hash>, ProofError> {
    let size = leaves.len() as u64;
    if index >= size {
        return Err(ProofError::LeafOutsideTree { index, size });
    }
    let mut proof = Vec::new();
    path(leaves, index as usize, &mut proof);
    Ok(proof)
}

fn path(leaves: &[Hash], m: usize, proof: &mut Vec<Hash>) {
    if leaves.len() <= 1 {
        return;
    }
    let k = split(leaves.len());
    let (left, right) = leaves.split_at(k);
    if m < k {
        path(left, m, proof);
        proof.push(root(right));
    } else {
        path(right, m - k, proof);
        proof.push(root(left));
    }
}

/// PROOF(old, D\[n\]): the consistency proof that the tree over the first `old` of `leaves` is
/// a prefix of the tree over all of them. Empty when `old` is their number.
pub fn consistency_proof(leaves: &[Hash], old: u64) -> Result<Vec<Hash>, ProofError> {
    let new = leaves.len() as u64;
    if old == 0 || old > new {
        return Err(ProofError::Sizes { old, new });
    }
    let mut proof = Vec::new();
    subproof(old as usize, leaves, true, &mut proof);
    Ok(proof)
}

fn subproof(m: usize, leaves: &[Hash], whole: bool, proof: &mut Vec<Hash>) {
    let n = leaves.len();
    if m == n {
        if !whole {
            proof.push(root(leaves));
        }
        return;
    }
    let k = split(n);
    let (left, right) = leaves.split_at(k);
    if m <= k {
        subproof(m, left, whole, proof);
        proof.push(root(right));
    } else {
        subproof(m - k, right, false, proof);
        proof.push(root(left));
    }
}

/// RFC 9162 2.1.3.2: the root that `proof` leads to from `leaf` at `index` in a tree of
/// `size` leaves (compare it with the root you trust).
pub fn root_from_inclusion(
    index: u64,
    size: u64,
    leaf: &Hash,
    proof: &[Hash],
) -> Result<Hash, ProofError> {
    if index >= size {
        return Err(ProofError::LeafOutsideTree { index, size });
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if snode == 0 {
            return Err(ProofError::Length);
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(ProofError::Length);
    }
    Ok(r)
}

/// Whether `proof` shows `leaf` at `index` in the tree of `size` leaves whose root is `root`.
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf: &Hash,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    if root_from_inclusion(index, size, leaf, proof)? == *root {
        Ok(())
    } else {
        Err(ProofError::Mismatch)
    }
}

/// RFC 9162 2.1.4.2: whether `proof` shows the tree of `old` leaves with root `old_root` to
/// be a prefix of the tree of `new` leaves with root `new_root`. Equal sizes need an empty
/// proof and equal roots.
pub fn verify_consistency(
    old: u64,
    new: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> Result<(), ProofError> {
    if old == 0 || old > new {
        return Err(ProofError::Sizes { old, new });
    }
    if old == new {
        if !proof.is_empty() {
            return Err(ProofError::Length);
        }
        return if old_root == new_root {
            Ok(())
        } else {
            Err(ProofError::Mismatch)
        };
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if old.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let Some((first, rest)) = path.split_first() else {
        return Err(ProofError::Length);
    };
    let (mut fnode, mut snode) = (old - 1, new - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if snode == 0 {
            return Err(ProofError::Length);
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    if snode != 0 {
        return Err(ProofError::Length);
    }
    if fr == *old_root && sr == *new_root {
        Ok(())
    } else {
        Err(ProofError::Mismatch)
    }
}

/// The right edge of a tree being grown a leaf at a time (a compact range): the roots of its
/// perfect subtrees, largest first, so the root of every size is known without keeping the
/// leaves. What a witness uses to check that the leaves it is sent make the root it is shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frontier {
    /// Each perfect subtree: its number of leaves (a power of two) and its root.
    subtrees: Vec<(u64, Hash)>,
    size: u64,
}

impl Frontier {
    /// Adds one leaf hash.
    pub fn push(&mut self, leaf: Hash) {
        let mut node = (1u64, leaf);
        while let Some(&(size, left)) = self.subtrees.last() {
            if size != node.0 {
                break;
            }
            self.subtrees.pop();
            node = (size * 2, node_hash(&left, &node.1));
        }
        self.subtrees.push(node);
        self.size += 1;
    }

    /// How many leaves it holds.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The root of the tree of every leaf pushed (RFC 9162's MTH: the largest perfect subtree
    /// on the left, the rest folded from the right).
    pub fn root(&self) -> Hash {
        let mut subtrees = self.subtrees.iter().rev();
        let Some(&(_, mut root)) = subtrees.next() else {
            return empty_root();
        };
        for (_, left) in subtrees {
            root = node_hash(left, &root);
        }
        root
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The root recomputed the naive way, level by level (an odd last node moves up as it
    /// is): a second construction that gives the split rule's tree.
    fn naive_root(leaves: &[Hash]) -> Hash {
        if leaves.is_empty() {
            return empty_root();
        }
        let mut level = leaves.to_vec();
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|pair| match pair {
                    [l, r] => node_hash(l, r),
                    [one] => *one,
                    _ => unreachable!(),
                })
                .collect();
        }
        level[0]
    }

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(format!("record {i}").as_bytes()))
            .collect()
    }

    #[test]
    fn leaves_and_nodes_are_hashed_apart_with_the_rfc_prefixes() {
        // SHA-256 of the single byte 0x00: the RFC's hash of an empty leaf.
        assert_eq!(
            proto::ids::hex(&leaf_hash(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
        assert_eq!(
            proto::ids::hex(&empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let a = leaf_hash(b"a");
        assert_ne!(node_hash(&a, &a), leaf_hash(&[a, a].concat()));
    }

    #[test]
    fn a_tree_of_seven_splits_at_four() {
        let l = leaves(7);
        let expected = node_hash(
            &node_hash(&node_hash(&l[0], &l[1]), &node_hash(&l[2], &l[3])),
            &node_hash(&node_hash(&l[4], &l[5]), &l[6]),
        );
        assert_eq!(root(&l), expected);
    }

    #[test]
    fn the_rfc_example_proofs_have_the_rfc_shape() {
        // RFC 9162 2.1.5: in the tree of 7, the path of d0 is [b, h, l]; PROOF(3) is
        // [c, d, g, l]; PROOF(4) is [l]; PROOF(6) is [i, j, k].
        let l = leaves(7);
        let (g, h) = (node_hash(&l[0], &l[1]), node_hash(&l[2], &l[3]));
        let (i, j, k) = (node_hash(&l[4], &l[5]), l[6], node_hash(&g, &h));
        let lnode = node_hash(&i, &j);
        assert_eq!(inclusion_proof(&l, 0).unwrap(), vec![l[1], h, lnode]);
        assert_eq!(
            consistency_proof(&l, 3).unwrap(),
            vec![l[2], l[3], g, lnode]
        );
        assert_eq!(consistency_proof(&l, 4).unwrap(), vec![lnode]);
        assert_eq!(consistency_proof(&l, 6).unwrap(), vec![i, j, k]);
    }

    #[test]
    fn proofs_outside_the_tree_are_refused() {
        let l = leaves(3);
        assert!(inclusion_proof(&l, 3).is_err());
        assert!(consistency_proof(&l, 0).is_err());
        assert!(consistency_proof(&l, 4).is_err());
        assert_eq!(
            verify_inclusion(3, 3, &l[0], &[], &root(&l)),
            Err(ProofError::LeafOutsideTree { index: 3, size: 3 })
        );
    }

    #[test]
    fn equal_sizes_are_consistent_only_with_the_same_root_and_no_hashes() {
        let l = leaves(5);
        let r = root(&l);
        assert_eq!(consistency_proof(&l, 5).unwrap(), Vec::<Hash>::new());
        assert!(verify_consistency(5, 5, &r, &r, &[]).is_ok());
        assert!(verify_consistency(5, 5, &r, &l[0], &[]).is_err());
        assert!(verify_consistency(5, 5, &r, &r, &[r]).is_err());
    }

    proptest! {
        #[test]
        fn the_root_is_the_naive_recomputation(n in 0usize..70) {
            let l = leaves(n);
            prop_assert_eq!(root(&l), naive_root(&l));
        }

        #[test]
        fn every_inclusion_proof_leads_to_the_naive_root_and_a_changed_one_does_not(
            n in 1usize..70, pick in 0usize..1000, flip in 0usize..1000
        ) {
            let l = leaves(n);
            let index = (pick % n) as u64;
            let proof = inclusion_proof(&l, index).unwrap();
            let naive = naive_root(&l);
            prop_assert_eq!(root_from_inclusion(index, n as u64, &l[index as usize], &proof), Ok(naive));
            // Another leaf, another index, a proof with a hash changed or one dropped: refused.
            let other = leaf_hash(b"not in the log");
            prop_assert!(verify_inclusion(index, n as u64, &other, &proof, &naive).is_err());
            if n > 1 {
                let wrong = (index + 1) % n as u64;
                prop_assert!(verify_inclusion(wrong, n as u64, &l[index as usize], &proof, &naive).is_err());
                let mut changed = proof.clone();
                let at = flip % changed.len();
                changed[at][flip % 32] ^= 1;
                prop_assert!(verify_inclusion(index, n as u64, &l[index as usize], &changed, &naive).is_err());
                prop_assert!(verify_inclusion(index, n as u64, &l[index as usize], &proof[1..], &naive).is_err());
            }
        }

        #[test]
        fn every_consistency_proof_joins_the_two_naive_roots_and_a_forked_tree_fails(
            new in 1usize..70, pick in 0usize..1000, at in 0usize..1000
        ) {
            let l = leaves(new);
            let old = pick % new + 1;
            let proof = consistency_proof(&l, old as u64).unwrap();
            let (old_root, new_root) = (naive_root(&l[..old]), naive_root(&l));
            prop_assert!(verify_consistency(old as u64, new as u64, &old_root, &new_root, &proof).is_ok());
            // The same sizes with one old leaf changed: the new tree is a fork.
            let mut forked = l.clone();
            forked[at % old] = leaf_hash(b"rewritten");
            let forked_root = naive_root(&forked);
            prop_assert!(verify_consistency(old as u64, new as u64, &old_root, &forked_root, &proof).is_err());
            let forked_proof = consistency_proof(&forked, old as u64).unwrap();
            prop_assert!(verify_consistency(old as u64, new as u64, &old_root, &forked_root, &forked_proof).is_err());
            if !proof.is_empty() {
                let mut changed = proof.clone();
                changed[at % proof.len()][at % 32] ^= 0x80;
                prop_assert!(verify_consistency(old as u64, new as u64, &old_root, &new_root, &changed).is_err());
            }
        }
    }

    #[test]
    fn a_frontier_gives_the_root_of_every_size() {
        let leaves: Vec<Hash> = (0u8..40).map(|i| leaf_hash(&[i])).collect();
        let mut frontier = Frontier::default();
        assert_eq!(frontier.root(), empty_root());
        for (n, leaf) in leaves.iter().enumerate() {
            frontier.push(*leaf);
            assert_eq!(frontier.root(), root(&leaves[..=n]), "size {}", n + 1);
        }
        assert_eq!(frontier.size(), 40);
    }
}
