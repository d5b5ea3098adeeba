//! Clocks (`clock_gettime`), and per-thread CPU accounting
//! (`getrusage(RUSAGE_THREAD)`), which is what lets a generator with one
//! thread per job report per-job CPU like fio does with one process per job.

use std::io;
use std::time::Duration;

/// CPU time and scheduling counters of the calling thread so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadCpu {
    pub user: Duration,
    pub system: Duration,
    /// Voluntary plus involuntary context switches.
    pub context_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
}

impl ThreadCpu {
    /// Accumulate another thread's usage (for group totals).
    pub fn add(&mut self, other: &ThreadCpu) {
        self.user += other.user;
        self.system += other.system;
        self.context_switches += other.context_switches;
        self.minor_faults += other.minor_faults;
        self.major_faults += other.major_faults;
    }

    /// The difference `self - earlier`, saturating at zero.
    pub fn since(&self, earlier: &ThreadCpu) -> ThreadCpu {
        ThreadCpu {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            context_switches: self.context_switches.saturating_sub(earlier.context_switches),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
        }
    }
}

/// `clock_gettime(clock)`, as seconds and nanoseconds.
pub fn clock_time(clock: libc::clockid_t) -> io::Result<(i64, u32)> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a pointer to a timespec the kernel fills.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((ts.tv_sec, ts.tv_nsec as u32))
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::new(tv.tv_sec as u64, (tv.tv_usec as u32) * 1000)
}

/// Usage of the calling thread.
pub fn thread_cpu() -> io::Result<ThreadCpu> {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // RUSAGE_THREAD is 1 on Linux; spelled out because not every libc target exports it.
    const RUSAGE_THREAD: libc::c_int = 1;
    // SAFETY: ru is a valid rusage to write to.
    if unsafe { libc::getrusage(RUSAGE_THREAD, &mut ru) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ThreadCpu {
        user: timeval(ru.ru_utime),
        system: timeval(ru.ru_stime),
        context_switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
        minor_faults: ru.ru_minflt as u64,
        major_faults: ru.ru_majflt as u64,
    })
}
