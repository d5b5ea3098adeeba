//! Small filesystems on loop devices, for error injection in tests. Needs
//! root and e2fsprogs (.ci/run installs them).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn sh(cmd: &str) -> Output {
    Command::new("sh").arg("-c").arg(cmd).output().unwrap()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A mounted ext4 image; unmounted (and its backing tmpfs too) on drop.
pub struct LoopFs {
    pub mnt: PathBuf,
    backing_mnt: Option<PathBuf>,
    image: PathBuf,
}

impl LoopFs {
    /// A `mib` MiB ext4 image in a file in `dir`, mounted at `dir/mnt`.
    pub fn ext4(dir: &Path, mib: u32) -> LoopFs {
        assert!(is_root(), "this test needs root (loop devices); run it as CI does");
        let image = dir.join("fs.img");
        let mnt = dir.join("mnt");
        mkfs_and_mount(&image, mib, &mnt);
        LoopFs { mnt, backing_mnt: None, image }
    }

    /// A `mib` MiB XFS image in a file in `dir`, mounted at `dir/mnt`: XFS
    /// takes atomic writes (RWF_ATOMIC) on any device, in software, from
    /// Linux 6.16 (statx gives 4 KiB to 1 MiB here).
    pub fn xfs(dir: &Path, mib: u32) -> LoopFs {
        LoopFs::in_dir(dir, mib, "mkfs.xfs -q -f -K", "XFS (needs xfsprogs)")
    }

    /// A `mib` MiB btrfs image in a file in `dir`, mounted at `dir/mnt`:
    /// a filesystem where 6.18 refuses `RWF_DONTCACHE` (no FOP_DONTCACHE).
    pub fn btrfs(dir: &Path, mib: u32) -> LoopFs {
        LoopFs::in_dir(dir, mib, "mkfs.btrfs -q -f", "btrfs (needs btrfs-progs)")
    }

    /// A `mib` MiB image in a file in `dir` made by `mkfs`, mounted at
    /// `dir/mnt`; `what` names the filesystem in a failure.
    fn in_dir(dir: &Path, mib: u32, mkfs: &str, what: &str) -> LoopFs {
        assert!(is_root(), "this test needs root (loop devices); run it as CI does");
        let image = dir.join("fs.img");
        let mnt = dir.join("mnt");
        mkfs_and_mount_as(&image, mib, &mnt, mkfs, "loop", what);
        LoopFs { mnt, backing_mnt: None, image }
    }

    /// A `mib` MiB ext4 image without a journal whose backing file lives
    /// on a tmpfs of only `tmpfs_mib`: once the tmpfs fills, the loop
    /// device fails writes and writeback sees the error. Without a journal
    /// the error is always a file's: with one, a journal commit (a
    /// `syncfs`'s, say) that happened to be the first write past the limit
    /// aborted the journal, every file's data already written, and the
    /// filesystem turned read-only with no file's writeback failed.
    pub fn ext4_on_small_tmpfs(dir: &Path, mib: u32, tmpfs_mib: u32) -> LoopFs {
        let backing = backing_tmpfs(dir, tmpfs_mib);
        let image = backing.join("fs.img");
        let mnt = dir.join("mnt");
        mkfs_and_mount_as(&image, mib, &mnt, EXT4_WITHOUT_JOURNAL, "loop,errors=continue", "ext4 (needs e2fsprogs)");
        LoopFs { mnt, backing_mnt: Some(backing), image }
    }

    /// A `mib` MiB ext4 without a journal on a tmpfs filled once mkfs is
    /// done: every write to a block of the image not written before (a new
    /// file's data) fails, and with no journal to abort the filesystem
    /// stays writable, so only data writeback fails. (mkfs zeroes its
    /// journal by punching holes, so a journal's first commit would fail
    /// too and turn the filesystem read-only.)
    pub fn ext4_on_full_tmpfs(dir: &Path, mib: u32) -> LoopFs {
        let backing = backing_tmpfs(dir, mib);
        let image = backing.join("fs.img");
        let mnt = dir.join("mnt");
        mkfs_and_mount_as(&image, mib, &mnt, EXT4_WITHOUT_JOURNAL, "loop,errors=continue", "ext4 (needs e2fsprogs)");
        let mut fill = std::fs::File::create(backing.join("fill")).unwrap();
        let block = vec![0u8; 1 << 20];
        while std::io::Write::write_all(&mut fill, &block).is_ok() {}
        LoopFs { mnt, backing_mnt: Some(backing), image }
    }
}

/// A tmpfs of `mib` MiB mounted at `dir/backing`, for an image to live on.
fn backing_tmpfs(dir: &Path, mib: u32) -> PathBuf {
    assert!(is_root(), "this test needs root (loop devices and tmpfs); run it as CI does");
    let backing = dir.join("backing");
    std::fs::create_dir_all(&backing).unwrap();
    let ok = sh(&format!("mount -t tmpfs -o size={mib}m dctest {}", backing.display()));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    backing
}

/// Every metadata block written at mkfs time (`lazy_itable_init=0`), no
/// journal: a full backing tmpfs then fails only blocks first written later.
const EXT4_WITHOUT_JOURNAL: &str = "mkfs.ext4 -q -F -m 0 -O ^has_journal -E nodiscard,lazy_itable_init=0";

fn mkfs_and_mount(image: &Path, mib: u32, mnt: &Path) {
    let mkfs = "mkfs.ext4 -q -F -m 0 -E nodiscard,lazy_itable_init=0";
    mkfs_and_mount_as(image, mib, mnt, mkfs, "loop,errors=continue", "ext4 (needs e2fsprogs)");
}

/// A `mib` MiB image made by `mkfs` and mounted at `mnt` with `options`.
fn mkfs_and_mount_as(image: &Path, mib: u32, mnt: &Path, mkfs: &str, options: &str, what: &str) {
    std::fs::create_dir_all(mnt).unwrap();
    let ok = sh(&format!(
        "truncate -s {mib}M {img} && {mkfs} {img} && mount -o {options} {img} {mnt}",
        img = image.display(),
        mnt = mnt.display()
    ));
    assert!(ok.status.success(), "mounting a loop {what} failed: {}", String::from_utf8_lossy(&ok.stderr));
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        sh(&format!("umount -l {}", self.mnt.display()));
        let _ = std::fs::remove_file(&self.image);
        if let Some(b) = &self.backing_mnt {
            sh(&format!("umount -l {}", b.display()));
        }
    }
}
