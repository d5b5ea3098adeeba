//! fio's value grammar: sizes (the project's one size grammar, from
//! dc-vocab), times, booleans.

use std::time::Duration;

pub use dc_vocab::KbBase;

/// How a refusal for a device feature dcload will not drive ends: the
/// words dcload's fio-compatibility table sorts such refusals by.
pub const HARDWARE: &str = "which dcload does not drive (hardware outside its scope); run this job with fio";

/// A byte count in fio's grammar ([`dc_vocab::parse_size`]); zone units
/// (`4z`), which count the zones of a zoned device, are refused by name.
pub fn parse_size(text: &str, base: KbBase) -> Result<u64, String> {
    if text.trim_start().starts_with('(') {
        return computed(text, &|atom| parse_size(atom, base).map(i128::from));
    }
    let unit = text.trim().trim_start_matches(|c: char| c.is_ascii_digit());
    if unit.eq_ignore_ascii_case("z") && unit.len() < text.trim().len() {
        return Err(format!("'{text}': zone units count the zones of a zoned block device (zonemode=zbd), {HARDWARE}"));
    }
    dc_vocab::parse_size(text, base)
}

/// Parse a time such as `300` (in `default_unit`), `10s`, `500ms`, `2m`, `1h`.
pub fn parse_time(text: &str, default_unit: Duration) -> Result<Duration, String> {
    if text.trim_start().starts_with('(') {
        let ns = computed(text, &|atom| parse_time(atom, default_unit).map(|d| d.as_nanos() as i128))?;
        return Ok(Duration::from_nanos(ns));
    }
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
    if text.trim_start().starts_with('(') {
        return computed(text, &|atom| atom.parse::<i128>().map_err(|_| format!("'{atom}' is not an integer")));
    }
    text.trim().parse().map_err(|_| format!("'{text}' is not a non-negative integer"))
}

/// fio's `READ,WRITE,TRIM` list: one value is every direction's; with
/// two, trims take the write value; an empty entry is `None` (the default).
pub(crate) fn per_direction(text: &str) -> Result<[Option<&str>; 3], String> {
    let parts: Vec<Option<&str>> = text.split(',').map(str::trim).map(|v| Some(v).filter(|v| !v.is_empty())).collect();
    match parts.as_slice() {
        [one] => Ok([*one; 3]),
        [r, w] => Ok([*r, *w, *w]),
        [r, w, t] => Ok([*r, *w, *t]),
        _ => Err("give at most READ,WRITE,TRIM".into()),
    }
}

/// Each direction's value of a `READ,WRITE,TRIM` list read by `one`, or
/// `default` where the list leaves it empty.
pub(crate) fn each_direction<T: Clone>(
    text: &str,
    default: &T,
    one: impl Fn(&str) -> Result<T, String>,
) -> Result<[T; 3], String> {
    let [r, w, t] = per_direction(text)?;
    let read = |v: Option<&str>| v.map_or_else(|| Ok(default.clone()), &one);
    Ok([read(r)?, read(w)?, read(t)?])
}

/// A value in parentheses, computed as fio does (each number in the
/// option's own units); it must come out as a non-negative integer.
fn computed(text: &str, atom: &dyn Fn(&str) -> Result<i128, String>) -> Result<u64, String> {
    let v = crate::arith::eval(text, atom).map_err(|e| format!("'{text}': {e}"))?;
    u64::try_from(v).map_err(|_| format!("'{text}' comes to {v}, which is not a non-negative integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_units_are_refused_by_name() {
        assert!(parse_size("4z", KbBase::default()).unwrap_err().contains("zonemode=zbd"));
        assert_eq!(parse_size("4k", KbBase::default()), Ok(4096));
    }

    #[test]
    fn values_in_parentheses_are_computed_in_the_options_units() {
        assert_eq!(parse_size("(4k*2)", KbBase::default()), Ok(8192));
        assert_eq!(parse_size("(1m - 4k)", KbBase::default()), Ok((1 << 20) - 4096));
        assert_eq!(parse_uint("(3*4)"), Ok(12));
        assert_eq!(parse_time("(1+2)", Duration::from_secs(1)), Ok(Duration::from_secs(3)));
        assert_eq!(parse_time("(1s+500ms)", Duration::from_secs(1)), Ok(Duration::from_millis(1500)));
        assert!(parse_size("(4k-8k)", KbBase::default()).unwrap_err().contains("not a non-negative integer"));
    }

    #[test]
    fn per_direction_lists_read_as_fio_reads_them() {
        assert_eq!(per_direction("8k,32k"), Ok([Some("8k"), Some("32k"), Some("32k")]), "trims take the write value");
        assert_eq!(per_direction("8k,"), Ok([Some("8k"), None, None]));
        assert_eq!(per_direction(",8k"), Ok([None, Some("8k"), Some("8k")]));
        assert_eq!(per_direction("4k,4k,8k"), Ok([Some("4k"), Some("4k"), Some("8k")]));
        assert!(per_direction("1,2,3,4").is_err());
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
