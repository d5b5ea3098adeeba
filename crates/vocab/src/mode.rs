//! The I/O modes dcbench compares and dcload and dcnfsd run: how the page
//! cache is used for the I/O under test.

use crate::Policy;
use std::fmt;
use std::str::FromStr;

/// How a job (or an NFS server direction) uses the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Plain buffered I/O through the page cache.
    Buffered,
    /// The kernel's `RWF_DONTCACHE` on every read and write (fio's and
    /// dcload's option for it is `uncached=1`).
    Dontcache,
    /// `O_DIRECT`.
    Direct,
    /// Buffered I/O through libdontcache with this policy.
    WriteBehind(Policy),
}

impl Mode {
    /// Every mode, in the order tables show them.
    pub const ALL: [Mode; 8] = [
        Mode::Buffered,
        Mode::Dontcache,
        Mode::Direct,
        Mode::WriteBehind(Policy::Flusher),
        Mode::WriteBehind(Policy::Lazy),
        Mode::WriteBehind(Policy::Inline),
        Mode::WriteBehind(Policy::PerFile),
        Mode::WriteBehind(Policy::Kernel),
    ];

    /// `buffered`, `dontcache`, `direct`, `writebehind:<policy>`.
    pub fn name(self) -> String {
        match self {
            Mode::WriteBehind(p) => format!("writebehind:{}", p.name()),
            other => other.family().to_string(),
        }
    }

    /// The name without a policy: `writebehind` for every write-behind mode.
    pub fn family(self) -> &'static str {
        match self {
            Mode::Buffered => "buffered",
            Mode::Dontcache => "dontcache",
            Mode::Direct => "direct",
            Mode::WriteBehind(_) => "writebehind",
        }
    }

    /// One line for help texts and `--list-modes`.
    pub fn description(self) -> String {
        match self {
            Mode::Buffered => "plain buffered I/O through the page cache".into(),
            Mode::Dontcache => "the kernel's RWF_DONTCACHE on every read and write (Linux 6.14+)".into(),
            Mode::Direct => "O_DIRECT: no page cache".into(),
            Mode::WriteBehind(p) => {
                format!("buffered I/O through libdontcache, policy {}: {}", p.name(), p.description())
            }
        }
    }

    /// The job option (fio's syntax) that selects the mode in dcload; a job
    /// with none of them runs buffered.
    pub fn job_option(self) -> Option<(&'static str, &'static str)> {
        match self {
            Mode::Buffered => None,
            Mode::Dontcache => Some(("uncached", "1")),
            Mode::Direct => Some(("direct", "1")),
            Mode::WriteBehind(p) => Some(("writebehind", p.name())),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        let s = s.trim().to_ascii_lowercase();
        if let Some(policy) = s.strip_prefix("writebehind:") {
            return Ok(Mode::WriteBehind(policy.parse()?));
        }
        Mode::ALL.into_iter().find(|m| !matches!(m, Mode::WriteBehind(_)) && m.family() == s).ok_or_else(|| {
            format!("unknown mode '{s}': use buffered, dontcache, direct or writebehind:<policy> ({})", Policy::names())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_by_name() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>().unwrap(), m);
        }
        assert_eq!(Mode::ALL.iter().filter(|m| m.family() == "writebehind").count(), Policy::ALL.len());
        let e = "uncached".parse::<Mode>().unwrap_err();
        assert!(e.contains("'uncached'") && e.contains("per-file"), "{e}");
        assert!("writebehind:fast".parse::<Mode>().unwrap_err().contains("'fast'"));
    }
}
