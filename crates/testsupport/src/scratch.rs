use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    /// `base/name-<pid>`, emptied; see the `scratch!` macro.
    pub fn new(base: &str, name: &str) -> Scratch {
        let dir = PathBuf::from(base).join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The path as a string, for command lines.
    pub fn file(&self, name: &str) -> String {
        self.path(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Compiles `source` (C11 with GNU extensions) into `dir/name`, with extra
/// compiler arguments (`-static`, include paths, libraries).
pub fn compile_c(dir: &Path, name: &str, source: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(["-std=gnu11", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(extra)
        .output()
        .expect("cc (build-essential) must be installed");
    assert!(out.status.success(), "cc {name}.c failed: {}", String::from_utf8_lossy(&out.stderr));
    exe
}
