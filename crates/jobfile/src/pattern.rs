//! fio's byte patterns (`buffer_pattern=`, `verify_pattern=`): tokens in
//! any order, each adding bytes: `0x...` hex (two digits a byte, in the
//! order written; an odd count makes the first byte one digit), a decimal
//! integer in the C int range (its 32-bit two's complement, little-endian,
//! only as many bytes as it needs; 0 is one zero byte), `"text"` as is, and
//! `'file'`: that file's bytes, read when the job is read.

/// The longest pattern fio takes (128 MiB since fio 3.34; 512 bytes before);
/// a longer one is refused, not cut.
pub const MAX_PATTERN: usize = 128 << 20;

pub(crate) fn parse_pattern(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        rest = rest.trim_start();
        let (bytes, next) = if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').ok_or("a string is not closed (\"...\")")?;
            (r.as_bytes()[..end].to_vec(), &r[end + 1..])
        } else if let Some(r) = rest.strip_prefix('\'') {
            let end = r.find('\'').ok_or("a file name is not closed ('...')")?;
            let name = &r[..end];
            let size = std::fs::metadata(name).map_err(|e| format!("pattern file '{name}': {e}"))?.len();
            if size > MAX_PATTERN as u64 {
                return Err(format!("pattern file '{name}' is {size} bytes; fio takes at most {MAX_PATTERN}"));
            }
            let data = std::fs::read(name).map_err(|e| format!("pattern file '{name}': {e}"))?;
            (data, &r[end + 1..])
        } else if rest.starts_with('%') {
            return Err(format!(
                "'{rest}': format specifiers (%o) in patterns are not supported by dcload; give the bytes"
            ));
        } else if rest.len() > 2 && rest.as_bytes()[..2].eq_ignore_ascii_case(b"0x") {
            hex(&rest[2..])?
        } else {
            decimal(rest)?
        };
        out.extend_from_slice(&bytes);
        rest = next;
    }
    if out.is_empty() {
        return Err("the pattern is empty".into());
    }
    if out.len() > MAX_PATTERN {
        return Err(format!("the pattern is {} bytes; fio takes at most {MAX_PATTERN}", out.len()));
    }
    Ok(out)
}

/// Hex digits up to the next token (a following `0x` starts a new one).
fn hex(s: &str) -> Result<(Vec<u8>, &str), String> {
    let mut n = s.bytes().take_while(u8::is_ascii_hexdigit).count();
    if starts_next_hex(s, n) {
        n -= 1;
    }
    if n == 0 {
        return Err(format!("'0x{s}': no hex digits after 0x"));
    }
    let digits = &s[..n];
    let (first, pairs) = digits.split_at(n % 2);
    let mut out = Vec::with_capacity(n.div_ceil(2));
    if !first.is_empty() {
        out.push(u8::from_str_radix(first, 16).expect("a hex digit"));
    }
    for i in (0..pairs.len()).step_by(2) {
        out.push(u8::from_str_radix(&pairs[i..i + 2], 16).expect("hex digits"));
    }
    Ok((out, &s[n..]))
}

/// Whether the digit before `s[n]` is the `0` of a following `0x`
/// ("0xff0x14", "-120xdeadface"): it starts the next token.
fn starts_next_hex(s: &str, n: usize) -> bool {
    let b = s.as_bytes();
    n > 0 && n < b.len() && b[n - 1] == b'0' && b[n].eq_ignore_ascii_case(&b'x')
}

/// A decimal integer, ending where a `0x` or anything not a digit starts.
fn decimal(s: &str) -> Result<(Vec<u8>, &str), String> {
    let sign = usize::from(s.starts_with('-') || s.starts_with('+'));
    let mut n = sign + s[sign..].bytes().take_while(u8::is_ascii_digit).count();
    if n > sign && starts_next_hex(s, n) {
        n -= 1;
    }
    if n == sign {
        return Err(format!("'{s}': not a pattern (0x hex, a decimal, \"text\" or 'file')"));
    }
    let v: i64 = s[..n].parse().map_err(|_| format!("'{}' is not a decimal", &s[..n]))?;
    if v < i64::from(i32::MIN) || v > i64::from(i32::MAX) {
        return Err(format!("{v} is outside a C int, as fio's decimals must be"));
    }
    let mut u = v as i32 as u32;
    let mut out = Vec::new();
    if u == 0 {
        out.push(0);
    }
    while u != 0 {
        out.push(u as u8);
        u >>= 8;
    }
    Ok((out, &s[n..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_as_fio_reads_them() {
        assert_eq!(parse_pattern("0xdeadface").unwrap(), [0xde, 0xad, 0xfa, 0xce]);
        assert_eq!(parse_pattern("0xaaa").unwrap(), [0x0a, 0xaa]);
        assert_eq!(parse_pattern("0xff0x14").unwrap(), [0xff, 0x14]);
        assert_eq!(parse_pattern("0").unwrap(), [0]);
        assert_eq!(parse_pattern("258").unwrap(), [2, 1]);
        assert_eq!(
            parse_pattern("\"abcd\"-120xdeadface").unwrap(),
            [b'a', b'b', b'c', b'd', 0xf4, 0xff, 0xff, 0xff, 0xde, 0xad, 0xfa, 0xce]
        );
    }

    #[test]
    fn a_file_token_reads_the_file() {
        let dir = std::env::temp_dir().join(format!("dc-pattern-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("p");
        std::fs::write(&f, b"xyz").unwrap();
        assert_eq!(parse_pattern(&format!("'{}'0x01", f.display())).unwrap(), b"xyz\x01");
        assert!(parse_pattern(&format!("'{}/missing'", dir.display())).unwrap_err().contains("missing"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_patterns_say_why() {
        assert!(parse_pattern("%o").unwrap_err().contains("format specifiers"));
        assert!(parse_pattern("\"open").unwrap_err().contains("not closed"));
        assert!(parse_pattern("zz").unwrap_err().contains("not a pattern"));
        assert!(parse_pattern("4294967296").unwrap_err().contains("C int"));
        // Long patterns come from files: one of 16 KiB is taken whole, one
        // over fio's limit refused.
        let dir = std::env::temp_dir().join(format!("dc-pattern-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ok, big) = (dir.join("ok"), dir.join("big"));
        std::fs::write(&ok, vec![7u8; 16 << 10]).unwrap();
        std::fs::File::create(&big).unwrap().set_len(MAX_PATTERN as u64 + 1).unwrap();
        assert_eq!(parse_pattern(&format!("'{}'", ok.display())).unwrap().len(), 16 << 10);
        let e = parse_pattern(&format!("'{}'", big.display())).unwrap_err();
        assert!(e.contains("fio takes at most 134217728"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
