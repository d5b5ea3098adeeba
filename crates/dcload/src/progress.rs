//! A one-line progress display on stderr while jobs run, when stderr is a
//! terminal: elapsed time, bytes moved and the current rate. Workers only
//! add to their own counter (a relaxed atomic add per I/O, no contention);
//! a separate thread reads them once a second.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One counter per instance, each on its own cache line so writers never share one.
#[repr(align(64))]
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn add(&self, bytes: u64) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }
}

pub struct Progress {
    pub counters: Vec<Counter>,
    done: AtomicBool,
}

impl Progress {
    pub fn new(instances: usize) -> Progress {
        Progress { counters: (0..instances).map(|_| Counter::default()).collect(), done: AtomicBool::new(false) }
    }

    pub fn enabled() -> bool {
        std::io::stderr().is_terminal() && std::env::var_os("DCLOAD_NO_PROGRESS").is_none()
    }

    fn total(&self) -> u64 {
        self.counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }

    /// Print until `finish` is called; run on its own thread.
    pub fn display(&self, label: &str) {
        let start = Instant::now();
        let mut last = (start, 0u64);
        while !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            let now = Instant::now();
            if now.duration_since(last.0) < Duration::from_secs(1) {
                continue;
            }
            let total = self.total();
            let rate = (total - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
            last = (now, total);
            eprint!(
                "\r{label}: {:6.1}s  {:9.1} MiB done  {:8.1} MB/s   ",
                start.elapsed().as_secs_f64(),
                total as f64 / (1 << 20) as f64,
                rate / 1e6
            );
            let _ = std::io::stderr().flush();
        }
        if last.1 > 0 {
            eprint!("\r{:70}\r", "");
        }
    }

    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
    }
}
