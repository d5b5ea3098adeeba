//! fio's "disk_util": what the disks under the job files did while the jobs
//! ran, from the block layer's own counters (`/sys/block/<disk>/stat`), so a
//! run shows whether the device was busy (util) and how requests queued.
//! fio reports the whole disk for a file on a partition, and so does this.

use crate::prepare::FileSetup;
use dc_sys::{disk_stat, DiskStat};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

/// One disk's counters over the run, in fio's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskUtil {
    pub name: String,
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_merges: u64,
    pub write_merges: u64,
    /// Milliseconds requests spent, summed per direction.
    pub read_ticks: u64,
    pub write_ticks: u64,
    /// Milliseconds of I/O in flight summed over requests.
    pub in_queue: u64,
    /// Percent of the run the disk had I/O in flight.
    pub util: f64,
}

/// Counters of every disk under the job files, taken when the jobs start.
pub struct DiskProbe {
    start: Instant,
    disks: Vec<(String, DiskStat)>,
}

impl DiskProbe {
    /// Files on no block device (tmpfs, overlayfs) add no disk, as in fio.
    pub fn start(files: &BTreeMap<PathBuf, FileSetup>) -> DiskProbe {
        let names: BTreeSet<&str> = files.values().filter_map(|f| f.device.as_ref()).map(|d| d.disk.as_str()).collect();
        let disks = names.into_iter().filter_map(|n| Some((n.to_string(), disk_stat(n).ok()?))).collect();
        DiskProbe { start: Instant::now(), disks }
    }

    /// What each disk did since `start`.
    pub fn finish(self) -> Vec<DiskUtil> {
        let ms = self.start.elapsed().as_secs_f64() * 1e3;
        self.disks
            .into_iter()
            .filter_map(|(name, a)| {
                let b = disk_stat(&name).ok()?;
                let d = |x: fn(&DiskStat) -> u64| x(&b).saturating_sub(x(&a));
                let busy = d(|s| s.io_ticks) as f64;
                Some(DiskUtil {
                    read_ios: d(|s| s.read_ios),
                    write_ios: d(|s| s.write_ios),
                    read_merges: d(|s| s.read_merges),
                    write_merges: d(|s| s.write_merges),
                    read_ticks: d(|s| s.read_ticks),
                    write_ticks: d(|s| s.write_ticks),
                    in_queue: d(|s| s.time_in_queue),
                    util: if ms > 0.0 { (100.0 * busy / ms).min(100.0) } else { 0.0 },
                    name,
                })
            })
            .collect()
    }
}
