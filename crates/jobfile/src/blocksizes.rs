//! fio's block sizes that vary from I/O to I/O: `bsrange=MIN-MAX` and
//! `bssplit=SIZE/PERCENT:SIZE/PERCENT:...`, and per direction: `bs`,
//! `bsrange` and `bssplit` each take `READ,WRITE,TRIM` (fio's rules: one
//! value is every direction's, two give trims the write value, an empty
//! one is the default).

use crate::units::{parse_size, KbBase};

/// The sizes of a job's I/Os.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockSizes {
    /// Every I/O is the job's `bs`.
    Fixed,
    /// Each I/O a multiple of `min` up to `max`, the multiple drawn
    /// uniformly (fio's `bsrange` for a power-of-two `min`).
    Range { min: u64, max: u64 },
    /// Each size with its share of the I/Os in percent, summing to 100
    /// (fio's `bssplit`).
    Split(Vec<(u64, u32)>),
    /// Read, write and trim each with their own block size and sizes, when
    /// they differ.
    PerDirection(Box<[(u64, BlockSizes); 3]>),
}

impl BlockSizes {
    /// The largest I/O (the buffers' size).
    pub fn largest(&self, bs: u64) -> u64 {
        match self {
            BlockSizes::Fixed => bs,
            BlockSizes::Range { max, .. } => *max,
            BlockSizes::Split(s) => s.iter().map(|&(size, _)| size).max().unwrap_or(bs),
            BlockSizes::PerDirection(d) => d.iter().map(|(b, s)| s.largest(*b)).max().unwrap_or(bs),
        }
    }

    /// The smallest I/O: offsets are multiples of it.
    pub fn smallest(&self, bs: u64) -> u64 {
        match self {
            BlockSizes::Fixed => bs,
            BlockSizes::Range { min, .. } => *min,
            BlockSizes::Split(s) => s.iter().map(|&(size, _)| size).min().unwrap_or(bs),
            BlockSizes::PerDirection(d) => d.iter().map(|(b, s)| s.smallest(*b)).min().unwrap_or(bs),
        }
    }

    /// Every size an I/O can have that is not a multiple of a smaller one
    /// checked already: what `O_DIRECT` alignment is checked against.
    pub fn distinct(&self, bs: u64) -> Vec<u64> {
        match self {
            BlockSizes::Fixed => vec![bs],
            BlockSizes::Range { min, .. } => vec![*min],
            BlockSizes::Split(s) => s.iter().map(|&(size, _)| size).collect(),
            BlockSizes::PerDirection(d) => d.iter().flat_map(|(b, s)| s.distinct(*b)).collect(),
        }
    }

    /// The block size and sizes of direction `dir` (0 read, 1 write, 2 trim).
    pub fn of_direction(&self, dir: usize, bs: u64) -> (u64, &BlockSizes) {
        match self {
            BlockSizes::PerDirection(d) => (d[dir].0, &d[dir].1),
            same => (bs, same),
        }
    }

    /// The largest size every I/O's size is a multiple of: a sequential
    /// job's offsets move in these, so sizes of 4k and 6k leave no gaps.
    pub fn granule(&self, bs: u64) -> u64 {
        self.distinct(bs).into_iter().fold(0, gcd).max(1)
    }

    pub fn is_fixed(&self) -> bool {
        *self == BlockSizes::Fixed
    }
}

/// The greatest common divisor (Euclid's).
pub(crate) fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The one value of a per-direction list (`a,b,c` with empty entries
/// meaning "as the others").
pub(crate) fn one_for_all<'a>(text: &'a str, option: &str) -> Result<&'a str, String> {
    let mut given = text.split(',').map(str::trim).filter(|v| !v.is_empty());
    let first = given.next().ok_or_else(|| format!("{option} needs a value"))?;
    if given.any(|v| v != first) {
        return Err(format!(
            "separate read,write,trim values are not supported: dcload runs one {option} for every direction; give one"
        ));
    }
    Ok(first)
}

/// `bsrange=MIN-MAX` (or `MIN:MAX`, which fio takes too) for one direction.
pub(crate) fn parse_range(value: &str, kb: KbBase) -> Result<BlockSizes, String> {
    let (a, b) = value
        .split_once('-')
        .or_else(|| value.split_once(':'))
        .ok_or_else(|| format!("'{value}': give the range as MIN-MAX or MIN:MAX (e.g. 4k-64k)"))?;
    let (a, b) = (parse_size(a.trim(), kb)?, parse_size(b.trim(), kb)?);
    let (min, max) = (a.min(b), a.max(b));
    if min == 0 {
        return Err("block sizes must be at least 1 byte".into());
    }
    Ok(BlockSizes::Range { min, max })
}

/// `bssplit=SIZE/PERCENT:...` for one direction; entries without a
/// percentage share what the others leave, equally (the first of them
/// takes the remainder).
pub(crate) fn parse_split(value: &str, kb: KbBase) -> Result<BlockSizes, String> {
    let mut sizes = Vec::new();
    for entry in value.split(':').filter(|e| !e.is_empty()) {
        let (size, pct) = match entry.split_once('/') {
            Some((s, p)) => (s, Some(p.trim()).filter(|p| !p.is_empty())),
            None => (entry, None),
        };
        let size = parse_size(size.trim(), kb)?;
        if size == 0 {
            return Err(format!("'{entry}': block sizes must be at least 1 byte"));
        }
        let pct =
            pct.map(|p| p.parse::<u32>().map_err(|_| format!("'{entry}': '{p}' is not a percentage"))).transpose()?;
        sizes.push((size, pct));
    }
    if sizes.is_empty() {
        return Err("bssplit needs SIZE/PERCENT entries separated by ':'".into());
    }
    let given: u32 = sizes.iter().filter_map(|&(_, p)| p).sum();
    let open = sizes.iter().filter(|(_, p)| p.is_none()).count() as u32;
    if given > 100 || (open == 0 && given != 100) {
        return Err(format!("'{value}': the percentages add up to {given}; they must add up to 100"));
    }
    let left = 100 - given;
    let (share, mut extra) = (left.checked_div(open).unwrap_or(0), left.checked_rem(open).unwrap_or(0));
    let split = sizes
        .into_iter()
        .map(|(size, pct)| {
            let pct = pct.unwrap_or_else(|| share + std::mem::take(&mut extra));
            (size, pct)
        })
        .filter(|&(_, pct)| pct > 0)
        .collect();
    Ok(BlockSizes::Split(split))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_splits_read_as_fio_writes_them() {
        let kb = KbBase::default();
        assert_eq!(parse_range("1k-4k", kb), Ok(BlockSizes::Range { min: 1024, max: 4096 }));
        assert_eq!(
            parse_range("512:1M", kb),
            Ok(BlockSizes::Range { min: 512, max: 1 << 20 }),
            "fio takes either separator"
        );
        assert!(parse_range("4k", kb).unwrap_err().contains("MIN-MAX"));
        assert_eq!(
            parse_split("512/25:1k/:2k/:4k/", kb),
            Ok(BlockSizes::Split(vec![(512, 25), (1024, 25), (2048, 25), (4096, 25)]))
        );
        assert_eq!(parse_split("4k/10:64k/90", kb), Ok(BlockSizes::Split(vec![(4096, 10), (65536, 90)])));
        assert_eq!(parse_split("4k/50:8k:16k", kb), Ok(BlockSizes::Split(vec![(4096, 50), (8192, 25), (16384, 25)])));
        assert_eq!(parse_split("4k/60:8k:16k", kb), Ok(BlockSizes::Split(vec![(4096, 60), (8192, 20), (16384, 20)])));
        assert!(parse_split("4k/60:8k/60", kb).unwrap_err().contains("add up to 120"));
        assert!(parse_split("4k/60:8k/30", kb).unwrap_err().contains("add up to 90"));
        let s = parse_split("512/25:1k/:2k/:4k/", kb).unwrap();
        assert_eq!((s.smallest(0), s.largest(0), s.distinct(0)), (512, 4096, vec![512, 1024, 2048, 4096]));
        let d = BlockSizes::PerDirection(Box::new([
            (4096, BlockSizes::Fixed),
            (4096, BlockSizes::Range { min: 512, max: 2048 }),
            (8192, BlockSizes::Fixed),
        ]));
        assert_eq!((d.smallest(0), d.largest(0), d.granule(0)), (512, 8192, 512));
        assert_eq!(d.of_direction(2, 0), (8192, &BlockSizes::Fixed));
    }
}
