//! Where results go, decided before any I/O: a regular file (written under
//! a temporary name in its directory and renamed into place, so a reader
//! never sees half a result and nothing but a regular file is ever
//! replaced), or stdout (which must be open).

use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::error::DcError;

pub enum Sink {
    Stdout,
    /// The file to write, symlinks resolved.
    File(PathBuf),
}

fn refuse(path: &Path, why: &str) -> DcError {
    DcError::Usage(format!("--output={}: {why}; nothing was run", path.display()))
}

/// Checks `--output` (or stdout) can take the results, before any I/O.
/// `stdout_closed`: whether the process started with descriptor 1 closed
/// (the binary looks before Rust's runtime puts /dev/null there).
pub fn sink(output: Option<&Path>, stdout_closed: bool) -> Result<Sink, DcError> {
    let Some(path) = output else {
        if stdout_closed {
            return Err(DcError::Usage("stdout is closed: the results would be lost; pass --output=FILE".into()));
        }
        return Ok(Sink::Stdout);
    };
    if path.as_os_str().is_empty() {
        return Err(DcError::Usage("--output needs a file name".into()));
    }
    let target = match std::fs::symlink_metadata(path) {
        // Symlinks are followed; one to nothing is refused.
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).map_err(|_| refuse(path, "a symlink to nothing"))?
        }
        _ => path.to_path_buf(),
    };
    match std::fs::metadata(&target) {
        Ok(m) => {
            let ft = m.file_type();
            let kind = if ft.is_dir() {
                "a directory; name a file in it"
            } else if ft.is_block_device() || ft.is_char_device() {
                "a device; dcload writes results to regular files only"
            } else if ft.is_fifo() {
                "a FIFO; dcload writes results to regular files only (or stdout)"
            } else if ft.is_socket() {
                "a socket; dcload writes results to regular files only"
            } else {
                ""
            };
            if !kind.is_empty() {
                return Err(refuse(path, &format!("is {kind}")));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(refuse(path, &e.to_string())),
    }
    // Can the directory take the temporary and the rename? Try it now.
    let tmp = temporary(&target);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| refuse(path, &format!("cannot create a file in its directory: {e}")))?;
    let _ = std::fs::remove_file(&tmp);
    Ok(Sink::File(target))
}

fn temporary(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    target.with_file_name(format!(".{name}.dcload-{}", std::process::id()))
}

/// Writes the results. A file is renamed into place only over a regular
/// file or nothing (checked again now: it may have changed during the run).
pub fn write(sink: &Sink, text: &str) -> Result<(), DcError> {
    match sink {
        Sink::Stdout => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|_| stdout.flush())
                .map_err(|e| DcError::Output(format!("writing results to stdout: {e}")))
        }
        Sink::File(target) => {
            let fail = |e: std::io::Error| DcError::Output(format!("cannot write {}: {e}", target.display()));
            let tmp = temporary(target);
            let result = (|| {
                let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
                f.write_all(text.as_bytes())?;
                f.sync_all()?;
                match std::fs::symlink_metadata(target) {
                    Ok(m) if m.is_file() => std::fs::rename(&tmp, target),
                    Ok(_) => Err(std::io::Error::other("it is no longer a regular file; not replaced")),
                    Err(_) => dc_sys::rename_noreplace(&tmp, target),
                }
            })();
            if result.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            result.map_err(fail)
        }
    }
}
