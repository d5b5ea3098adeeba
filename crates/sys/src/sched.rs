//! A thread's scheduling: its I/O priority, its nice value and the CPUs it
//! may run on, as fio's `prio`/`prioclass`, `nice` and `cpus_allowed` set
//! them for a job (each acts on the calling thread only); signalling a
//! process, to stop the program fio's `exec` engine started; and a
//! descriptor that tells when a process has ended (`pidfd_open`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `IOPRIO_WHO_PROCESS`: with who = 0, the calling thread.
const IOPRIO_WHO_PROCESS: libc::c_int = 1;

/// `ioprio_set(IOPRIO_WHO_PROCESS, 0, value)`: the calling thread's I/O
/// priority, `class << 13 | hint << 3 | level` (EPERM for the realtime class without CAP_SYS_ADMIN).
pub fn ioprio_set_thread(value: u16) -> io::Result<()> {
    // SAFETY: ioprio_set takes three integers and touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, libc::c_int::from(value)) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `setpriority(PRIO_PROCESS, 0, nice)`: on Linux the calling thread's
/// nice value (EACCES to lower it without CAP_SYS_NICE).
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority takes integers only.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `sched_setaffinity(0, ...)`: the calling thread runs only on `cpus`
/// (EINVAL when none of them is online).
pub fn set_thread_affinity(cpus: &[u32]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: cpu is below CPU_SETSIZE, so the bit is inside the set.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    // SAFETY: set is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `kill(2)`: sends `signal` to process `pid`.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: no memory is passed; a wrong pid or signal is an error return.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `pidfd_open(pid, 0)` (Linux 5.3): a descriptor of process `pid` that
/// polls readable once the process has ended, whatever else holds its
/// descriptors. Close-on-exec, as every pidfd is.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(r as libc::c_int) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the calling thread's I/O priority back.
    fn ioprio_get_thread() -> i64 {
        // SAFETY: ioprio_get takes integers only.
        unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) }
    }

    #[test]
    fn each_setting_reaches_the_calling_thread_only() {
        std::thread::spawn(|| {
            let idle = 3 << 13;
            ioprio_set_thread(idle).unwrap();
            assert_eq!(ioprio_get_thread(), i64::from(idle));
            set_thread_nice(5).unwrap();
            // SAFETY: getpriority takes integers only.
            assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, 5);
            set_thread_affinity(&[0]).unwrap();
            // SAFETY: sched_getcpu has no preconditions.
            assert_eq!(unsafe { libc::sched_getcpu() }, 0);
            let e = set_thread_affinity(&[libc::CPU_SETSIZE as u32]).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        })
        .join()
        .unwrap();
        // SAFETY: getpriority takes integers only.
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, 0, "this thread kept its nice value");
    }

    #[test]
    fn a_pidfd_polls_readable_once_its_process_ends() {
        use std::os::fd::AsFd;
        let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let fd = pidfd_open(child.id() as libc::pid_t).unwrap();
        assert!(!crate::poll_readable(fd.as_fd(), Some(std::time::Duration::ZERO)).unwrap());
        kill(child.id() as libc::pid_t, libc::SIGKILL).unwrap();
        assert!(crate::poll_readable(fd.as_fd(), Some(std::time::Duration::from_secs(5))).unwrap());
        child.wait().unwrap();
        let gone = pidfd_open(child.id() as libc::pid_t).unwrap_err();
        assert_eq!(gone.raw_os_error(), Some(libc::ESRCH));
    }
}
