//! The reproducible randomness dcload draws on: offsets, read/write mixes,
//! block sizes and the bytes it writes.

/// SplitMix64: a fast, well-mixed generator for seeds, data and mixes.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (n > 0), by Lemire's multiply-shift.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Fill `buf` with reproducible pseudo-random bytes (fio fills its buffers
/// with random data once, so compressing or deduplicating devices see real data).
pub fn fill_random(buf: &mut [u8], seed: u64) {
    let mut rng = SplitMix::new(seed ^ 0x5EED);
    for c in buf.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        let n = c.len();
        c.copy_from_slice(&v[..n]);
    }
}

/// SplitMix as a `rand_core` generator, so `rand_distr`'s distributions
/// draw from a job's seeded stream.
impl rand_core::TryRng for SplitMix {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.next_u64() >> 32) as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for c in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            let n = c.len();
            c.copy_from_slice(&v[..n]);
        }
        Ok(())
    }
}
