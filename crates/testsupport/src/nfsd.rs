//! A dcnfsd serving a directory for a test, stopped (SIGTERM, then waited
//! for) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A binary of the workspace, next to the test binary's `deps/` directory
/// (`make test` builds the whole workspace before testing).
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join(name);
    assert!(path.exists(), "{} is not built: cargo build --release --workspace (make test does)", path.display());
    path
}

pub struct NfsServer {
    child: Child,
    pub port: u16,
    /// The control directory (io_cache_read, io_cache_write, applied).
    pub control: PathBuf,
    stderr: PathBuf,
}

impl NfsServer {
    /// Serves `export`, with its control directory and logs in `work`.
    pub fn start(export: &Path, work: &Path) -> NfsServer {
        let control = work.join("control");
        let port_file = work.join("port");
        let stderr = work.join("dcnfsd.err");
        let _ = std::fs::remove_file(&port_file);
        let child = Command::new(workspace_binary("dcnfsd"))
            .arg("--export")
            .arg(export)
            .arg("--control")
            .arg(&control)
            .arg("--port-file")
            .arg(&port_file)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut server = NfsServer { child, port: 0, control, stderr };
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                server.port = text.trim().parse().unwrap();
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("dcnfsd exited ({status}): {}", server.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("dcnfsd did not start serving in 10 s: {}", server.log());
    }

    /// What dcnfsd wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The URL of the export, for `nfs_url=`.
    pub fn url(&self) -> String {
        format!("nfs://127.0.0.1/export?nfsport={p}&mountport={p}", p = self.port)
    }

    /// Switches the io modes as a harness would (knob files, SIGHUP) and
    /// waits until the server says they apply.
    pub fn set_modes(&self, read: &str, write: &str) {
        std::fs::write(self.control.join("io_cache_read"), format!("{read}\n")).unwrap();
        std::fs::write(self.control.join("io_cache_write"), format!("{write}\n")).unwrap();
        let applied = self.control.join("applied");
        let _ = std::fs::remove_file(&applied);
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGHUP) };
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(text) = std::fs::read_to_string(&applied) {
                assert!(!text.starts_with("error"), "dcnfsd refused the modes: {text}");
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("dcnfsd did not apply read={read} write={write} in 5 s: {}", self.log());
    }

    /// SIGTERM and wait: true when it exited 0 (its writeback settled).
    pub fn stop(mut self) -> bool {
        self.terminate()
    }

    fn terminate(&mut self) -> bool {
        // SAFETY: as in set_modes.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().map(|s| s.success()).unwrap_or(false)
    }
}

impl Drop for NfsServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}
