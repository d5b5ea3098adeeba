//! The job files of the seed benchmark suites, read from the patch series in
//! ../shared/reference: the project keeps no copy of them. Shared by the
//! jobfile and dcload tests.

use std::path::PathBuf;

/// (path in the patch, file text) of every `.fio` file the patches add.
pub fn seed_job_files() -> Vec<(String, String)> {
    // Next to the checkout (../shared/reference), wherever the checkout is;
    // DONTCACHE_REFERENCE points elsewhere; /work/shared is the project's home.
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference");
    let root = std::env::var_os("DONTCACHE_REFERENCE")
        .map(PathBuf::from)
        .into_iter()
        .chain([beside, PathBuf::from("/work/shared/reference")])
        .find(|p| p.is_dir())
        .unwrap_or_else(|| {
            panic!("the seed patches are not in ../shared/reference next to the checkout; set DONTCACHE_REFERENCE")
        });
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
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
    out
}
