//! fio's I/O logs: `write_iolog=FILE` records every I/O a job issues, and
//! `read_iolog=FILE` replays one.
//!
//! dcload writes version 3, as fio 3.31 and later do: a header line
//! `fio version 3 iolog`, then `USEC FILE add|open|close` and
//! `USEC FILE read|write|sync|datasync OFFSET LENGTH`, USEC counted from
//! the job's start. It reads version 2 too (no timestamps; `FILE wait USEC 0`
//! lines pause). Replay keeps the log's timing (an I/O is not issued before
//! its time) unless `replay_no_stall=1`.

use crate::engine::Dir;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

const V2: &str = "fio version 2 iolog";
const V3: &str = "fio version 3 iolog";

/// Records a job's I/O as fio's `write_iolog` does.
pub struct IologWriter {
    out: BufWriter<File>,
    name: String,
    t0: Instant,
}

impl IologWriter {
    /// `name` is the file the I/O goes to, as the log names it.
    pub fn create(path: &Path, name: &str) -> io::Result<IologWriter> {
        let mut out = BufWriter::new(File::create(path)?);
        writeln!(out, "{V3}")?;
        writeln!(out, "0 {name} add")?;
        writeln!(out, "0 {name} open")?;
        Ok(IologWriter { out, name: name.to_string(), t0: Instant::now() })
    }

    fn usec(&self, at: Instant) -> u128 {
        at.saturating_duration_since(self.t0).as_micros()
    }

    pub fn io(&mut self, dir: Dir, offset: u64, len: u32, at: Instant) -> io::Result<()> {
        writeln!(self.out, "{} {} {} {offset} {len}", self.usec(at), self.name, dir.name())
    }

    pub fn sync(&mut self, data_only: bool, at: Instant) -> io::Result<()> {
        let what = if data_only { "datasync" } else { "sync" };
        writeln!(self.out, "{} {} {what} 0 0", self.usec(at), self.name)
    }

    pub fn close(mut self) -> io::Result<()> {
        let t = self.usec(Instant::now());
        writeln!(self.out, "{t} {} close", self.name)?;
        self.out.flush()
    }
}

/// One logged action to replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Io { dir: Dir, offset: u64, len: u32 },
    Sync { data_only: bool },
}

/// A log read for replay: its actions, each with the time it was issued
/// (from the log's start), and the one file they went to.
#[derive(Debug)]
pub struct Replay {
    pub file: String,
    actions: Vec<(Duration, Action)>,
    next: usize,
}

impl Replay {
    pub fn load(path: &Path) -> Result<Replay, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("read_iolog {}: {e}", path.display()))?;
        Replay::parse(&text).map_err(|m| format!("read_iolog {}: {m}", path.display()))
    }

    fn parse(text: &str) -> Result<Replay, String> {
        let mut lines = text.lines().enumerate();
        let timed = match lines.next().map(|(_, l)| l.trim()) {
            Some(V3) => true,
            Some(V2) => false,
            other => {
                return Err(format!(
                    "starts with {:?}, not '{V2}' or '{V3}' (blktrace and other formats are not read)",
                    other.unwrap_or("")
                ))
            }
        };
        let (mut file, mut actions, mut clock) = (None::<String>, Vec::new(), Duration::ZERO);
        for (n, line) in lines {
            let at_line = |m: String| format!("line {}: {m}", n + 1);
            let mut f = line.split_whitespace();
            if timed {
                let Some(t) = f.next() else { continue };
                clock = Duration::from_micros(t.parse().map_err(|_| at_line(format!("'{t}' is not a time")))?);
            }
            let (Some(name), Some(what)) = (f.next(), f.next()) else { continue };
            let mut num = || -> Result<u64, String> {
                let v = f.next().ok_or_else(|| at_line(format!("'{what}' needs an offset and a length")))?;
                v.parse().map_err(|_| at_line(format!("'{v}' is not a number")))
            };
            let action = match what {
                "add" | "open" | "close" => None,
                "read" | "write" | "trim" => {
                    let (offset, len) = (num()?, num()?);
                    let len = u32::try_from(len).map_err(|_| at_line(format!("length {len} is 4 GiB or more")))?;
                    let dir = match what {
                        "read" => Dir::Read,
                        "write" => Dir::Write,
                        _ => Dir::Trim,
                    };
                    Some(Action::Io { dir, offset, len })
                }
                "sync" | "datasync" => Some(Action::Sync { data_only: what == "datasync" }),
                // Version 2's pause: its offset is the microseconds to wait.
                "wait" if !timed => {
                    clock += Duration::from_micros(num()?);
                    None
                }
                "wait" => None,
                other => {
                    return Err(at_line(format!(
                        "'{other}' is not replayed by dcload (read, write, trim, sync, datasync)"
                    )))
                }
            };
            match &file {
                Some(f) if f != name => {
                    return Err(at_line(format!(
                        "a second file '{name}' (after '{f}'): dcload replays logs of one file per job"
                    )))
                }
                Some(_) => {}
                None => file = Some(name.to_string()),
            }
            if let Some(a) = action {
                actions.push((clock, a));
            }
        }
        let file = file.ok_or("no I/O in the log")?;
        if !actions.iter().any(|(_, a)| matches!(a, Action::Io { .. })) {
            return Err("no reads or writes in the log".into());
        }
        Ok(Replay { file, actions, next: 0 })
    }

    /// The bytes the log reads and writes.
    pub fn bytes(&self) -> u64 {
        self.actions.iter().map(|(_, a)| if let Action::Io { len, .. } = a { u64::from(*len) } else { 0 }).sum()
    }

    /// The end of the furthest I/O: what the file must hold.
    pub fn extent(&self) -> u64 {
        self.actions
            .iter()
            .map(|(_, a)| if let Action::Io { offset, len, .. } = a { offset + u64::from(*len) } else { 0 })
            .max()
            .unwrap_or(0)
    }

    /// The next action and when (from the replay's start) it is due.
    pub fn peek(&self) -> Option<(Duration, Action)> {
        self.actions.get(self.next).copied()
    }

    pub fn advance(&mut self) {
        self.next += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_3_with_times_and_version_2_with_waits() {
        let r = Replay::parse("fio version 3 iolog\n0 f add\n0 f open\n10 f write 0 4096\n25 f read 4096 512\n30 f sync 0 0\n40 f close\n")
            .unwrap();
        assert_eq!(r.file, "f");
        assert_eq!(r.bytes(), 4608);
        assert_eq!(r.extent(), 4608);
        assert_eq!(r.peek(), Some((Duration::from_micros(10), Action::Io { dir: Dir::Write, offset: 0, len: 4096 })));
        let v2 = Replay::parse("fio version 2 iolog\nf add\nf open\nf read 0 4096\nf wait 500 0\nf read 8192 4096\n")
            .unwrap();
        assert_eq!(v2.actions[1].0, Duration::from_micros(500));
    }

    #[test]
    fn what_cannot_be_replayed_is_named() {
        assert!(Replay::parse("garbage\n").unwrap_err().contains("not 'fio version 2 iolog'"));
        assert!(Replay::parse("fio version 2 iolog\na read 0 1\nb read 0 1\n")
            .unwrap_err()
            .contains("second file 'b'"));
        assert!(Replay::parse("fio version 2 iolog\na discard 0 1\n")
            .unwrap_err()
            .contains("'discard' is not replayed"));
        let trim = Replay::parse("fio version 2 iolog\na trim 4096 512\n").unwrap();
        assert_eq!(trim.peek(), Some((Duration::ZERO, Action::Io { dir: Dir::Trim, offset: 4096, len: 512 })));
        assert!(Replay::parse("fio version 2 iolog\na read x 1\n")
            .unwrap_err()
            .contains("line 2: 'x' is not a number"));
    }

    #[test]
    fn what_is_written_reads_back() {
        let path = std::env::temp_dir().join(format!("dc-iolog-{}", std::process::id()));
        let mut w = IologWriter::create(&path, "/tmp/f").unwrap();
        let t = Instant::now();
        w.io(Dir::Write, 8192, 4096, t).unwrap();
        w.sync(true, t).unwrap();
        w.close().unwrap();
        let r = Replay::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(r.file, "/tmp/f");
        assert_eq!(
            r.actions.iter().map(|a| a.1).collect::<Vec<_>>(),
            [Action::Io { dir: Dir::Write, offset: 8192, len: 4096 }, Action::Sync { data_only: true }]
        );
    }
}
