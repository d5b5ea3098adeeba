//! Sets of page ranges, kept as disjoint, non-adjacent half-open intervals.
//!
//! The engine tracks, per file, which pages it dirtied, which it may drop and
//! which belonged to someone else's cache. Sequential writers extend one
//! interval in place, so the common case neither allocates nor grows.

use std::collections::BTreeMap;
use std::ops::Range;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RangeSet {
    /// start -> end, disjoint and never touching.
    map: BTreeMap<u64, u64>,
    pages: u64,
}

impl RangeSet {
    pub fn new() -> RangeSet {
        RangeSet::default()
    }

    /// Number of pages in the set.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    pub fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// Number of disjoint ranges in the set.
    pub fn ranges(&self) -> usize {
        self.map.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.map.iter().map(|(&s, &e)| s..e)
    }

    /// Adds `r`; returns how many pages were not in the set before.
    pub fn insert(&mut self, r: Range<u64>) -> u64 {
        if r.start >= r.end {
            return 0;
        }
        let covered: u64 = self.intersect(r.clone()).iter().map(|p| p.end - p.start).sum();
        let (mut start, mut end) = (r.start, r.end);
        // An interval starting at or before `start` that overlaps or touches.
        if let Some((&s, &e)) = self.map.range(..=start).next_back() {
            if e >= start {
                self.map.remove(&s);
                self.pages -= e - s;
                start = s;
                end = end.max(e);
            }
        }
        // Every interval starting inside (start, end] merges too.
        while let Some((&s, &e)) = self.map.range(start..=end).next() {
            self.map.remove(&s);
            self.pages -= e - s;
            end = end.max(e);
        }
        self.map.insert(start, end);
        self.pages += end - start;
        (r.end - r.start) - covered
    }

    /// Removes `r`; returns the pieces that were in the set.
    pub fn remove(&mut self, r: Range<u64>) -> Vec<Range<u64>> {
        let mut removed = Vec::new();
        if r.start >= r.end {
            return removed;
        }
        let first = self.map.range(..r.start).next_back().map(|(&s, _)| s).unwrap_or(r.start);
        let hits: Vec<(u64, u64)> = self.map.range(first..r.end).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in hits {
            if e <= r.start {
                continue;
            }
            self.map.remove(&s);
            self.pages -= e - s;
            if s < r.start {
                self.map.insert(s, r.start);
                self.pages += r.start - s;
            }
            if e > r.end {
                self.map.insert(r.end, e);
                self.pages += e - r.end;
            }
            removed.push(s.max(r.start)..e.min(r.end));
        }
        removed
    }

    /// The pieces of `r` that are in the set.
    pub fn intersect(&self, r: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        if r.start >= r.end {
            return out;
        }
        let first = self.map.range(..r.start).next_back().map(|(&s, _)| s).unwrap_or(r.start);
        for (&s, &e) in self.map.range(first..r.end) {
            if e > r.start {
                out.push(s.max(r.start)..e.min(r.end));
            }
        }
        out
    }

    /// The pieces of `r` that are not in the set.
    pub fn gaps(&self, r: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut at = r.start;
        for piece in self.intersect(r.clone()) {
            if piece.start > at {
                out.push(at..piece.start);
            }
            at = piece.end;
        }
        if at < r.end {
            out.push(at..r.end);
        }
        out
    }

    /// Takes up to `budget` pages out of the set, range-cyclic: starting at
    /// `cursor` and wrapping to the start of the file, like the kernel's
    /// `range_cyclic` writeback. Returns the ranges taken, in order. Costs
    /// O(k log n) for k ranges taken, whatever the set's size.
    pub fn take_cyclic(&mut self, cursor: u64, budget: u64) -> Vec<Range<u64>> {
        let mut taken = self.pieces_from(cursor, u64::MAX, budget);
        let after: u64 = taken.iter().map(|r| r.end - r.start).sum();
        taken.extend(self.pieces_from(0, cursor, budget - after));
        for r in &taken {
            self.remove(r.clone());
        }
        taken
    }

    /// The set's pieces inside `from..to`, in order, up to `budget` pages.
    fn pieces_from(&self, from: u64, to: u64, budget: u64) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut left = budget;
        // An interval that starts before `from` and reaches past it.
        let straddling = self.map.range(..from).next_back().filter(|(_, &e)| e > from).map(|(_, &e)| from..e);
        for r in straddling.into_iter().chain(self.map.range(from..to).map(|(&s, &e)| s..e)) {
            if left == 0 {
                break;
            }
            let r = r.start..r.end.min(to).min(r.start.saturating_add(left));
            left -= r.end - r.start;
            out.push(r);
        }
        out
    }

    /// The first and last page of the set, as one range.
    pub fn hull(&self) -> Option<Range<u64>> {
        let (&start, _) = self.map.iter().next()?;
        let (_, &end) = self.map.iter().next_back()?;
        Some(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(s: &RangeSet) -> Vec<Range<u64>> {
        s.iter().collect()
    }

    #[test]
    fn sequential_inserts_extend_one_interval() {
        let mut s = RangeSet::new();
        for p in 0..100 {
            assert_eq!(s.insert(p..p + 1), 1);
        }
        assert_eq!(ranges(&s), vec![0..100]);
        assert_eq!(s.pages(), 100);
    }

    #[test]
    fn insert_counts_only_new_pages() {
        let mut s = RangeSet::new();
        assert_eq!(s.insert(10..20), 10);
        assert_eq!(s.insert(30..40), 10);
        assert_eq!(s.insert(15..35), 10);
        assert_eq!(ranges(&s), vec![10..40]);
        assert_eq!(s.insert(0..50), 20);
        assert_eq!(s.insert(12..13), 0);
        assert_eq!(s.pages(), 50);
        assert_eq!(s.insert(50..51), 1);
        assert_eq!(ranges(&s), vec![0..51]);
    }

    #[test]
    fn insert_bridging_many_intervals() {
        let mut s = RangeSet::new();
        for i in 0..10 {
            s.insert(i * 10..i * 10 + 5);
        }
        assert_eq!(s.pages(), 50);
        assert_eq!(s.insert(3..97), 94 - 47);
        assert_eq!(ranges(&s), vec![0..97]);
        assert_eq!(s.pages(), 97);
    }

    #[test]
    fn remove_splits_and_reports_pieces() {
        let mut s = RangeSet::new();
        s.insert(0..10);
        s.insert(20..30);
        assert_eq!(s.remove(5..25), vec![5..10, 20..25]);
        assert_eq!(ranges(&s), vec![0..5, 25..30]);
        assert_eq!(s.pages(), 10);
        assert_eq!(s.remove(40..50), vec![]);
        assert_eq!(s.remove(0..100), vec![0..5, 25..30]);
        assert!(s.is_empty());
    }

    #[test]
    fn intersect_and_gaps_are_complements() {
        let mut s = RangeSet::new();
        s.insert(2..4);
        s.insert(6..8);
        assert_eq!(s.intersect(0..10), vec![2..4, 6..8]);
        assert_eq!(s.gaps(0..10), vec![0..2, 4..6, 8..10]);
        assert_eq!(s.intersect(3..7), vec![3..4, 6..7]);
        assert_eq!(s.gaps(3..7), vec![4..6]);
    }

    #[test]
    fn take_cyclic_wraps_and_respects_budget() {
        let mut s = RangeSet::new();
        s.insert(0..10);
        s.insert(50..60);
        assert_eq!(s.take_cyclic(55, 8), vec![55..60, 0..3]);
        assert_eq!(ranges(&s), vec![3..10, 50..55]);
        assert_eq!(s.take_cyclic(0, 100), vec![3..10, 50..55]);
        assert!(s.is_empty());
        s.insert(0..10);
        assert_eq!(s.take_cyclic(4, 3), vec![4..7], "a cursor inside an interval starts there");
        assert_eq!(s.take_cyclic(7, 100), vec![7..10, 0..4]);
        assert_eq!(s.hull(), None);
        s.insert(5..6);
        s.insert(20..30);
        assert_eq!(s.hull(), Some(5..30));
    }

    #[test]
    fn matches_a_bitmap_under_random_operations() {
        let mut s = RangeSet::new();
        let mut bits = vec![false; 256];
        let mut x: u64 = 0x9e3779b97f4a7c15;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = x % 256;
            let b = (a + (x >> 20) % 40).min(256);
            if x & 1 == 0 {
                let fresh = (a..b).filter(|&p| !bits[p as usize]).count() as u64;
                assert_eq!(s.insert(a..b), fresh);
                (a..b).for_each(|p| bits[p as usize] = true);
            } else {
                let had: u64 = s.remove(a..b).iter().map(|r| r.end - r.start).sum();
                assert_eq!(had, (a..b).filter(|&p| bits[p as usize]).count() as u64);
                (a..b).for_each(|p| bits[p as usize] = false);
            }
            assert_eq!(s.pages(), bits.iter().filter(|&&b| b).count() as u64);
        }
    }
}
