//! fio's `cpuio` engine: a job that does no I/O and burns a share of a CPU
//! instead, beside the jobs that do (to measure I/O under CPU contention).
//! Each cycle burns the CPU (spinning, or sorting), then sleeps so that the
//! burning is `cpuload` percent of the time; the job ends at its runtime, or
//! with `exit_on_io_done` when the wave's other jobs have ended.

use super::{InstanceResult, Running};
use dc_jobfile::{CpuBurn, CpuMode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Numbers sorted per `qsort` cycle, as fio's engine sorts (256 Ki of them).
const SORT_LEN: usize = 256 << 10;

pub(super) fn burn(
    cpu: &CpuBurn,
    runtime: Option<Duration>,
    stops: [&AtomicBool; 3],
    running: &Running,
    r: &mut InstanceResult,
) {
    let start = Instant::now();
    let cpu0 = dc_sys::thread_cpu().unwrap_or_default();
    let mut data = (cpu.mode == CpuMode::Qsort).then(sort_input);
    let deadline = runtime.map(|t| start + t);
    let ended = || {
        stops.iter().any(|s| s.load(Ordering::Relaxed))
            || deadline.is_some_and(|d| Instant::now() >= d)
            || (cpu.exit_on_io_done && !running.io_running())
    };
    while !ended() {
        let burnt = match &mut data {
            None => spin(cpu.cycle),
            Some(v) => sort_four_ways(v),
        };
        // Sleep the rest of the cycle in short naps, so a stop is not late.
        let idle = burnt * (100 - cpu.load) / cpu.load;
        let wake = Instant::now() + idle;
        while !ended() && Instant::now() < wake {
            std::thread::sleep((wake - Instant::now()).min(Duration::from_millis(10)));
        }
    }
    r.runtime_ns = start.elapsed().as_nanos() as u64;
    r.cpu = dc_sys::thread_cpu().unwrap_or_default().since(&cpu0);
}

/// Busy for `cycle`; returns how long it was.
fn spin(cycle: Duration) -> Duration {
    let t0 = Instant::now();
    while t0.elapsed() < cycle {
        std::hint::spin_loop();
    }
    t0.elapsed()
}

/// The same pseudo-random numbers for every job (a multiply-with-carry
/// generator, as fio's engine seeds its own), so every cycle sorts alike.
fn sort_input() -> Vec<i32> {
    let (mut z, mut w) = (362_436_069u32, 521_288_629u32);
    (0..SORT_LEN)
        .map(|_| {
            z = 36969 * (z & 65535) + (z >> 16);
            w = 18000 * (w & 65535) + (w >> 16);
            ((z << 16).wrapping_add(w)) as i32
        })
        .collect()
}

/// One `qsort` cycle, fio's four sorts: the numbers up, down, their bytes
/// as signed bytes (which reorders the bytes themselves), and the numbers
/// down again. Returns how long it took: the cycle's length.
fn sort_four_ways(v: &mut [i32]) -> Duration {
    let t0 = Instant::now();
    v.sort_unstable();
    v.sort_unstable_by(|a, b| b.cmp(a));
    // SAFETY: i8 has no invalid values and alignment 1; the byte view covers
    // exactly v's memory and lives only for this call, with v not used meanwhile.
    let bytes = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<i8>(), std::mem::size_of_val(v)) };
    bytes.sort_unstable();
    v.sort_unstable_by(|a, b| b.cmp(a));
    t0.elapsed()
}
