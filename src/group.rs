//! Groups: ordered sets of world ranks, as used by post/start (PSCW) and communicators.
//!
//! # MPI-4.1: 7.3 (group management)

use crate::error::{Error, ErrorClass, Result};

/// An ordered set of distinct world ranks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Group {
    ranks: Vec<usize>,
}

impl Group {
    pub(crate) fn from_world_ranks(ranks: Vec<usize>) -> Group {
        Group { ranks }
    }

    /// Number of ranks in the group.
    pub fn size(&self) -> usize {
        self.ranks.len()
    }

    /// The world ranks, in group order.
    pub fn world_ranks(&self) -> &[usize] {
        &self.ranks
    }

    /// The group rank of world rank `world`, if it is a member.
    pub fn rank_of(&self, world: usize) -> Option<usize> {
        self.ranks.iter().position(|&r| r == world)
    }

    /// The members at group ranks `ranks`, in that order. # MPI-4.1: 7.3.2 (MPI_GROUP_INCL)
    pub fn incl(&self, ranks: &[usize]) -> Result<Group> {
        let mut out = Vec::with_capacity(ranks.len());
        for &r in ranks {
            let w = *self.ranks.get(r).ok_or_else(|| {
                Error::new(
                    ErrorClass::Rank,
                    format!("rank {r} outside a group of size {}", self.size()),
                )
            })?;
            if out.contains(&w) {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!("rank {r} named twice"),
                ));
            }
            out.push(w);
        }
        Ok(Group { ranks: out })
    }

    /// The members except those at group ranks `ranks`. # MPI-4.1: 7.3.2 (MPI_GROUP_EXCL)
    pub fn excl(&self, ranks: &[usize]) -> Result<Group> {
        if let Some(&r) = ranks.iter().find(|&&r| r >= self.size()) {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("rank {r} outside a group of size {}", self.size()),
            ));
        }
        let keep = (0..self.size())
            .filter(|r| !ranks.contains(r))
            .map(|r| self.ranks[r])
            .collect();
        Ok(Group { ranks: keep })
    }

    /// For each group rank in `ranks`, its rank in `other` (None where not a member).
    ///
    /// # MPI-4.1: 7.3.1 (MPI_GROUP_TRANSLATE_RANKS)
    pub fn translate_ranks(&self, ranks: &[usize], other: &Group) -> Result<Vec<Option<usize>>> {
        ranks
            .iter()
            .map(|&r| {
                let w = self.ranks.get(r).ok_or_else(|| {
                    Error::new(
                        ErrorClass::Rank,
                        format!("rank {r} outside a group of size {}", self.size()),
                    )
                })?;
                Ok(other.rank_of(*w))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incl_excl_translate() {
        let g = Group::from_world_ranks(vec![0, 1, 2, 3]);
        let odd = g.incl(&[3, 1]).unwrap();
        assert_eq!(odd.world_ranks(), &[3, 1]);
        assert_eq!(g.excl(&[0, 2]).unwrap().world_ranks(), &[1, 3]);
        assert_eq!(
            g.translate_ranks(&[1, 2], &odd).unwrap(),
            vec![Some(1), None]
        );
        assert_eq!(g.incl(&[4]).unwrap_err().class(), ErrorClass::Rank);
        assert_eq!(g.incl(&[1, 1]).unwrap_err().class(), ErrorClass::Rank);
        assert_eq!(g.excl(&[9]).unwrap_err().class(), ErrorClass::Rank);
    }
}
