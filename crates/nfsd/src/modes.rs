//! nfsd's io modes, one for reads and one for writes, and the control
//! directory that switches them while the server runs.

use dontcache::Policy;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::RwLock;

/// How the server does one direction's I/O on the exported files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoMode {
    /// Through the page cache (nfsd's 0, its default).
    Buffered,
    /// `RWF_DONTCACHE` (nfsd's 1); buffered where the file system refuses it.
    Dontcache,
    /// `O_DIRECT` for the block-aligned middle of a request, buffered for
    /// its unaligned ends (nfsd's 2).
    Direct,
    /// Buffered through libdontcache with one of its policies.
    WriteBehind(Policy),
}

impl IoMode {
    pub fn name(self) -> String {
        match self {
            IoMode::Buffered => "buffered".into(),
            IoMode::Dontcache => "dontcache".into(),
            IoMode::Direct => "direct".into(),
            IoMode::WriteBehind(p) => format!("writebehind:{}", p.name()),
        }
    }
}

impl fmt::Display for IoMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for IoMode {
    type Err = String;

    /// A mode's name, or the number nfsd's debugfs knobs take (0, 1, 2), so
    /// a harness written for the kernel server drives this one unchanged.
    fn from_str(s: &str) -> Result<IoMode, String> {
        match s.trim() {
            "0" | "buffered" => Ok(IoMode::Buffered),
            "1" | "dontcache" => Ok(IoMode::Dontcache),
            "2" | "direct" => Ok(IoMode::Direct),
            other => match other.strip_prefix("writebehind:") {
                Some(p) => Ok(IoMode::WriteBehind(p.parse()?)),
                None => Err(format!(
                    "unknown io mode {other:?}: use buffered (0), dontcache (1), direct (2) or writebehind:<policy>"
                )),
            },
        }
    }
}

/// The modes in force, read by every request.
#[derive(Debug)]
pub struct Modes {
    current: RwLock<(IoMode, IoMode)>,
}

impl Modes {
    pub fn new(read: IoMode, write: IoMode) -> Modes {
        Modes { current: RwLock::new((read, write)) }
    }

    pub fn read(&self) -> IoMode {
        self.current.read().unwrap_or_else(|e| e.into_inner()).0
    }

    pub fn write(&self) -> IoMode {
        self.current.read().unwrap_or_else(|e| e.into_inner()).1
    }

    pub fn set(&self, read: IoMode, write: IoMode) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = (read, write);
    }
}

/// A directory laid out like nfsd's debugfs directory: `io_cache_read` and
/// `io_cache_write` hold a mode each. dcnfsd reads them at start and on
/// SIGHUP, and then writes `applied` (`read=<mode> write=<mode>`, or
/// `error: ...` when a file holds no mode), so a harness knows the switch
/// took effect before it measures.
pub struct ControlDir {
    pub dir: PathBuf,
}

impl ControlDir {
    pub const READ: &'static str = "io_cache_read";
    pub const WRITE: &'static str = "io_cache_write";
    pub const APPLIED: &'static str = "applied";

    /// Creates the directory's knob files with `modes` where they are missing.
    pub fn create(dir: &Path, read: IoMode, write: IoMode) -> std::io::Result<ControlDir> {
        std::fs::create_dir_all(dir)?;
        for (name, mode) in [(Self::READ, read), (Self::WRITE, write)] {
            let p = dir.join(name);
            if !p.exists() {
                std::fs::write(&p, format!("{mode}\n"))?;
            }
        }
        Ok(ControlDir { dir: dir.to_path_buf() })
    }

    /// The modes the knob files hold.
    pub fn load(&self) -> Result<(IoMode, IoMode), String> {
        let one = |name: &str| -> Result<IoMode, String> {
            let p = self.dir.join(name);
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            text.parse().map_err(|e| format!("{}: {e}", p.display()))
        };
        Ok((one(Self::READ)?, one(Self::WRITE)?))
    }

    /// Records what a load did, replacing `applied` whole.
    pub fn report(&self, outcome: &Result<(IoMode, IoMode), String>) -> std::io::Result<()> {
        let text = match outcome {
            Ok((r, w)) => format!("read={r} write={w}\n"),
            Err(e) => format!("error: {e}\n"),
        };
        let tmp = self.dir.join(".applied.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(tmp, self.dir.join(Self::APPLIED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfsd_numbers_and_names_parse_alike() {
        assert_eq!("0".parse::<IoMode>().unwrap(), IoMode::Buffered);
        assert_eq!("dontcache\n".parse::<IoMode>().unwrap(), IoMode::Dontcache);
        assert_eq!("2".parse::<IoMode>().unwrap(), IoMode::Direct);
        assert_eq!("writebehind:lazy".parse::<IoMode>().unwrap(), IoMode::WriteBehind(Policy::Lazy));
        let e = "3".parse::<IoMode>().unwrap_err();
        assert!(e.contains("buffered (0)"), "{e}");
        for m in [IoMode::Buffered, IoMode::Dontcache, IoMode::Direct, IoMode::WriteBehind(Policy::Flusher)] {
            assert_eq!(m.name().parse::<IoMode>().unwrap(), m);
        }
    }
}
