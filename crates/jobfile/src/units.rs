//! fio's value grammar: sizes with unit suffixes, times, booleans.
//!
//! fio's default `kb_base=1024` is "compatibility mode": SI-looking suffixes
//! (`k`, `KB`, `M`) are powers of two and IEC suffixes (`KiB`, `MiB`) are powers
//! of ten. That inversion is surprising but real (fio 3.33 here writes
//! 8,000,000 bytes for `size=8MiB`), and dcload must size files exactly as fio
//! does for its numbers to be comparable, so it is reproduced on purpose.

use std::time::Duration;

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
/// How a refusal for a device feature dcload will not drive ends: the
/// words dcload's fio-compatibility table sorts such refusals by.
pub const HARDWARE: &str = "which dcload does not drive (hardware outside its scope); run this job with fio";

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
        "z" => {
            return Err(format!(
                "'{text}': zone units count the zones of a zoned block device (zonemode=zbd), {HARDWARE}"
            ))
        }
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

/// Parse a time such as `300` (in `default_unit`), `10s`, `500ms`, `2m`, `1h`.
pub fn parse_time(text: &str, default_unit: Duration) -> Result<Duration, String> {
    let s = text.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if digits_end == 0 {
        return Err(format!("'{text}' is not a time (expected a number with an optional unit: us, ms, s, m, h, d)"));
    }
    let number: u64 = s[..digits_end].parse().map_err(|_| format!("'{text}' is too large"))?;
    let unit = match s[digits_end..].trim().to_ascii_lowercase().as_str() {
        "" => default_unit,
        "us" | "usec" => Duration::from_micros(1),
        "ms" | "msec" => Duration::from_millis(1),
        "s" | "sec" => Duration::from_secs(1),
        "m" | "min" => Duration::from_secs(60),
        "h" | "hour" => Duration::from_secs(3600),
        "d" | "day" => Duration::from_secs(86400),
        other => return Err(format!("'{text}': unknown time unit '{other}' (use us, ms, s, m, h, d)")),
    };
    u32::try_from(number).ok().and_then(|n| unit.checked_mul(n)).ok_or_else(|| format!("'{text}' is too long"))
}

/// fio booleans: `1`/`0`, and the words fio's parser accepts.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!("'{text}' is not a boolean (use 1 or 0)")),
    }
}

/// A plain non-negative integer (fio also allows unit suffixes on some
/// integers; dcload does not guess which).
pub fn parse_uint(text: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| format!("'{text}' is not a non-negative integer"))
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

    #[test]
    fn times() {
        let s = Duration::from_secs(1);
        assert_eq!(parse_time("300", s), Ok(Duration::from_secs(300)));
        assert_eq!(parse_time("10s", s), Ok(Duration::from_secs(10)));
        assert_eq!(parse_time("500ms", s), Ok(Duration::from_millis(500)));
        assert_eq!(parse_time("2m", s), Ok(Duration::from_secs(120)));
        assert_eq!(parse_time("250", Duration::from_millis(1)), Ok(Duration::from_millis(250)));
        assert!(parse_time("5y", s).unwrap_err().contains("unknown time unit"));
    }

    #[test]
    fn bools() {
        assert_eq!(parse_bool("1"), Ok(true));
        assert_eq!(parse_bool("0"), Ok(false));
        assert!(parse_bool("2").is_err());
    }
}
