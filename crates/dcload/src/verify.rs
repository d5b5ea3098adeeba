//! Self-describing block content for `verify=`.
//!
//! Every piece of `verify_interval` bytes (by default the block) starts with
//! a header naming what it should be (magic, file id, offset, seed, length)
//! followed by bytes generated from those same values. Within one job
//! instance the content of a piece depends on its offset (and, where the
//! job numbers its writes, on which of its writes of the piece it is)
//! only, so I/Os of varying sizes that are whole pieces write, overwrite
//! and read back the same bytes however they split the file. Each instance
//! has its own seed, as each of fio's threads: a piece that another job
//! wrote last, or an earlier write of the job's own, is told apart from
//! the one expected (`Whose`).
//! Checking regenerates the expected block and compares every byte, so a
//! misdirected or torn write is caught and the message can say whose data
//! was found instead (the header of what is actually there).

use crate::random::SplitMix;

const MAGIC: u64 = u64::from_le_bytes(*b"DCLOADv1");
/// magic, file id, offset, seed (u64 each) and length (u32), little-endian.
pub const HEADER_LEN: usize = 36;

/// A stable 64-bit id of a file path (FNV-1a), so a later run verifying the
/// same path with the same seed expects the same bytes.
pub fn file_id(path: &std::path::Path) -> u64 {
    path.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// Whose pieces a check takes as right.
#[derive(Clone, Copy)]
pub enum Whose<'a> {
    /// The job instance's last write of each piece, as `Writes` numbered
    /// them: an earlier write of it (a later one lost) is a mismatch, as
    /// under fio's header write sequence check.
    Last(&'a Writes),
    /// The job instance's own: a piece with another seed in its header
    /// (another job's, or another run's, written last at that offset) is a
    /// mismatch, as under fio's header seed check.
    Own,
    /// Any dcload writer's for this file and offset, regenerated from the
    /// seed in its header: reads of what other jobs wrote, or laid out.
    Any,
}

/// The seed of the pieces that instance `number` (1-based across the run)
/// writes: each instance its own, and the same in every run of the same
/// job file with the same `randseed`, so a later run can check them.
pub fn instance_seed(randseed: u64, number: usize) -> u64 {
    SplitMix::new(randseed ^ (number as u64).rotate_left(32)).next_u64()
}

/// The seed of a piece that is its writer's write number `n` of it (1 to
/// `WRITE_NUMBERS`), or of an unnumbered one (0).
fn numbered(seed: u64, n: u8) -> u64 {
    if n == 0 {
        return seed;
    }
    SplitMix::new(seed ^ u64::from(n).rotate_right(8)).next_u64()
}

/// Writes of one piece are numbered 1 to this, then from 1 again: a check
/// misses a lost run of writes only if it is a multiple of this long.
const WRITE_NUMBERS: u8 = 254;
/// A piece whose last write cannot be told (see `Writes::begin`).
const UNKNOWN: u8 = u8::MAX;

/// The number of each piece's last write by one job instance, for
/// `Whose::Last`: fio numbers every write in its verify header and checks
/// that a block holds the job's last write to it, so a write the storage
/// lost is found though the block holds the job's own older data.
pub struct Writes {
    /// Where the instance's first piece starts, and the piece size.
    start: u64,
    interval: u64,
    /// Per piece: 0 never written, `UNKNOWN`, else its last write's number.
    last: Vec<u8>,
    /// Writes started and not completed, by piece.
    in_flight: std::collections::HashMap<u64, u32>,
}

impl Writes {
    pub fn new(start: u64, span: u64, interval: u64) -> Writes {
        let pieces = span.div_ceil(interval.max(1)) as usize;
        Writes { start, interval: interval.max(1), last: vec![0; pieces], in_flight: Default::default() }
    }

    fn piece(&self, offset: u64) -> usize {
        (offset.saturating_sub(self.start) / self.interval) as usize
    }

    /// At a write's start: the number to write the piece at `offset` with.
    /// Where another write of the piece is still in flight, which one lands
    /// last cannot be told, and any of the job's writes is taken for it
    /// until a write of it alone.
    fn begin(&mut self, offset: u64) -> u8 {
        let i = self.piece(offset);
        let Some(last) = self.last.get_mut(i) else { return 0 };
        let n = if matches!(*last, 0 | UNKNOWN) { 1 } else { *last % WRITE_NUMBERS + 1 };
        let in_flight = self.in_flight.entry(i as u64).or_insert(0);
        *last = if *in_flight > 0 { UNKNOWN } else { n };
        *in_flight += 1;
        n
    }

    /// At the completion of a write of `len` bytes at `offset` (`ok`: all
    /// of it written): a failed write's pieces may hold either write.
    pub fn end(&mut self, offset: u64, len: u64, ok: bool) {
        let first = self.piece(offset);
        for i in first..first + len.div_ceil(self.interval) as usize {
            if let std::collections::hash_map::Entry::Occupied(mut e) = self.in_flight.entry(i as u64) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
            if !ok {
                if let Some(last) = self.last.get_mut(i) {
                    *last = UNKNOWN;
                }
            }
        }
    }

    /// The number the piece at `offset` must hold; `None`: any of the job's.
    fn expected(&self, offset: u64) -> Option<u8> {
        self.last.get(self.piece(offset)).copied().filter(|&n| n != UNKNOWN)
    }
}

/// What a verified job's pieces hold: dcload's self-describing pieces, or
/// with `verify=pattern` the job's `verify_pattern` repeated from each
/// piece's start (no header: at the default interval the block is exactly
/// what fio writes).
pub struct Content {
    kind: Kind,
    /// `verify_interval`: the bytes of one piece.
    interval: usize,
}

enum Kind {
    Blocks { file: u64, seed: u64 },
    Pattern(Vec<u8>),
}

impl Content {
    /// The pieces instance `number` of `job` writes to `path`.
    pub fn of(job: &dc_jobfile::JobSpec, path: &std::path::Path, number: usize) -> Content {
        let kind = match (&job.verify_pattern, job.verify.as_deref()) {
            (Some(p), Some("pattern")) => Kind::Pattern(p.clone()),
            _ => Kind::Blocks { file: file_id(path), seed: instance_seed(job.randseed, number) },
        };
        Content { kind, interval: (job.verify_interval.max(1)).min(u64::from(u32::MAX)) as usize }
    }

    /// The seed dcload's pieces are generated from (none for a pattern).
    pub fn seed(&self) -> Option<u64> {
        match self.kind {
            Kind::Blocks { seed, .. } => Some(seed),
            Kind::Pattern(_) => None,
        }
    }

    /// Generates from `seed` from now on (a saved verify state's).
    pub fn set_seed(&mut self, to: u64) {
        if let Kind::Blocks { seed, .. } = &mut self.kind {
            *seed = to;
        }
    }

    /// `buf` as the I/O at `offset` must be: whole pieces (the last may be
    /// short, at the end of the job's bytes), numbered by `writes` where
    /// the job's writes are.
    pub fn fill(&self, buf: &mut [u8], offset: u64, mut writes: Option<&mut Writes>) {
        for (i, piece) in buf.chunks_mut(self.interval).enumerate() {
            let at = offset + (i * self.interval) as u64;
            match &self.kind {
                Kind::Blocks { file, seed } => {
                    let n = writes.as_deref_mut().map_or(0, |w| w.begin(at));
                    fill(piece, *file, at, numbered(*seed, n))
                }
                Kind::Pattern(p) => tile(piece, p),
            }
        }
    }

    /// `Err` says where `got`, read at `offset`, first differs from a piece
    /// of `whose`.
    pub fn check(&self, got: &[u8], scratch: &mut [u8], offset: u64, whose: Whose) -> Result<(), String> {
        for (i, piece) in got.chunks(self.interval).enumerate() {
            let at = offset + (i * self.interval) as u64;
            match &self.kind {
                Kind::Blocks { file, seed } => {
                    let found = header(piece).map(|h| h.seed);
                    let expected = match whose {
                        Whose::Last(w) => match w.expected(at) {
                            Some(n) => numbered(*seed, n),
                            // Any of the job's writes, if the piece holds one.
                            None => found.filter(|&s| write_number(*seed, s).is_some()).unwrap_or(*seed),
                        },
                        Whose::Own => *seed,
                        Whose::Any => found.unwrap_or(*seed),
                    };
                    check(piece, scratch, *file, at, expected, *seed)?
                }
                Kind::Pattern(p) => {
                    let Some(b) = piece.iter().enumerate().position(|(j, &b)| b != p[j % p.len()]) else { continue };
                    return Err(format!(
                        "verify failed at byte {b} of the {}-byte block at offset {at}: the pattern has {:#04x} \
                         there, the block {:#04x}",
                        piece.len(),
                        p[b % p.len()],
                        piece[b]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `pattern` repeated from the start of `buf` (fio's `buffer_pattern`).
pub fn tile(buf: &mut [u8], pattern: &[u8]) {
    for c in buf.chunks_mut(pattern.len()) {
        c.copy_from_slice(&pattern[..c.len()]);
    }
}

/// Fill `buf` with the block expected at `offset`.
pub fn fill(buf: &mut [u8], file: u64, offset: u64, seed: u64) {
    let len = buf.len();
    let (head, body) = buf.split_at_mut(HEADER_LEN.min(len));
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    h[8..16].copy_from_slice(&file.to_le_bytes());
    h[16..24].copy_from_slice(&offset.to_le_bytes());
    h[24..32].copy_from_slice(&seed.to_le_bytes());
    h[32..36].copy_from_slice(&(len as u32).to_le_bytes());
    head.copy_from_slice(&h[..head.len()]);
    let mut rng = SplitMix::new(seed ^ file.rotate_left(17) ^ offset.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut chunks = body.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let rest = chunks.into_remainder();
    let last = rng.next_u64().to_le_bytes();
    let n = rest.len();
    rest.copy_from_slice(&last[..n]);
}

/// Which of its writer's writes a piece with header seed `found` is, for
/// one whose pieces are numbered from `seed`.
fn write_number(seed: u64, found: u64) -> Option<u8> {
    (1..=WRITE_NUMBERS).find(|&n| numbered(seed, n) == found)
}

/// What a dcload piece's header says it is.
struct Header {
    file: u64,
    offset: u64,
    seed: u64,
}

/// The header at the start of `piece`, if it has dcload's magic.
fn header(piece: &[u8]) -> Option<Header> {
    let word = |at: usize| piece.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    (piece.len() >= HEADER_LEN && word(0) == Some(MAGIC)).then(|| Header {
        file: word(8).unwrap_or(0),
        offset: word(16).unwrap_or(0),
        seed: word(24).unwrap_or(0),
    })
}

/// Check `got` against the block expected at `offset`, made from `seed`;
/// `Err` describes the first difference and, when the header is intact,
/// whose block was found: another writer's, or (for a job whose writes are
/// numbered from `own`) an earlier write of the job's own.
fn check(got: &[u8], scratch: &mut [u8], file: u64, offset: u64, seed: u64, own: u64) -> Result<(), String> {
    let expect = &mut scratch[..got.len()];
    fill(expect, file, offset, seed);
    if got == &expect[..] {
        return Ok(());
    }
    let first = got.iter().zip(expect.iter()).position(|(a, b)| a != b).unwrap_or(0);
    let found = if let Some(Header { file: f, offset: o, seed: s }) = header(got) {
        if (f, o) == (file, offset) && s != seed {
            match write_number(own, s).zip(write_number(own, seed)) {
                Some((had, wanted)) => format!(
                    "; the block holds this job's write number {had} of it, where its last was number {wanted}: a \
                     later write of it was lost (verify_write_sequence=0 takes any of the job's writes)"
                ),
                None => format!(
                    "; the block holds another writer's data for this offset (seed {s}, this job's {seed}): another \
                     job that writes this file, or another run, wrote it last (verify_write_sequence=0 with \
                     verify_header_seed=0 takes any writer's)"
                ),
            }
        } else if (f, o, s) != (file, offset, seed) {
            format!("; the block holds data written for offset {o} (file id {f:#x}, seed {s})")
        } else {
            "; its header is right, so the data after it was changed".to_string()
        }
    } else if got.iter().all(|&b| b == 0) {
        "; the block is all zeroes (never written, or lost)".to_string()
    } else {
        "; the block has no dcload header (written by something else)".to_string()
    };
    Err(format!("verify failed at byte {} of the {}-byte block at offset {offset}{found}", first, got.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_detection() {
        let mut b = vec![0u8; 4096];
        let mut s = vec![0u8; 4096];
        fill(&mut b, 7, 8192, 1);
        assert!(check(&b, &mut s, 7, 8192, 1, 1).is_ok());
        let e = check(&b, &mut s, 7, 4096, 1, 1).unwrap_err();
        assert!(e.contains("holds data written for offset 8192"), "{e}");
        b[100] ^= 1;
        let e = check(&b, &mut s, 7, 8192, 1, 1).unwrap_err();
        assert!(e.starts_with("verify failed at byte 100 ") && e.contains("header is right"), "{e}");
        let zero = vec![0u8; 512];
        assert!(check(&zero, &mut s, 7, 0, 1, 1).unwrap_err().contains("all zeroes"));
    }

    #[test]
    fn a_pattern_block_is_the_pattern_repeated() {
        let c = Content { kind: Kind::Pattern(vec![1, 2, 3]), interval: 4096 };
        let mut b = vec![0u8; 8];
        c.fill(&mut b, 4096, None);
        assert_eq!(b, [1, 2, 3, 1, 2, 3, 1, 2]);
        assert!(c.check(&b, &mut [], 4096, Whose::Own).is_ok());
        b[4] = 9;
        let e = c.check(&b, &mut [], 4096, Whose::Own).unwrap_err();
        assert!(
            e.contains("byte 4 of the 8-byte block at offset 4096") && e.contains("0x02") && e.contains("0x09"),
            "{e}"
        );
    }

    #[test]
    fn another_writers_piece_fails_only_a_check_of_its_own() {
        let (ours, theirs) = (instance_seed(0x89, 1), instance_seed(0x89, 2));
        assert_ne!(ours, theirs, "each instance its own seed");
        let mine = Content { kind: Kind::Blocks { file: 3, seed: ours }, interval: 4096 };
        let other = Content { kind: Kind::Blocks { file: 3, seed: theirs }, interval: 4096 };
        let (mut b, mut s) = (vec![0u8; 8192], vec![0u8; 8192]);
        other.fill(&mut b[4096..], 4096, None);
        mine.fill(&mut b[..4096], 0, None);
        assert!(mine.check(&b, &mut s, 0, Whose::Any).is_ok());
        let e = mine.check(&b, &mut s, 0, Whose::Own).unwrap_err();
        assert!(
            e.contains("offset 4096") && e.contains(&format!("another writer's data for this offset (seed {theirs}")),
            "{e}"
        );
        // Any writer's, but still its offset's and intact.
        b[4096 + 100] ^= 1;
        assert!(mine.check(&b, &mut s, 0, Whose::Any).unwrap_err().contains("header is right"));
        other.fill(&mut b[4096..], 0, None);
        assert!(mine.check(&b, &mut s, 0, Whose::Any).unwrap_err().contains("written for offset 0"));
    }

    #[test]
    fn each_piece_must_hold_its_last_write_unless_that_cannot_be_told() {
        let c = Content { kind: Kind::Blocks { file: 3, seed: 9 }, interval: 4096 };
        let mut w = Writes::new(0, 3 * 4096, 4096);
        let (mut first, mut s) = (vec![0u8; 3 * 4096], vec![0u8; 3 * 4096]);
        c.fill(&mut first, 0, Some(&mut w));
        w.end(0, 3 * 4096, true);
        assert!(c.check(&first, &mut s, 0, Whose::Last(&w)).is_ok());
        let mut second = first.clone();
        c.fill(&mut second, 0, Some(&mut w));
        w.end(0, 3 * 4096, true);
        let e = c.check(&first, &mut s, 0, Whose::Last(&w)).unwrap_err();
        assert!(e.contains("write number 1 of it, where its last was number 2"), "{e}");
        assert!(c.check(&first, &mut s, 0, Whose::Own).is_err(), "a numbered piece is not the unnumbered one");
        // Two writes of the middle piece in flight at once: either may be last.
        c.fill(&mut second[4096..8192], 4096, Some(&mut w));
        c.fill(&mut second[4096..8192], 4096, Some(&mut w));
        w.end(4096, 4096, true);
        w.end(4096, 4096, true);
        let mut mixed = second.clone();
        mixed[4096..8192].copy_from_slice(&first[4096..8192]);
        assert!(c.check(&mixed, &mut s, 0, Whose::Last(&w)).is_ok(), "any of the job's writes");
        // A failed write of the last piece: what it held before, or part of it.
        c.fill(&mut second[8192..], 8192, Some(&mut w));
        w.end(8192, 4096, false);
        assert!(c.check(&first[8192..], &mut s, 8192, Whose::Last(&w)).is_ok());
        let other = Content { kind: Kind::Blocks { file: 3, seed: 10 }, interval: 4096 };
        other.fill(&mut mixed[8192..], 8192, None);
        assert!(c.check(&mixed[8192..], &mut s, 8192, Whose::Last(&w)).is_err(), "but the job's own");
        // Numbers wrap: the 255th write is number 1 again.
        let mut v = Writes::new(0, 4096, 4096);
        let numbers: Vec<u8> = (0..255).map(|_| (v.begin(0), v.end(0, 4096, true)).0).collect();
        assert_eq!((numbers[0], numbers[253], numbers[254]), (1, 254, 1));
    }

    #[test]
    fn odd_lengths() {
        for len in [1usize, 35, 36, 37, 511, 513] {
            let mut b = vec![0u8; len];
            let mut s = vec![0u8; len];
            fill(&mut b, 1, 0, 2);
            assert!(check(&b, &mut s, 1, 0, 2, 2).is_ok(), "{len}");
        }
    }

    #[test]
    fn different_offsets_differ_in_the_body() {
        let (mut a, mut b) = (vec![0u8; 256], vec![0u8; 256]);
        fill(&mut a, 1, 0, 2);
        fill(&mut b, 1, 256, 2);
        assert_ne!(a[HEADER_LEN..], b[HEADER_LEN..]);
    }

    #[test]
    fn pieces_depend_on_their_offset_only() {
        let c = Content { kind: Kind::Blocks { file: 3, seed: 4 }, interval: 512 };
        let mut one = vec![0u8; 4096];
        c.fill(&mut one, 8192, None);
        // The same bytes written as a 1 KiB and a 3 KiB I/O.
        let mut two = vec![0u8; 4096];
        c.fill(&mut two[..1024], 8192, None);
        c.fill(&mut two[1024..], 8192 + 1024, None);
        assert_eq!(one, two);
        let mut s = vec![0u8; 4096];
        assert!(c.check(&one[512..1536], &mut s, 8192 + 512, Whose::Own).is_ok());
        let e = c.check(&one[512..1536], &mut s, 8192, Whose::Own).unwrap_err();
        assert!(e.contains("at offset 8192") && e.contains("written for offset 8704"), "{e}");
        let p = Content { kind: Kind::Pattern(vec![1, 2, 3]), interval: 4 };
        let mut b = vec![0u8; 8];
        p.fill(&mut b, 0, None);
        assert_eq!(b, [1, 2, 3, 1, 1, 2, 3, 1], "the pattern starts again with each piece");
    }
}
