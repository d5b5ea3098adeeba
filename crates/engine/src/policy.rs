//! Which write-behind policy a handle uses, and the knobs that go with it.

pub use dc_vocab::Policy;
use std::str::FromStr;

/// How the flusher submits a pass's writeback (the C ABI's numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub enum Submit {
    /// One `sync_file_range(SYNC_FILE_RANGE_WRITE)` call per range.
    Loop = 0,
    /// All ranges of a pass as `IORING_OP_SYNC_FILE_RANGE` SQEs, one submit.
    Uring = 1,
    /// A batch of closed files as one `syncfs(2)`, which the kernel plugs
    /// across files so the disk gets merged writes (each `sync_file_range`
    /// is plugged on its own: one write per small file); otherwise as
    /// `Loop`. See `Device::plugs_across_files` for when.
    Syncfs = 2,
    /// The default: `Syncfs` on ext4 and XFS (an overlay counts as its
    /// upper layer's filesystem, see `Engine::device`), where it measured fastest
    /// for small files (4 writers 1.14-1.21x the kernel's `RWF_DONTCACHE`
    /// on ext4, 1.3-1.4x on XFS, where `Loop` made 0.71-0.83x and 0.92-0.98x);
    /// `Loop` elsewhere (on btrfs a `syncfs` commits a transaction: 0.7x
    /// of `Loop`). Decided per device, from its filesystem.
    Auto = 3,
}

impl Submit {
    /// What `self` means on a filesystem of type `fs` (its name, as
    /// `dc_sys::Filesystem::kind` gives it).
    pub fn on(self, fs: &str) -> Submit {
        match self {
            Submit::Auto if matches!(fs, "ext4" | "xfs") => Submit::Syncfs,
            Submit::Auto => Submit::Loop,
            other => other,
        }
    }
}

impl FromStr for Submit {
    type Err = String;

    fn from_str(s: &str) -> Result<Submit, String> {
        match s.trim() {
            "uring" | "io_uring" => Ok(Submit::Uring),
            "loop" | "sync_file_range" => Ok(Submit::Loop),
            "syncfs" => Ok(Submit::Syncfs),
            "auto" => Ok(Submit::Auto),
            other => Err(format!("unknown submission '{other}': use auto, loop, uring or syncfs")),
        }
    }
}

/// Per-handle options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub policy: Policy,
    /// A writer that would take the library's dirty bytes on its device past
    /// this waits for the flusher's next batch; twice it caps the writeback in flight.
    pub high_water: u64,
    /// How the flusher submits writeback. The device's first handle decides.
    pub submit: Submit,
}

pub const DEFAULT_HIGH_WATER: u64 = 64 << 20;

impl Default for Options {
    fn default() -> Options {
        Options { policy: Policy::Flusher, high_water: DEFAULT_HIGH_WATER, submit: Submit::Auto }
    }
}

impl Options {
    /// Defaults overridden by `DONTCACHE_POLICY`, `DONTCACHE_HIGH_WATER` (a
    /// size in [`dc_vocab::SIZE_GRAMMAR`]) and `DONTCACHE_SUBMIT`. A bad value is an error
    /// naming the variable, never silently ignored.
    pub fn from_env() -> Result<Options, String> {
        let mut o = Options::default();
        if let Some(v) = env("DONTCACHE_POLICY") {
            o.policy = v.parse().map_err(|e| format!("DONTCACHE_POLICY: {e}"))?;
        }
        if let Some(v) = env("DONTCACHE_HIGH_WATER") {
            o.high_water = parse_size(&v).map_err(|e| format!("DONTCACHE_HIGH_WATER: {e}"))?;
        }
        if let Some(v) = env("DONTCACHE_SUBMIT") {
            o.submit = v.parse().map_err(|e| format!("DONTCACHE_SUBMIT: {e}"))?;
        }
        Ok(o)
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A size in the project's one grammar ([`dc_vocab::SIZE_GRAMMAR`]):
/// `64m` is 64 MiB, as in a job file.
pub fn parse_size(s: &str) -> Result<u64, String> {
    dc_vocab::parse_size(s, dc_vocab::KbBase::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64m").unwrap(), 64 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("1GiB").unwrap(), 1_000_000_000, "fio's grammar, as in a job file");
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("512k").unwrap(), 512 << 10);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999t").is_err());
    }

    #[test]
    fn auto_is_syncfs_on_ext4_and_xfs_and_loop_elsewhere() {
        assert_eq!(Options::default().submit, Submit::Auto);
        assert_eq!("auto".parse::<Submit>().unwrap(), Submit::Auto);
        assert_eq!(Submit::Auto.on("ext4"), Submit::Syncfs);
        assert_eq!(Submit::Auto.on("xfs"), Submit::Syncfs);
        for fs in ["btrfs", "tmpfs", "fuse", "nfs", "overlayfs"] {
            assert_eq!(Submit::Auto.on(fs), Submit::Loop, "{fs}");
        }
        assert_eq!(Submit::Loop.on("ext4"), Submit::Loop, "an explicit choice stays");
        assert_eq!(Submit::Syncfs.on("btrfs"), Submit::Syncfs);
    }
}
