//! The size grammar every input of the project takes: fio's.
//!
//! fio's default `kb_base=1024` is "compatibility mode": SI-looking suffixes
//! (`k`, `KB`, `M`) are powers of two and IEC suffixes (`KiB`, `MiB`) are powers
//! of ten. That inversion is surprising but real (fio 3.33 here writes
//! 8,000,000 bytes for `size=8MiB`), and dcload must size files exactly as fio
//! does for its numbers to be comparable; the library's environment
//! variables and the `dontcache` command take the same grammar so that one
//! size means the same bytes wherever it is written.

/// The grammar in one sentence, for help texts and error messages.
pub const SIZE_GRAMMAR: &str = "a whole number of bytes with an optional unit as fio reads it: k, m, g, t, p \
    (also kb, mb, ...) are powers of 1024 (64m = 67,108,864); KiB, MiB, GiB, TiB, PiB are powers of 1000 \
    (fio's default kb_base=1024)";

/// How fio interprets unit prefixes (`kb_base=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KbBase {
    /// fio's default: `k`/`KB` = 1024, `KiB` = 1000.
    #[default]
    Compat1024,
    /// Standards mode: `k`/`KB` = 1000, `KiB` = 1024.
    Si1000,
}

/// Parse a byte count such as `4k`, `1M`, `64KiB`, `1g`, `4096`.
pub fn parse_size(text: &str, base: KbBase) -> Result<u64, String> {
    let s = text.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if digits_end == 0 {
        return Err(format!("'{text}' is not a size (expected a number with an optional unit such as 4k, 1M, 2g)"));
    }
    let number: u64 = s[..digits_end].parse().map_err(|_| format!("'{text}' is too large"))?;
    let suffix = s[digits_end..].trim().to_ascii_lowercase();
    let (power, iec) = match suffix.as_str() {
        "" | "b" => (0, false),
        "k" | "kb" => (1, false),
        "kib" => (1, true),
        "m" | "mb" => (2, false),
        "mib" => (2, true),
        "g" | "gb" => (3, false),
        "gib" => (3, true),
        "t" | "tb" => (4, false),
        "tib" => (4, true),
        "p" | "pb" => (5, false),
        "pib" => (5, true),
        _ => {
            return Err(format!(
                "'{text}': unknown size unit '{}' (use k, m, g, t, p, optionally with B or iB)",
                &s[digits_end..]
            ))
        }
    };
    let pow2 = matches!((base, iec), (KbBase::Compat1024, false) | (KbBase::Si1000, true));
    let unit: u64 = if pow2 { 1024u64.pow(power) } else { 1000u64.pow(power) };
    number.checked_mul(unit).ok_or_else(|| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_fio_compat_mode() {
        let b = KbBase::Compat1024;
        assert_eq!(parse_size("4096", b), Ok(4096));
        assert_eq!(parse_size("4k", b), Ok(4096));
        assert_eq!(parse_size("4K", b), Ok(4096));
        assert_eq!(parse_size("64KB", b), Ok(65536));
        assert_eq!(parse_size("1M", b), Ok(1 << 20));
        assert_eq!(parse_size("2g", b), Ok(2 << 30));
        assert_eq!(parse_size("1t", b), Ok(1 << 40));
        // The fio inversion: IEC suffixes are decimal in the default mode.
        assert_eq!(parse_size("8MiB", b), Ok(8_000_000));
        assert_eq!(parse_size("1KiB", b), Ok(1000));
    }

    #[test]
    fn sizes_in_si_mode() {
        let b = KbBase::Si1000;
        assert_eq!(parse_size("1k", b), Ok(1000));
        assert_eq!(parse_size("1MiB", b), Ok(1 << 20));
    }

    #[test]
    fn bad_sizes_say_why() {
        let b = KbBase::default();
        assert!(parse_size("", b).unwrap_err().contains("not a size"));
        assert!(parse_size("k", b).unwrap_err().contains("not a size"));
        assert!(parse_size("4x", b).unwrap_err().contains("unknown size unit 'x'"));
        assert!(parse_size("1.5g", b).unwrap_err().contains("unknown size unit '.5g'"));
        assert!(parse_size("99999999999p", b).unwrap_err().contains("too large"));
    }
}
