//! The command's process tree as /proc shows it: who a process's parent
//! is, and whether a process descends from another.

/// How many parents `descends_from` follows: deeper than any real tree,
/// and a bound on the reads of /proc a peer can cost.
const MAX_DEPTH: usize = 256;

/// `pid`'s parent, from /proc/PID/stat; None once `pid` is gone.
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    stat[stat.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()
}

/// Whether `pid` is `ancestor` or one of its descendants now. An orphan
/// reparented away from the tree (to init, or a subreaper outside it) no
/// longer descends from it.
pub fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        if at == ancestor {
            return true;
        }
        match parent_of(at) {
            Some(parent) if parent > 0 && parent != at => at = parent,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_this_process() {
        let (me, parent) = (dc_sys::getpid(), dc_sys::getppid());
        assert_eq!(parent_of(me), Some(parent));
    }

    #[test]
    fn a_child_descends_from_this_process_and_not_the_other_way() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let (me, pid) = (dc_sys::getpid(), child.id() as i32);
        let answers = (descends_from(pid, me), descends_from(me, pid), descends_from(me, me));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(answers, (true, false, true));
        assert!(!descends_from(pid, me), "a process reaped is nobody's descendant");
    }
}
