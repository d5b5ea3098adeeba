//! dcload's errors and the exit codes they map to (documented in `--help`
//! and the README).

use std::fmt;

/// Exit status of a run whose jobs all succeeded.
pub const EXIT_OK: i32 = 0;
/// A job failed during I/O (error, short read, verify mismatch); results are still written.
pub const EXIT_JOB_FAILED: i32 = 1;
/// The command line or a job file is wrong; nothing was run.
pub const EXIT_USAGE: i32 = 2;
/// The target cannot run the jobs as asked (mode refused, misaligned O_DIRECT,
/// file cannot be created or laid out); nothing was measured.
pub const EXIT_SETUP: i32 = 3;

#[derive(Debug)]
pub enum DcError {
    Usage(String),
    Setup(String),
    /// Writing results or logs failed after the jobs ran.
    Output(String),
}

impl DcError {
    pub fn exit_code(&self) -> i32 {
        match self {
            DcError::Usage(_) => EXIT_USAGE,
            DcError::Setup(_) => EXIT_SETUP,
            DcError::Output(_) => EXIT_JOB_FAILED,
        }
    }
}

impl fmt::Display for DcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DcError::Usage(m) | DcError::Setup(m) | DcError::Output(m) => f.write_str(m),
        }
    }
}

impl From<dc_jobfile::SpecError> for DcError {
    fn from(e: dc_jobfile::SpecError) -> Self {
        DcError::Usage(e.to_string())
    }
}

/// `strerror`-style text for an errno, e.g. "No space left on device (os error 28)".
pub fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

pub use dc_vocab::errno_name;
