//! fio's I/O engines that dcload does not run, and why, so a job file that
//! names one is refused for its engine (and not for an engine-specific
//! option that happens to come first), with what to do instead.

/// Why dcload does not run an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    /// It needs hardware, a service, a library or an operating system that
    /// local-file benchmarking of the page cache has no use for.
    OutOfScope,
    /// It does local I/O or work dcload could do, but does not yet.
    NotYet,
}

use Reason::*;

/// fio's engines (3.33 and later) that dcload does not run: name, what it
/// is, why not.
const OTHER_ENGINES: &[(&str, &str, Reason)] = &[
    ("splice", "I/O through splice(2) and a pipe", NotYet),
    ("io_uring_cmd", "NVMe passthrough commands through io_uring (a /dev/ng* character device)", OutOfScope),
    ("sg", "SCSI generic passthrough (a /dev/sg* device)", OutOfScope),
    ("libzbc", "zoned SCSI/ATA disks through libzbc", OutOfScope),
    ("xnvme", "NVMe devices through the xNVMe library", OutOfScope),
    ("libblkio", "block devices through libblkio (vhost, vDPA, virtio-blk)", OutOfScope),
    ("net", "network sockets (TCP/UDP)", OutOfScope),
    ("netsplice", "network sockets through splice", OutOfScope),
    ("rdma", "RDMA networks", OutOfScope),
    ("http", "HTTP, S3 and Swift object stores", OutOfScope),
    ("rbd", "Ceph RBD images", OutOfScope),
    ("rados", "Ceph RADOS objects", OutOfScope),
    ("gfapi", "GlusterFS through libgfapi", OutOfScope),
    ("gfapi_async", "GlusterFS through libgfapi", OutOfScope),
    ("libhdfs", "Hadoop HDFS", OutOfScope),
    ("dfs", "DAOS file systems", OutOfScope),
    ("libiscsi", "iSCSI targets through libiscsi", OutOfScope),
    ("nbd", "NBD servers", OutOfScope),
    ("mtd", "raw flash (MTD) devices", OutOfScope),
    ("dev-dax", "device DAX (persistent memory)", OutOfScope),
    ("libpmem", "persistent memory through libpmem", OutOfScope),
    ("pmemblk", "persistent memory through libpmemblk", OutOfScope),
    ("libcufile", "GPU direct storage (cuFile)", OutOfScope),
    ("libhipfile", "GPU direct storage (hipFile)", OutOfScope),
    ("ime_psync", "DDN's IME burst buffers", OutOfScope),
    ("ime_psyncv", "DDN's IME burst buffers", OutOfScope),
    ("ime_aio", "DDN's IME burst buffers", OutOfScope),
    ("cpp_null", "fio's null engine written in C++ (an example)", OutOfScope),
    ("solarisaio", "Solaris asynchronous I/O", OutOfScope),
    ("windowsaio", "Windows asynchronous I/O", OutOfScope),
];

/// Why `ioengine=<name>` cannot run, if it is one of fio's engines dcload
/// does not run (external engines, `external:<path>`, included).
pub(crate) fn refusal(name: &str) -> Option<String> {
    if name.starts_with("external") {
        return Some(format!(
            "ioengine={name}: an engine loaded from a shared object runs only inside fio; run this job with fio"
        ));
    }
    let (_, what, reason) = OTHER_ENGINES.iter().find(|(n, _, _)| *n == name)?;
    Some(match reason {
        OutOfScope => format!(
            "ioengine={name}: fio's engine for {what}, which dcload does not run: dcload measures the page cache \
             with local-file I/O and NFS ({}); run this job with fio",
            crate::options::ENGINE_CHOICES.join(", ")
        ),
        NotYet => format!(
            "ioengine={name}: fio's engine for {what}, which dcload does not run yet; run this job with fio, or \
             pass --ioengine= with one of {} to do the job's I/O with that instead",
            crate::options::ENGINE_CHOICES.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_other_engine_is_refused_with_a_reason_and_no_local_one_is() {
        for (name, _, _) in OTHER_ENGINES {
            let why = refusal(name).unwrap();
            assert!(why.starts_with(&format!("ioengine={name}: fio's engine for ")), "{why}");
        }
        assert!(refusal("external:/usr/lib/fio/x.so").unwrap().contains("run this job with fio"));
        for local in crate::options::ENGINE_CHOICES {
            assert_eq!(refusal(local), None, "{local}");
        }
    }
}
