use std::os::fd::AsFd;
use std::path::Path;

pub fn cached_pages(path: &Path) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    dc_sys::cachestat(f.as_fd(), 0, 0).unwrap().nr_cache
}

pub fn cached_pages_in(path: &Path, off: u64, len: u64) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    dc_sys::cachestat(f.as_fd(), off, len).unwrap().nr_cache
}

/// Writes the file back and drops it from the page cache.
pub fn drop_cache_of(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    dc_sys::fadvise(f.as_fd(), 0, 0, dc_sys::Advice::DontNeed).unwrap();
}
