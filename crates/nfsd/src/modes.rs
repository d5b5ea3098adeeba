//! nfsd's io modes, one for reads and one for writes, and the control
//! directory that switches them while the server runs.

use dc_vocab::Mode;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

/// A direction's io mode from a name (`buffered`, `dontcache`, `direct`,
/// `writebehind:<policy>`) or from the number nfsd's debugfs knobs take (0
/// buffered, 1 dontcache, 2 direct), so a harness written for the kernel
/// server drives this one unchanged. In dcnfsd, `dontcache` falls back to
/// buffered where the file system refuses `RWF_DONTCACHE`, and `direct` is
/// `O_DIRECT` for a request's block-aligned middle with its unaligned ends
/// buffered, as nfsd does.
pub fn parse_mode(s: &str) -> Result<Mode, String> {
    match s.trim() {
        "0" => Ok(Mode::Buffered),
        "1" => Ok(Mode::Dontcache),
        "2" => Ok(Mode::Direct),
        name => {
            name.parse::<Mode>().map_err(|e| format!("{e}; nfsd's numbers: buffered (0), dontcache (1), direct (2)"))
        }
    }
}

/// The modes in force, read by every request.
#[derive(Debug)]
pub struct Modes {
    current: RwLock<(Mode, Mode)>,
}

impl Modes {
    pub fn new(read: Mode, write: Mode) -> Modes {
        Modes { current: RwLock::new((read, write)) }
    }

    pub fn read(&self) -> Mode {
        self.current.read().unwrap_or_else(|e| e.into_inner()).0
    }

    pub fn write(&self) -> Mode {
        self.current.read().unwrap_or_else(|e| e.into_inner()).1
    }

    pub fn set(&self, read: Mode, write: Mode) {
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
    pub fn create(dir: &Path, read: Mode, write: Mode) -> std::io::Result<ControlDir> {
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
    pub fn load(&self) -> Result<(Mode, Mode), String> {
        let one = |name: &str| -> Result<Mode, String> {
            let p = self.dir.join(name);
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            parse_mode(&text).map_err(|e| format!("{}: {e}", p.display()))
        };
        Ok((one(Self::READ)?, one(Self::WRITE)?))
    }

    /// Records what a load did, replacing `applied` whole.
    pub fn report(&self, outcome: &Result<(Mode, Mode), String>) -> std::io::Result<()> {
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
        assert_eq!(parse_mode("0").unwrap(), Mode::Buffered);
        assert_eq!(parse_mode("dontcache\n").unwrap(), Mode::Dontcache);
        assert_eq!(parse_mode("2").unwrap(), Mode::Direct);
        assert_eq!(parse_mode("writebehind:lazy").unwrap(), Mode::WriteBehind(dc_vocab::Policy::Lazy));
        let e = parse_mode("3").unwrap_err();
        assert!(e.contains("buffered (0)"), "{e}");
        for m in Mode::ALL {
            assert_eq!(parse_mode(&m.name()).unwrap(), m);
        }
    }
}
