//! libdontcache's write-behind policies: the designs of the RWF_DONTCACHE
//! patch series, side by side.

use std::fmt;
use std::str::FromStr;

/// One write-behind policy. The discriminants are the C ABI's
/// (`DC_POLICY_*` in include/dontcache.h).
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

    /// One line for help texts and `--list-modes`.
    pub fn description(self) -> &'static str {
        match self {
            Policy::Flusher => "writers count their dirty pages and kick one background flusher per device, which writes back the oldest dirty files in one batch (the 7.2 kernel's design)",
            Policy::Lazy => "the writer starts writeback of what it wrote unless the file already has writeback in flight",
            Policy::Inline => "the writer starts writeback of every write itself (kernels 6.14-7.1)",
            Policy::PerFile => "the flusher writes back only the file that kicked it (no batching across files)",
            Policy::Kernel => "the kernel's own RWF_DONTCACHE on every write; flusher where the kernel refuses it",
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

    /// The names, for messages: `flusher, lazy, inline, per-file, kernel`.
    pub fn names() -> String {
        Policy::ALL.map(Policy::name).join(", ")
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
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s || (s == "perfile" && *p == Policy::PerFile))
            .ok_or_else(|| format!("unknown write-behind policy '{s}': use one of {}", Policy::names()))
    }
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
        assert!(e.contains("'fast'") && e.contains("flusher, lazy, inline, per-file, kernel"), "{e}");
    }
}
