/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * dontcache.h - uncached buffered writes on any kernel (libdontcache)
 *
 * libdontcache writes through the page cache like a plain pwrite(2), counts
 * the pages each write dirtied on its device, and kicks a background
 * flusher that writes back that many pages from the oldest dirty files in
 * one batch and drops them from the cache once clean. A big streaming
 * writer so stops flooding the page cache without paying for writeback in
 * its own context. This is the design of the 2026 RWF_DONTCACHE patch
 * series, in user space.
 *
 * Rules the library keeps:
 *   - Pages that were cached when the library bound the file (dc_adopt,
 *     dc_open) are never dropped; every other page it writes or reads is
 *     dropped once clean. Reads through a handle are drop-behind.
 *   - It never claims durability: dc_fsync()/dc_fdatasync() go to the kernel.
 *   - dc_close() does not wait for writeback, as close(2) does not: the
 *     flusher finishes the file afterwards, batched with other files.
 *   - An error that background writeback meets (EIO, ENOSPC, ...) is never
 *     lost. While the file is open it is returned once, by the next
 *     dc_write*, dc_note_write, dc_fsync, dc_fdatasync or dc_close on it.
 *     Once the file is closed it is a "late error": returned once by the
 *     next dc_fsync, dc_fdatasync or dc_close of any handle on the same
 *     device, or by dc_flush(); counted in dc_stats.late_errors.
 *   - Handles are thread-safe. The library does its I/O through its own
 *     duplicate of the descriptor, so closing and reusing the number behind
 *     its back cannot make it write into another file (dc_close then fails
 *     with EBADF and closes nothing). After fork() a child that uses a
 *     handle gets a fresh engine of its own.
 *   - That duplicate stays open until the flusher is done with the file,
 *     after dc_close(): its close then releases every POSIX lock
 *     (fcntl F_SETLK, lockf) the process holds on the file, as any close
 *     of the file does, and until then a flock() or open-file-description
 *     lock of the file's open file stays held. Lock a separate lock file,
 *     not a file a handle is or was open on. (The LD_PRELOAD shim lets go
 *     of a file before the program locks it.)
 *
 * Errors: functions returning int or ssize_t return -1 and set errno;
 * functions returning a pointer return NULL and set errno.
 *
 * Link with -ldontcache (pkg-config --libs dontcache).
 */
#ifndef DONTCACHE_H
#define DONTCACHE_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Write-behind policies: the variants of the patch series, side by side. */
enum dc_policy {
	/* Count and kick; a background flusher writes back the counted
	 * pages from the oldest dirty files in batches, and drops them once
	 * written. The default. */
	DC_POLICY_FLUSHER = 0,
	/* Lazy: the writer starts writeback of the bytes it just wrote,
	 * unless the file already has writeback in flight; the flusher
	 * takes what was skipped past half the high-water mark. */
	DC_POLICY_LAZY = 1,
	/* Kernels 6.14-7.1: the writer starts writeback after every write. */
	DC_POLICY_INLINE = 2,
	/* The flusher writes back only the file that kicked it. */
	DC_POLICY_PER_FILE = 3,
	/* pwritev2(RWF_DONTCACHE); DC_POLICY_FLUSHER where the kernel or the
	 * filesystem refuses it (recorded in dc_stats.kernel_fallback). */
	DC_POLICY_KERNEL = 4,
};

/* How the flusher starts a batch's writeback. */
enum dc_submit {
	DC_SUBMIT_LOOP = 0,	/* one sync_file_range(2) per range */
	DC_SUBMIT_URING = 1,	/* IORING_OP_SYNC_FILE_RANGE, one submit */
	DC_SUBMIT_SYNCFS = 2,	/* a batch of closed files as one syncfs(2),
				 * plugged across files (merged small-file
				 * writes); only while the rest of the system
				 * has little dirty, else as LOOP */
	DC_SUBMIT_AUTO = 3,	/* the default: SYNCFS on ext4 and XFS (and
				 * an overlay whose upper layer is on one),
				 * LOOP elsewhere */
};

struct dc_opts {
	int policy;		/* enum dc_policy */
	uint64_t high_water;	/* bytes; 0 = 64 MiB. After a write, a writer
				 * whose next write of that size would take the
				 * library's dirty bytes on its device (writeback
				 * not yet started) past it waits for the
				 * flusher's next batch. Twice the lowest mark of
				 * the handles open on a device also caps the
				 * writeback the flusher keeps in flight there */
	int submit;		/* enum dc_submit; the device's first handle decides */
};

/* Per handle (or, for dc_stats(NULL, ...), per process). */
struct dc_stats {
	uint64_t bytes_written;
	uint64_t bytes_read;
	uint64_t kicks;			/* kicks that woke the flusher */
	uint64_t coalesced_kicks;	/* kicks that found it already kicked */
	uint64_t passes;		/* flusher batches that took pages */
	uint64_t bytes_written_back;
	uint64_t bytes_dropped;		/* dropped from the page cache (0 on
					 * tmpfs and ramfs, whose pages are
					 * the files) */
	uint64_t dirty_now;		/* dirtied by the library, not yet clean */
	uint64_t highwater_stalls;	/* times a writer blocked at high_water */
	uint64_t errors;		/* writeback errors seen */
	uint64_t kernel_fallback;	/* 1 if DC_POLICY_KERNEL fell back */
	uint64_t late_errors;		/* process: errors of files already
					 * closed (see dc_flush) */
};

typedef struct dc_handle dc_handle;

/*
 * Fill @opts with the defaults, overridden by the environment:
 * DONTCACHE_POLICY (flusher|lazy|inline|per-file|kernel),
 * DONTCACHE_HIGH_WATER (a size as in fio job files: 64m = 64 MiB;
 * README, "Sizes"), DONTCACHE_SUBMIT (auto|loop|uring|syncfs).
 * Returns -1 with EINVAL if a variable holds a bad value.
 */
int dc_opts_init(struct dc_opts *opts);

/*
 * Wrap @fd, a regular file open for writing and/or reading. @opts NULL
 * means dc_opts_init()'s values. The descriptor stays yours to use for
 * anything else; dc_close() closes it. Fails with EISDIR for a directory,
 * ESPIPE for a pipe or socket, EINVAL for a device, EBADF for a closed or
 * O_PATH descriptor, EAGAIN if another thread put another file at @fd
 * (close(2), dup2(2)) during the call.
 */
dc_handle *dc_adopt(int fd, const struct dc_opts *opts);

/* open(2) @path with @flags and @mode, and wrap it. */
dc_handle *dc_open(const char *path, int flags, mode_t mode, const struct dc_opts *opts);

/* As write(2) at the file position (O_APPEND included), pwrite(2), pwritev(2). */
ssize_t dc_write(dc_handle *h, const void *buf, size_t len);
ssize_t dc_pwrite(dc_handle *h, const void *buf, size_t len, off_t off);
ssize_t dc_pwritev(dc_handle *h, const struct iovec *iov, int iovcnt, off_t off);

/* As read(2) and pread(2); pages the read brought in are dropped behind it. */
ssize_t dc_read(dc_handle *h, void *buf, size_t len);
ssize_t dc_pread(dc_handle *h, void *buf, size_t len, off_t off);

/*
 * For I/O the program issues itself on dc_fd(h) (io_uring, ...): report
 * each completed buffered write or read of @len bytes at @off. A write's
 * pages join the write-behind like the library's own (the call may wait at
 * the high-water mark, as dc_write would); a read's are dropped behind it.
 * dc_note_write returns -1 with a kept writeback error, like dc_write.
 * Writes still in flight are dirty before they are reported: open the
 * handle with a high_water lowered by what may be in flight (queue depth x
 * block size) to keep the dirty pages under the mark you mean.
 */
int dc_note_write(dc_handle *h, off_t off, size_t len);
int dc_note_read(dc_handle *h, off_t off, size_t len);

/* The RWF_* flags the program's own reads and writes of @h should carry:
 * RWF_DONTCACHE under DC_POLICY_KERNEL where the kernel takes it, else 0. */
int dc_rw_flags(const dc_handle *h);

/* The RWF_* flags the program's next read of @h should carry: those of
 * dc_rw_flags, and RWF_DONTCACHE once the file is found read at random
 * (past its first 8 MiB) where the kernel takes the flag on reads: the
 * kernel then drops what each read brings in, pages cached before staying,
 * and the library no longer does. Ask before each read; the answer changes
 * at most once. Report the read with dc_note_read all the same. */
int dc_read_flags(const dc_handle *h);

/* fsync(2)/fdatasync(2); a kept writeback error is returned first. */
int dc_fsync(dc_handle *h);
int dc_fdatasync(dc_handle *h);

/*
 * Close the descriptor and free @h (gone even on -1); the flusher writes
 * back and drops what is left of the file afterwards. Returns -1 with a
 * kept writeback error of this file, else with a late error of another
 * file on the device, else with close(2)'s error.
 */
int dc_close(dc_handle *h);

/*
 * Wait until everything the library wrote in this process, open files and
 * closed ones, is written back and dropped. Returns -1 with errno set to
 * the oldest late error not yet returned, 0 otherwise.
 */
int dc_flush(void);

/* The wrapped descriptor. */
int dc_fd(const dc_handle *h);

/* Counters of @h, or of the whole process when @h is NULL. */
int dc_stats(const dc_handle *h, struct dc_stats *out);

/* "flusher", "lazy", ... or NULL for an unknown value. */
const char *dc_policy_name(int policy);

#ifdef __cplusplus
}
#endif

#endif /* DONTCACHE_H */
