//! fio's arithmetic in option values: `$pagesize`, `$mb_memory` and
//! `$ncpus` replaced by this machine's figures (a value with one of them
//! and an operator is then computed as fio has `bc` do it: integers,
//! division truncating), and values in parentheses, `bs=(4k*2)`, computed
//! with each number read in the option's own units.
//!
//! Hand-written rather than a general expression crate: the numbers carry
//! fio's units (`4k`, `10ms`), which such crates do not read, and the
//! result must follow bc's integer rules, not floating point.

/// fio's keywords and what they stand for on this machine.
fn keywords() -> [(&'static str, u64); 3] {
    // SAFETY: sysconf reads system constants; it has no memory preconditions.
    let conf = |name| u64::try_from(unsafe { libc::sysconf(name) }).unwrap_or(0);
    let page = conf(libc::_SC_PAGESIZE);
    [
        ("$pagesize", page),
        ("$mb_memory", (conf(libc::_SC_PHYS_PAGES) * page) >> 20),
        // fio counts configured CPUs, online or not.
        ("$ncpus", conf(libc::_SC_NPROCESSORS_CONF)),
    ]
}

/// The CPUs this machine has (configured, online or not), as `$ncpus`.
pub(crate) fn ncpus() -> u32 {
    keywords()[2].1 as u32
}

/// `value` with fio's keywords replaced; when one was and the value has
/// an operator, the whole value computed (as fio: `size=5*$mb_memory/8`),
/// unless it is in parentheses, which the option's parser computes.
pub(crate) fn replace_keywords(value: &str) -> Result<String, String> {
    if !value.contains('$') {
        return Ok(value.to_string());
    }
    let mut out = value.to_string();
    let mut replaced = false;
    for (word, figure) in keywords() {
        if out.contains(word) {
            out = out.replace(word, &figure.to_string());
            replaced = true;
        }
    }
    // A value in parentheses is computed later, in the option's units.
    if !replaced || !out.contains(['+', '-', '*', '/']) || out.contains('\'') || out.trim_start().starts_with('(') {
        return Ok(out);
    }
    let n = eval(&out, &|atom| atom.parse::<i128>().map_err(|_| format!("'{atom}' is not an integer")))
        .map_err(|e| format!("'{value}' (here '{out}'): {e}"))?;
    Ok(n.to_string())
}

/// Computes `expr`: `+ - * / %`, `^` (power), unary minus and parentheses,
/// on integers; `atom` reads each number (with its unit, if any).
pub(crate) fn eval(expr: &str, atom: &dyn Fn(&str) -> Result<i128, String>) -> Result<i128, String> {
    let mut p = Parser { text: expr.as_bytes(), at: 0, atom };
    let v = p.sum()?;
    p.skip_blanks();
    match p.text.get(p.at) {
        None => Ok(v),
        Some(&c) => Err(format!("unexpected '{}' at character {}", c as char, p.at + 1)),
    }
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    atom: &'a dyn Fn(&str) -> Result<i128, String>,
}

impl Parser<'_> {
    fn skip_blanks(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    /// The next character if it is one of `ops`, consumed.
    fn take(&mut self, ops: &[u8]) -> Option<u8> {
        self.skip_blanks();
        let c = *self.text.get(self.at)?;
        ops.contains(&c).then(|| {
            self.at += 1;
            c
        })
    }

    fn sum(&mut self) -> Result<i128, String> {
        let mut v = self.product()?;
        while let Some(op) = self.take(b"+-") {
            let r = self.product()?;
            v = if op == b'+' { v.checked_add(r) } else { v.checked_sub(r) }.ok_or("the result is too large")?;
        }
        Ok(v)
    }

    fn product(&mut self) -> Result<i128, String> {
        let mut v = self.power()?;
        while let Some(op) = self.take(b"*/%") {
            let r = self.power()?;
            v = match op {
                b'*' => v.checked_mul(r).ok_or("the result is too large")?,
                _ if r == 0 => return Err("division by zero".into()),
                b'/' => v / r,
                _ => v % r,
            };
        }
        Ok(v)
    }

    /// `^` binds tighter than `*` and to the right, as in bc.
    fn power(&mut self) -> Result<i128, String> {
        let base = self.unary()?;
        if self.take(b"^").is_none() {
            return Ok(base);
        }
        let exp = self.power()?;
        let exp = u32::try_from(exp).map_err(|_| "a power must be 0 or more")?;
        base.checked_pow(exp).ok_or_else(|| "the result is too large".into())
    }

    fn unary(&mut self) -> Result<i128, String> {
        if self.take(b"-").is_some() {
            return Ok(-self.unary()?);
        }
        if self.take(b"(").is_some() {
            let v = self.sum()?;
            return match self.take(b")") {
                Some(_) => Ok(v),
                None => Err("a '(' is not closed".into()),
            };
        }
        self.skip_blanks();
        let start = self.at;
        while self.text.get(self.at).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'.') {
            self.at += 1;
        }
        if start == self.at {
            return Err(format!("a number is missing at character {}", start + 1));
        }
        (self.atom)(std::str::from_utf8(&self.text[start..self.at]).expect("ASCII"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(text: &str) -> Result<i128, String> {
        eval(text, &|a| a.parse().map_err(|_| format!("'{a}'")))
    }

    #[test]
    fn integer_arithmetic_as_bc_does_it() {
        assert_eq!(int("5*1024*1024*8/8"), Ok(5 << 20));
        assert_eq!(int("7/2"), Ok(3), "division truncates");
        assert_eq!(int("1+2*3"), Ok(7));
        assert_eq!(int("(1+2)*3"), Ok(9));
        assert_eq!(int("2^3^2"), Ok(512), "power binds to the right");
        assert_eq!(int("-4+10 % 4"), Ok(-2));
        assert!(int("1/0").unwrap_err().contains("division by zero"));
        assert!(int("(1+2").unwrap_err().contains("not closed"));
        assert!(int("1+").unwrap_err().contains("number is missing"));
        assert!(int("2^200").unwrap_err().contains("too large"));
    }

    #[test]
    fn keywords_are_this_machines_figures() {
        // SAFETY: sysconf has no memory preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        assert_eq!(replace_keywords("$pagesize"), Ok(page.to_string()));
        assert_eq!(replace_keywords("$pagesize*2"), Ok((page * 2).to_string()));
        let mb: u64 = replace_keywords("$mb_memory").unwrap().parse().unwrap();
        assert!(mb > 0);
        assert_eq!(replace_keywords("$mb_memory/8"), Ok((mb / 8).to_string()));
        assert_eq!(replace_keywords("a-b/$jobnum"), Ok("a-b/$jobnum".into()), "no keyword: left as written");
        assert!(replace_keywords("$ncpus*").unwrap_err().contains("number is missing"));
    }
}
