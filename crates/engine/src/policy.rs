//! Which write-behind policy a handle uses, and the knobs that go with it.

use std::fmt;
use std::str::FromStr;

/// The policies of the RWF_DONTCACHE patch series, side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub enum Policy {
    /// The series' design ("mm: improve write performance with
    /// RWF_DONTCACHE"): writers count and kick; one background pass per kick
    /// writes back that many pages from the oldest dirty files, batched.
    Flusher = 0,
    /// The precursor ("mm: add IOCB_DONTCACHE_LAZY and RWF_DONTCACHE_LAZY"):
    /// the writer starts writeback of the bytes it just wrote, unless the
    /// file already has writeback in flight.
    Lazy = 1,
    /// Kernels 6.14-7.1: the writer starts writeback of every write inline.
    Inline = 2,
    /// The variant the series' discussion set aside (it loses batching
    /// across files): the flusher writes back only the file that kicked it.
    PerFile = 3,
    /// The kernel's own `RWF_DONTCACHE`; `Flusher` where it is refused.
    Kernel = 4,
}

impl Policy {
    pub const ALL: [Policy; 5] = [Policy::Flusher, Policy::Lazy, Policy::Inline, Policy::PerFile, Policy::Kernel];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Flusher => "flusher",
            Policy::Lazy => "lazy",
            Policy::Inline => "inline",
            Policy::PerFile => "per-file",
            Policy::Kernel => "kernel",
        }
    }

    pub fn from_raw(raw: i32) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| *p as i32 == raw)
    }

    /// Policies whose writeback the writer starts itself; the background
    /// thread only waits for it, reports errors and drops the pages.
    pub fn writer_starts_writeback(self) -> bool {
        matches!(self, Policy::Lazy | Policy::Inline)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> Result<Policy, String> {
        let s = s.trim().to_ascii_lowercase();
        Policy::ALL.into_iter().find(|p| p.name() == s || (s == "perfile" && *p == Policy::PerFile)).ok_or_else(|| {
            format!("unknown write-behind policy '{s}': use one of flusher, lazy, inline, per-file, kernel")
        })
    }
}

/// How the flusher submits a pass's writeback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    /// All ranges of a pass as `IORING_OP_SYNC_FILE_RANGE` SQEs, one submit.
    Uring,
    /// One `sync_file_range(SYNC_FILE_RANGE_WRITE)` call per range.
    Loop,
}

impl FromStr for Submit {
    type Err = String;

    fn from_str(s: &str) -> Result<Submit, String> {
        match s.trim() {
            "uring" | "io_uring" => Ok(Submit::Uring),
            "loop" | "sync_file_range" => Ok(Submit::Loop),
            other => Err(format!("unknown submission '{other}': use uring or loop")),
        }
    }
}

/// Per-handle options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub policy: Policy,
    /// A writer that would take the library's dirty bytes on its device past
    /// this waits for the flusher's next batch; it also caps writeback in flight.
    pub high_water: u64,
    /// How the flusher submits writeback. The device's first handle decides.
    pub submit: Submit,
}

pub const DEFAULT_HIGH_WATER: u64 = 64 << 20;

impl Default for Options {
    fn default() -> Options {
        Options { policy: Policy::Flusher, high_water: DEFAULT_HIGH_WATER, submit: Submit::Loop }
    }
}

impl Options {
    /// Defaults overridden by `DONTCACHE_POLICY`, `DONTCACHE_HIGH_WATER` (bytes,
    /// with k/m/g suffixes) and `DONTCACHE_SUBMIT`. A bad value is an error
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

/// `64m`, `1g`, `4096`, `512k`: base 2, as dd and fio read them.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix("ib").or_else(|| t.strip_suffix('b')).unwrap_or(&t);
    let (digits, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        Some('t') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| format!("'{s}' is not a size (like 64m, 1g or 4096)"))?;
    n.checked_shl(shift).filter(|v| v >> shift == n).ok_or_else(|| format!("'{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_by_name_and_number() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().unwrap(), p);
            assert_eq!(Policy::from_raw(p as i32), Some(p));
        }
        assert_eq!("PERFILE".parse::<Policy>().unwrap(), Policy::PerFile);
        let e = "fast".parse::<Policy>().unwrap_err();
        assert!(e.contains("'fast'") && e.contains("flusher"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64m").unwrap(), 64 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("512k").unwrap(), 512 << 10);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999t").is_err());
    }
}
