//! errno names, both ways: messages name the errno people grep for, and
//! job files name errnos (`ignore_error=ENOSPC`) as fio lets them.

/// The errnos a storage tool meets, by their symbolic names.
const NAMES: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("ENODEV", libc::ENODEV),
    ("EINVAL", libc::EINVAL),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("ERANGE", libc::ERANGE),
    ("ENODATA", libc::ENODATA),
    ("ETIME", libc::ETIME),
    ("EOVERFLOW", libc::EOVERFLOW),
    ("EILSEQ", libc::EILSEQ),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("ESTALE", libc::ESTALE),
    ("EDQUOT", libc::EDQUOT),
    ("ECANCELED", libc::ECANCELED),
    ("ENOMEDIUM", libc::ENOMEDIUM),
    ("EBADMSG", libc::EBADMSG),
    ("ENOLINK", libc::ENOLINK),
    ("EREMOTEIO", libc::EREMOTEIO),
];

/// The symbolic name of `errno`, or "errno" for one not in the table.
pub fn errno_name(errno: i32) -> &'static str {
    NAMES.iter().find(|&&(_, v)| v == errno).map_or("errno", |&(n, _)| n)
}

/// The errno a name (`ENOSPC`, any case; `ENOTSUP` is `EOPNOTSUPP` on
/// Linux) or a number stands for.
pub fn errno_by_name(name: &str) -> Option<i32> {
    if let Ok(n) = name.parse::<i32>() {
        return Some(n);
    }
    let name = if name.eq_ignore_ascii_case("ENOTSUP") { "EOPNOTSUPP" } else { name };
    NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_both_ways() {
        assert_eq!(errno_name(libc::ENOSPC), "ENOSPC");
        assert_eq!(errno_name(9999), "errno");
        assert_eq!(errno_by_name("enospc"), Some(libc::ENOSPC));
        assert_eq!(errno_by_name("ENOTSUP"), Some(libc::EOPNOTSUPP));
        assert_eq!(errno_by_name("5"), Some(5));
        assert_eq!(errno_by_name("EWHAT"), None);
    }
}
