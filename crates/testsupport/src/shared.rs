//! `../shared` beside the checkout: the seed patches (`reference/`), fio's
//! own job files (`fio-jobs/`) and tools (`fio-tools/`). The project keeps
//! no copy of any of it; a clone without it skips the tests that need it.

use std::path::PathBuf;

/// `../shared` next to the checkout (or `DONTCACHE_SHARED`), if there.
pub fn shared_dir() -> Option<PathBuf> {
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    std::env::var_os("DONTCACHE_SHARED").map(PathBuf::from).into_iter().chain([beside]).find(|p| p.is_dir())
}

/// Says on the test run's own stderr (not the captured output) that a test
/// is skipped and why: a clone without `../shared` passes, visibly.
pub fn skip(test: &str, why: &str) {
    let line = format!("SKIPPED {test}: {why}\n");
    // SAFETY: writes a buffer to stderr, past the harness's capture.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

/// `../shared/fio-jobs`, if there.
pub fn fio_jobs_dir() -> Option<PathBuf> {
    shared_dir().map(|d| d.join("fio-jobs")).filter(|d| d.is_dir())
}

/// `../shared/fio-tools`, if there.
pub fn fio_tools_dir() -> Option<PathBuf> {
    shared_dir().map(|d| d.join("fio-tools")).filter(|d| d.is_dir())
}

/// (path in the patch, file text) of every `.fio` file the seed patches
/// add, read from `../shared/reference`; `None` where it is absent.
pub fn seed_job_files() -> Option<Vec<(String, String)>> {
    let root = shared_dir().map(|d| d.join("reference")).filter(|d| d.is_dir())?;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&root).ok()? {
        let text = std::fs::read_to_string(entry.ok()?.path()).ok()?;
        let mut current: Option<(String, String)> = None;
        for line in text.lines() {
            if let Some(path) = line.strip_prefix("+++ b/") {
                out.extend(current.take());
                if path.ends_with(".fio") {
                    current = Some((path.to_string(), String::new()));
                }
            } else if let Some((_, body)) = current.as_mut() {
                if line.starts_with("diff --git") || line.starts_with("--") && !line.starts_with("---") {
                    out.extend(current.take());
                } else if let Some(added) = line.strip_prefix('+') {
                    body.push_str(added);
                    body.push('\n');
                }
            }
        }
        out.extend(current);
    }
    Some(out)
}
