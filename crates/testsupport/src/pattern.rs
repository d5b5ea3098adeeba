use std::path::Path;

/// The byte every test writes at `off` of a file tagged `tag`: varies with
/// the offset inside a page and across pages, so a misplaced page shows.
pub fn byte_at(tag: u8, off: u64) -> u8 {
    let x = off.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (off >> 12) ^ tag as u64;
    (x ^ (x >> 29)) as u8
}

pub fn pattern(tag: u8, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| byte_at(tag, off + i)).collect()
}

/// Asserts the file holds exactly the pattern, naming the first bad offset.
pub fn assert_pattern(path: &Path, tag: u8, len: u64) {
    let data = std::fs::read(path).unwrap();
    assert_eq!(data.len() as u64, len, "{} has the wrong size", path.display());
    if let Some(i) = (0..len).find(|&i| data[i as usize] != byte_at(tag, i)) {
        panic!("{}: first wrong byte at offset {i}", path.display());
    }
}
