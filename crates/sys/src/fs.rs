//! Facts about files, filesystems and block devices that error messages and
//! result manifests must name: filesystem type, DIO alignment, the device
//! behind a file and the running kernel.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Name of the filesystem holding `path`, from its `statfs(2)` magic number.
/// Unknown magics are printed in hex so the message still identifies them.
pub fn fs_type_name(path: &Path) -> io::Result<String> {
    Ok(magic_name(statfs(path)?.f_type as u64))
}

/// `statfs(2)` of the filesystem holding `path`.
fn statfs(path: &Path) -> io::Result<libc::statfs> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: statfs is plain data filled by the kernel.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string, st a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Bytes an unprivileged writer may still put on the filesystem holding
/// `path` (`statfs(2)`: available blocks times the block size), the space
/// fio's `fill_device` writes into.
pub fn fs_free_bytes(path: &Path) -> io::Result<u64> {
    let st = statfs(path)?;
    Ok((st.f_bavail as u64).saturating_mul(st.f_bsize as u64))
}

/// Name of the filesystem an open file is on (`fstatfs(2)`), as
/// [`fs_type_name`] names it.
pub fn fs_type_of(fd: BorrowedFd<'_>) -> io::Result<String> {
    Ok(fs_of(fd)?.kind())
}

/// Which filesystem an open file is on: its type and its `f_fsid`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filesystem {
    pub magic: u64,
    /// Disk filesystems (ext4, XFS, btrfs) derive it from their UUID, so a
    /// new filesystem on a reused device number (a loop device detached and
    /// attached again) has another; in-memory ones from the device number.
    pub id: u64,
}

impl Filesystem {
    /// The type's name, as [`fs_type_name`] gives it.
    pub fn kind(&self) -> String {
        magic_name(self.magic)
    }
}

/// `fstatfs(2)` of an open file, as a [`Filesystem`].
pub fn fs_of(fd: BorrowedFd<'_>) -> io::Result<Filesystem> {
    // SAFETY: statfs is plain data filled by the kernel.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fsid_t is two 32-bit ints in the kernel's ABI (the libc crate
    // keeps its fields private); any bit pattern is a valid [i32; 2].
    let [hi, lo]: [i32; 2] = unsafe { std::mem::transmute(st.f_fsid) };
    Ok(Filesystem { magic: st.f_type as u64, id: (u64::from(hi as u32) << 32) | u64::from(lo as u32) })
}

fn magic_name(magic: u64) -> String {
    let name = match magic {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0xF2F5_2010 => "f2fs",
        0xCA45_1A4E => "bcachefs",
        0x2FC1_2FC1 => "zfs",
        0x5346_544E => "ntfs",
        0x4d44 => "vfat",
        0x2011_BAB0 => "exfat",
        0x8584_58F6 => "ramfs",
        0x9584_58F6 => "hugetlbfs",
        0x9FA0 => "proc",
        0x6265_6572 => "sysfs",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x0027_E0EB => "cgroup",
        0x6367_7270 => "cgroup2",
        0x1CD1 => "devpts",
        0xCAFE_4A11 => "bpf",
        0x7363_6673 => "securityfs",
        0x6E73_6673 => "nsfs",
        _ => return format!("unknown (statfs magic {magic:#x})"),
    };
    name.to_string()
}

/// Whether a filesystem, named as [`fs_type_name`] names it, is one whose
/// files the kernel generates (procfs, sysfs and their kin): nothing is
/// stored, nothing is cached to drop, and a copy into one is a write to a
/// kernel interface.
pub fn is_generated_fs(kind: &str) -> bool {
    matches!(
        kind,
        "proc" | "sysfs" | "debugfs" | "tracefs" | "cgroup" | "cgroup2" | "devpts" | "bpf" | "securityfs" | "nsfs"
    )
}

/// The alignment `O_DIRECT` I/O on a file needs, from `statx(STATX_DIOALIGN)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DioAlignment {
    /// Required alignment of the user buffer in memory.
    pub memory: u32,
    /// Required alignment of file offsets and lengths.
    pub offset: u32,
}

/// `Ok(None)` when the filesystem does not report DIO alignment (or does not
/// support O_DIRECT on this file at all: statx reports zeros then).
pub fn dio_alignment(fd: BorrowedFd<'_>) -> io::Result<Option<DioAlignment>> {
    let stx = statx(fd, libc::STATX_DIOALIGN)?;
    if stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return Ok(None);
    }
    Ok(Some(DioAlignment { memory: stx.stx_dio_mem_align, offset: stx.stx_dio_offset_align }))
}

/// When the file was made (`statx`'s `stx_btime`), as seconds and
/// nanoseconds since the epoch; `Ok(None)` where the filesystem does not
/// keep it.
pub fn birth_time(fd: BorrowedFd<'_>) -> io::Result<Option<(i64, u32)>> {
    let stx = statx(fd, libc::STATX_BTIME)?;
    if stx.stx_mask & libc::STATX_BTIME == 0 {
        return Ok(None);
    }
    Ok(Some((stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec)))
}

/// `statx(2)` of an open file, asking for `mask`.
fn statx(fd: BorrowedFd<'_>, mask: libc::c_uint) -> io::Result<libc::statx> {
    // SAFETY: statx is plain data filled by the kernel.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let empty = c"";
    // SAFETY: AT_EMPTY_PATH with an empty string stats the fd itself.
    let ret = unsafe { libc::statx(fd.as_raw_fd(), empty.as_ptr(), libc::AT_EMPTY_PATH, mask, &mut stx) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stx)
}

/// The sizes of write an open file takes with `RWF_ATOMIC` (statx's
/// `stx_atomic_write_unit_min`/`_max`); `Ok(None)` when it takes none.
pub fn atomic_write_units(fd: BorrowedFd<'_>) -> io::Result<Option<(u32, u32)>> {
    let stx = statx(fd, libc::STATX_WRITE_ATOMIC)?;
    if stx.stx_mask & libc::STATX_WRITE_ATOMIC == 0 || stx.stx_atomic_write_unit_max == 0 {
        return Ok(None);
    }
    Ok(Some((stx.stx_atomic_write_unit_min, stx.stx_atomic_write_unit_max)))
}

/// The block device a filesystem lives on, as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDevice {
    /// Kernel name, e.g. `vda` or `loop3` (for a partition, the partition's name).
    pub name: String,
    pub major: u32,
    pub minor: u32,
    /// `queue/logical_block_size` of the whole disk.
    pub logical_block_size: u32,
    /// The active I/O scheduler (the bracketed entry of `queue/scheduler`), if any.
    pub scheduler: Option<String>,
    /// Name of the whole disk (same as `name` unless it is a partition); its
    /// line in `/proc/diskstats` carries the device-level counters.
    pub disk: String,
    /// `queue/read_ahead_kb` in bytes: how far the kernel may read ahead.
    pub read_ahead: u64,
}

/// The block device behind `st_dev`, or `None` for filesystems without one
/// (tmpfs, overlayfs, NFS: their device numbers have no sysfs entry).
pub fn block_device_of(st_dev: u64) -> Option<BlockDevice> {
    let major = libc::major(st_dev);
    let minor = libc::minor(st_dev);
    let link = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let real = std::fs::canonicalize(&link).ok()?;
    let name = real.file_name()?.to_string_lossy().into_owned();
    // A partition's directory has no queue/; its parent (the disk) has.
    let queue_dir = if real.join("queue").is_dir() { real.join("queue") } else { real.parent()?.join("queue") };
    let disk_dir = queue_dir.parent()?;
    let disk = disk_dir.file_name()?.to_string_lossy().into_owned();
    let read = |f: &str| std::fs::read_to_string(queue_dir.join(f)).ok();
    let logical_block_size = read("logical_block_size")?.trim().parse().ok()?;
    let scheduler = read("scheduler").and_then(|s| {
        let start = s.find('[')?;
        let end = s[start..].find(']')? + start;
        Some(s[start + 1..end].to_string())
    });
    let read_ahead = read("read_ahead_kb").and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(128) << 10;
    Some(BlockDevice { name, major, minor, logical_block_size, scheduler, disk, read_ahead })
}

/// A block device's I/O counters, `/sys/block/<disk>/stat`
/// (Documentation/block/stat.rst); ticks are milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub read_ios: u64,
    pub read_merges: u64,
    pub read_sectors: u64,
    pub read_ticks: u64,
    pub write_ios: u64,
    pub write_merges: u64,
    pub write_sectors: u64,
    pub write_ticks: u64,
    pub in_flight: u64,
    /// Milliseconds the device had I/O in flight: utilisation's numerator.
    pub io_ticks: u64,
    /// Milliseconds of I/O in flight summed over requests.
    pub time_in_queue: u64,
}

/// The counters of `disk` (a name under /sys/block, e.g. `vda`).
pub fn disk_stat(disk: &str) -> io::Result<DiskStat> {
    let text = std::fs::read_to_string(format!("/sys/block/{disk}/stat"))?;
    let f: Vec<u64> = text.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    if f.len() < 11 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("/sys/block/{disk}/stat: {} fields", f.len())));
    }
    Ok(DiskStat {
        read_ios: f[0],
        read_merges: f[1],
        read_sectors: f[2],
        read_ticks: f[3],
        write_ios: f[4],
        write_merges: f[5],
        write_sectors: f[6],
        write_ticks: f[7],
        in_flight: f[8],
        io_ticks: f[9],
        time_in_queue: f[10],
    })
}

/// The sum of /proc/meminfo's `keys` (`"Dirty"`, `"MemAvailable"`), in
/// bytes, from one read of the file.
pub fn meminfo_bytes(keys: &[&str]) -> io::Result<u64> {
    meminfo_sum(&std::fs::read_to_string("/proc/meminfo")?, keys)
}

/// `meminfo_bytes` through an open /proc/meminfo (one `pread` at offset
/// 0, which the kernel answers with the figures of now): for a caller that
/// asks often and must not open a descriptor each time.
pub fn meminfo_bytes_at(meminfo: BorrowedFd<'_>, keys: &[&str]) -> io::Result<u64> {
    // The whole file is about 1.5 KiB.
    let mut buf = [0u8; 8192];
    let n = crate::rw::pread(meminfo, &mut buf, 0)?;
    meminfo_sum(&String::from_utf8_lossy(&buf[..n]), keys)
}

fn meminfo_sum(text: &str, keys: &[&str]) -> io::Result<u64> {
    let kib = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("/proc/meminfo has no {key}")))
    };
    keys.iter().try_fold(0u64, |sum, key| Ok(sum + kib(key)? * 1024))
}

/// The running kernel's release string (`uname -r`).
pub fn kernel_release() -> String {
    // SAFETY: utsname is plain data filled by uname.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid out-pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    // SAFETY: uname NUL-terminates release.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy().into_owned()
}

/// `posix_fadvise(2)` advice values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    Normal,
    Sequential,
    Random,
    DontNeed,
}

/// `posix_fadvise(fd, off, len, advice)`; `len == 0` means to end of file.
pub fn fadvise(fd: BorrowedFd<'_>, off: u64, len: u64, advice: Advice) -> io::Result<()> {
    let adv = match advice {
        Advice::Normal => libc::POSIX_FADV_NORMAL,
        Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Advice::Random => libc::POSIX_FADV_RANDOM,
        Advice::DontNeed => libc::POSIX_FADV_DONTNEED,
    };
    // SAFETY: no pointers involved. posix_fadvise returns the error number directly.
    let err = unsafe { libc::posix_fadvise(fd.as_raw_fd(), off as i64, len as i64, adv) };
    if err != 0 {
        Err(io::Error::from_raw_os_error(err))
    } else {
        Ok(())
    }
}

/// `fallocate(2)` with `mode` (0 allocates and extends the size).
pub fn fallocate(fd: BorrowedFd<'_>, mode: i32, off: u64, len: u64) -> io::Result<()> {
    // SAFETY: no pointers involved.
    if unsafe { libc::fallocate(fd.as_raw_fd(), mode, off as i64, len as i64) } != 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One line of `/proc/self/mountinfo` (proc(5)): which filesystem is
/// mounted where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The filesystem's device number, the `st_dev` of its files.
    pub dev: u64,
    pub point: PathBuf,
    /// As mountinfo names it (`ext4`, `overlay`, `tmpfs`).
    pub fs_type: String,
    /// The filesystem's own options, comma-separated, each value escaped
    /// as mountinfo escapes (see [`unescape_mount_field`]).
    pub super_options: String,
}

/// The mounts this process sees, from `/proc/self/mountinfo`.
pub fn mounts() -> io::Result<Vec<Mount>> {
    Ok(parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo")?))
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            // Optional fields end at " - "; the type, source and the
            // filesystem's options follow it.
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let (major, minor) = fields.get(2)?.split_once(':')?;
            Some(Mount {
                dev: libc::makedev(major.parse().ok()?, minor.parse().ok()?),
                point: unescape_mount_field(fields.get(4)?),
                fs_type: fields.get(sep + 1)?.to_string(),
                super_options: fields.get(sep + 3).map_or_else(String::new, |o| o.to_string()),
            })
        })
        .collect()
}

/// mountinfo writes space, tab, newline, backslash (and, in options, comma
/// and `=`) as a backslash and three octal digits.
pub fn unescape_mount_field(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

/// Where an overlay filesystem's files live: its mount point and its
/// layers' directories, upper (if writable) first, then the lower ones from
/// the top. A file's pages are those of its layer file (the upper one once
/// it was opened for writing), which a `syncfs` of the overlay syncs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayLayers {
    pub point: PathBuf,
    pub upper: Option<PathBuf>,
    pub lower: Vec<PathBuf>,
}

/// The layers of the overlay filesystem on device `dev`; `None` where
/// `dev` is no overlay this process can see in its mount table.
pub fn overlay_layers(dev: u64) -> Option<OverlayLayers> {
    let overlay = mounts().ok()?.into_iter().find(|m| m.dev == dev && m.fs_type == "overlay")?;
    Some(parse_overlay_options(overlay.point, &overlay.super_options))
}

/// `lowerdir=` lists layers separated by `:` (`::` before data-only ones);
/// layers added one at a time show as `lowerdir+=` and `datadir+=` each.
fn parse_overlay_options(point: PathBuf, options: &str) -> OverlayLayers {
    let mut layers = OverlayLayers { point, upper: None, lower: Vec::new() };
    for o in options.split(',') {
        if let Some(u) = o.strip_prefix("upperdir=") {
            layers.upper = Some(unescape_mount_field(u));
        } else if let Some(l) = o.strip_prefix("lowerdir=") {
            layers.lower.extend(l.split(':').filter(|d| !d.is_empty()).map(unescape_mount_field));
        } else if let Some(l) = o.strip_prefix("lowerdir+=").or_else(|| o.strip_prefix("datadir+=")) {
            layers.lower.push(unescape_mount_field(l));
        }
    }
    layers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_and_their_escapes() {
        let text = "36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                    46 27 0:39 / /m rw,relatime - overlay ov rw,lowerdir=/l,upperdir=/u\\054x,workdir=/w\n\
                    garbage\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(
            (m[0].dev, m[0].point.as_path(), m[0].fs_type.as_str()),
            (libc::makedev(98, 0), Path::new("/mnt/a b"), "ext3")
        );
        assert_eq!(m[0].super_options, "rw,errors=continue");
        assert_eq!(m[1].dev, libc::makedev(0, 39));
        let upper = m[1].super_options.split(',').find_map(|o| o.strip_prefix("upperdir=")).map(unescape_mount_field);
        assert_eq!(upper, Some(PathBuf::from("/u,x")));
        assert_eq!(unescape_mount_field("/plain"), PathBuf::from("/plain"));
    }

    #[test]
    fn the_mount_table_holds_the_root() {
        let root = std::fs::metadata("/").unwrap();
        let mounts = mounts().unwrap();
        assert!(mounts
            .iter()
            .any(|m| m.point == Path::new("/") && m.dev == std::os::unix::fs::MetadataExt::dev(&root)));
        let layers = overlay_layers(std::os::unix::fs::MetadataExt::dev(&root));
        assert_eq!(layers.is_some(), fs_type_name(Path::new("/")).unwrap() == "overlayfs", "{layers:?}");
    }

    #[test]
    fn an_overlays_layers_from_its_options() {
        let l = parse_overlay_options(
            PathBuf::from("/m"),
            r"rw,lowerdir=/l1:/l\0542::/data,upperdir=/u,workdir=/w,lowerdir+=/l3,datadir+=/d2",
        );
        assert_eq!(l.point, Path::new("/m"));
        assert_eq!(l.upper.as_deref(), Some(Path::new("/u")));
        let lower: Vec<&Path> = l.lower.iter().map(PathBuf::as_path).collect();
        assert_eq!(lower, ["/l1", "/l,2", "/data", "/l3", "/d2"].map(Path::new));
        let ro = parse_overlay_options(PathBuf::from("/m"), "ro,lowerdir=/a:/b");
        assert_eq!((ro.upper, ro.lower.len()), (None, 2));
    }

    #[test]
    fn meminfo_keys_are_summed_and_a_missing_one_is_an_error() {
        let total = meminfo_bytes(&["MemTotal"]).unwrap();
        assert!(total > 0 && total.is_multiple_of(1024));
        let both = meminfo_bytes(&["MemTotal", "MemTotal"]).unwrap();
        assert_eq!(both, 2 * total);
        // "Mem" is a prefix of real keys, not a key.
        assert_eq!(meminfo_bytes(&["Mem"]).unwrap_err().kind(), io::ErrorKind::InvalidData);
        // Read again through one open file: the same figure each time.
        let open = std::fs::File::open("/proc/meminfo").unwrap();
        for _ in 0..2 {
            assert_eq!(meminfo_bytes_at(open.as_fd(), &["MemTotal"]).unwrap(), total);
        }
    }
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn known_and_unknown_magics() {
        assert_eq!(magic_name(0xEF53), "ext4");
        assert_eq!(magic_name(0x1234), "unknown (statfs magic 0x1234)");
    }

    #[test]
    fn proc_is_not_a_block_device() {
        let dev = std::fs::metadata("/proc/self").unwrap().dev();
        assert_eq!(block_device_of(dev), None);
    }

    #[test]
    fn disk_stat_reads_the_counters_proc_diskstats_shows() {
        let dev = std::fs::metadata(env!("CARGO_MANIFEST_DIR")).unwrap().dev();
        let Some(bd) = block_device_of(dev) else { return }; // a checkout on tmpfs has no disk
        let first = disk_stat(&bd.disk).unwrap();
        let line = std::fs::read_to_string("/proc/diskstats").unwrap();
        let f: Vec<u64> =
            line.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).find(|w| w[2] == bd.disk).unwrap()[3..14]
                .iter()
                .map(|x| x.parse().unwrap())
                .collect();
        // Read later, so every monotonic counter is at least as high.
        for (name, sysfs, proc) in [
            ("read_ios", first.read_ios, f[0]),
            ("read_sectors", first.read_sectors, f[2]),
            ("write_ios", first.write_ios, f[4]),
            ("write_sectors", first.write_sectors, f[6]),
            ("io_ticks", first.io_ticks, f[9]),
            ("time_in_queue", first.time_in_queue, f[10]),
        ] {
            assert!(sysfs <= proc && proc - sysfs < 1 << 20, "{name}: sysfs {sysfs}, proc {proc}");
        }
        assert!(first.read_ios > 0, "the disk this checkout is on has been read");
        assert_eq!(disk_stat("no-such-disk").unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn kernel_release_matches_proc() {
        let proc = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(kernel_release(), proc.trim());
    }

    #[test]
    fn dio_alignment_of_a_regular_file_is_a_power_of_two() {
        let dir = std::env::temp_dir();
        let p = dir.join(format!("dc-sys-dio-{}", std::process::id()));
        let f = std::fs::File::create(&p).unwrap();
        if let Some(a) = dio_alignment(f.as_fd()).unwrap() {
            assert!(a.offset.is_power_of_two() && a.memory.is_power_of_two(), "{a:?}");
        }
        std::fs::remove_file(&p).unwrap();
    }
}
