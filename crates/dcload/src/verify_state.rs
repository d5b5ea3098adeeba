//! fio's `verify_state_save` and `verify_state_load`: a write job records
//! which blocks it wrote, and a later verifying read checks only those (a
//! write phase cut short by its runtime or a signal is then verified as far
//! as it got, not failed for the blocks it never reached).
//!
//! The file is dcload's own (JSON, `dcload-<job>-<jobnum>-verify.state` in
//! the working directory): fio's binary state files are not read or
//! written, so a state is handed between dcload runs only.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

const FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
pub struct VerifyState {
    format: u32,
    /// The file written, as the job named it.
    pub path: PathBuf,
    /// The verify piece size (`verify_interval`: bs unless set; named `bs`
    /// in the file, which it was before pieces could be smaller), where the
    /// job's I/O started, and the seed its pieces were generated from.
    #[serde(rename = "bs")]
    pub interval: u64,
    pub start: u64,
    pub seed: u64,
    /// Pieces written from `start`, as runs `[first, count]`.
    pub written: Vec<[u64; 2]>,
}

/// The set bits of a written-piece bitmap (bit `b` of word `w` is piece
/// `64 * w + b`) as runs `(first, count)` of at most `most` pieces each.
pub fn written_runs(bitmap: &[u64], most: u64) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (w, &bits) in bitmap.iter().enumerate() {
        let mut bits = bits;
        while bits != 0 {
            let b = w as u64 * 64 + u64::from(bits.trailing_zeros());
            bits &= bits - 1;
            match runs.last_mut() {
                Some(run) if run.0 + run.1 == b && run.1 < most => run.1 += 1,
                _ => runs.push((b, 1)),
            }
        }
    }
    runs
}

pub fn state_file(dir: &Path, job: &str, jobnum: u32) -> PathBuf {
    dir.join(format!("dcload-{job}-{jobnum}-verify.state"))
}

impl VerifyState {
    /// From a write job's bitmap of written pieces.
    pub fn new(path: &Path, interval: u64, start: u64, seed: u64, bitmap: &[u64]) -> VerifyState {
        let written = written_runs(bitmap, u64::MAX).into_iter().map(|(first, n)| [first, n]).collect();
        VerifyState { format: FORMAT, path: path.to_path_buf(), interval, start, seed, written }
    }

    /// Written atomically: a run cut off while saving leaves the old state.
    pub fn save(&self, file: &Path) -> io::Result<()> {
        let tmp = file.with_extension("state.tmp");
        std::fs::write(&tmp, serde_json::to_vec(self)?)?;
        std::fs::rename(&tmp, file)
    }

    pub fn load(file: &Path) -> Result<VerifyState, String> {
        let text = std::fs::read(file).map_err(|e| {
            format!(
                "verify_state_load: {}: {e} (the writing job saves it with verify_state_save=1, in the directory \
                 dcload ran in)",
                file.display()
            )
        })?;
        let s: VerifyState = serde_json::from_slice(&text)
            .map_err(|e| format!("verify_state_load: {}: not a dcload verify state ({e})", file.display()))?;
        if s.format != FORMAT {
            return Err(format!("verify_state_load: {}: format {} is not {FORMAT}", file.display(), s.format));
        }
        Ok(s)
    }

    /// Whether the piece at `offset` (of the file) was written.
    pub fn holds(&self, offset: u64) -> bool {
        let Some(rel) = offset.checked_sub(self.start) else { return false };
        let b = rel / self.interval;
        let i = self.written.partition_point(|r| r[0] + r[1] <= b);
        self.written.get(i).is_some_and(|r| r[0] <= b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_round_trip_and_answer_membership() {
        // Blocks 0-2, 5, 64-65.
        let bitmap = [0b100111u64, 0b11];
        let s = VerifyState::new(Path::new("f"), 4096, 8192, 7, &bitmap);
        assert_eq!(s.written, [[0, 3], [5, 1], [64, 2]]);
        assert_eq!(written_runs(&bitmap, 2), [(0, 2), (2, 1), (5, 1), (64, 2)], "runs cut at 2 pieces (a verify read)");
        let dir = std::env::temp_dir().join(format!("dc-vstate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = state_file(&dir, "job", 0);
        s.save(&file).unwrap();
        let l = VerifyState::load(&file).unwrap();
        let at = |b: u64| l.holds(8192 + b * 4096);
        assert!(at(0) && at(2) && !at(3) && at(5) && !at(6) && at(64) && at(65) && !at(66));
        assert!(!l.holds(0), "before the job's start");
        std::fs::write(&file, b"{}").unwrap();
        assert!(VerifyState::load(&file).unwrap_err().contains("not a dcload verify state"));
        std::fs::remove_dir_all(dir).unwrap();
        assert!(VerifyState::load(&file).unwrap_err().contains("verify_state_save=1"));
    }
}
