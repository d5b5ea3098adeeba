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

/// Pages of the range still cached, or taken by the kernel's memory
/// reclaim: a reclaimed page leaves a shadow entry that `cachestat`
/// counts as evicted, a page dropped with `POSIX_FADV_DONTNEED` (as the
/// library drops) leaves none. For tests that someone else's pages
/// survive the library: machines that reclaim proactively take cached
/// pages whatever the library does (this one runs DAMON's `pageout` on
/// cold physical memory: an idle 64 MiB file, just read, lost 1,518 of
/// its 16,384 pages in a minute, each counted evicted).
pub fn kept_or_reclaimed_in(path: &Path, off: u64, len: u64) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    let c = dc_sys::cachestat(f.as_fd(), off, len).unwrap();
    c.nr_cache + c.nr_evicted
}

/// Writes the file back and drops it from the page cache.
pub fn drop_cache_of(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    dc_sys::fadvise(f.as_fd(), 0, 0, dc_sys::Advice::DontNeed).unwrap();
}
