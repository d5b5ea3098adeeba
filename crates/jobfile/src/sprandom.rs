//! fio's `sprandom=1`: preconditioning that leaves an SSD as a long random
//! write workload would, in one pass over the device instead of several.
//! The options are read here; what they make the job write is dcload's
//! (`sprandom.rs` there).

use crate::spec::{Direction, JobSpec, RandomGenerator};
use crate::units::{parse_size, KbBase};

/// `sprandom=1` and its options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpRandom {
    /// `spr_op`: the device's over-provisioning, a fraction of its
    /// capacity (default 0.15): the share of flash the host cannot address.
    pub over_provisioning: f64,
    /// `spr_num_regions`: how many equal regions the written span is
    /// cut into, each left with its own share of overwritten blocks
    /// (default 100).
    pub regions: u32,
    /// `spr_cs`: the device's write cache in bytes (default 0: none); the
    /// overwrites of a region then come at the end of the next region, not its start, past the cache.
    pub cache_size: u64,
}

/// The options as given, put together once the job's are all read.
#[derive(Debug, Default)]
pub(crate) struct SpRandomOptions {
    on: bool,
    over_provisioning: Option<f64>,
    regions: Option<u32>,
    cache_size: Option<u64>,
    /// The job set `random_generator` or `norandommap` itself.
    generator_given: bool,
    map_given: bool,
}

impl SpRandomOptions {
    /// Reads option `key` (one of this module's, or `random_generator` and
    /// `norandommap`, only noted) with `text` as its value; false when the
    /// key is not one of them.
    pub(crate) fn read(&mut self, key: &str, text: Option<&str>, kb: KbBase) -> Result<bool, String> {
        let need = || text.ok_or_else(|| format!("option '{key}' needs a value ({key}=...)"));
        match key {
            "sprandom" => self.on = text.map_or(Ok(true), crate::units::parse_bool)?,
            "spr_op" => {
                let v = need()?;
                match v.trim().parse::<f64>() {
                    Ok(op) if op > 0.0 && op < 1.0 => self.over_provisioning = Some(op),
                    _ => return Err(format!("'{v}': a fraction of the device above 0 and below 1 (0.15 is 15%)")),
                }
            }
            "spr_num_regions" => {
                let v = need()?;
                match v.trim().parse::<u32>() {
                    Ok(n) if n > 0 => self.regions = Some(n),
                    _ => return Err(format!("'{v}': a number of regions, 1 or more")),
                }
            }
            "spr_cs" => self.cache_size = Some(parse_size(need()?, kb)?),
            "random_generator" => {
                self.generator_given = true;
                return Ok(false);
            }
            "norandommap" => {
                self.map_given = true;
                return Ok(false);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Sets `job.sprandom` and what it implies, as fio does: lfsr offsets
    /// without a random map, unless the job chose otherwise (refused).
    pub(crate) fn apply(self, job: &mut JobSpec, warnings: &mut Vec<String>) -> Result<(), String> {
        let given = self.over_provisioning.is_some() || self.regions.is_some() || self.cache_size.is_some();
        if !self.on {
            if given {
                warnings.push(format!(
                    "{}: job '{}': spr_op, spr_num_regions and spr_cs do nothing without sprandom=1 (as in fio)",
                    job.origin, job.name
                ));
            }
            return Ok(());
        }
        if !(job.rw.random && job.rw.direction == Direction::Write) {
            return Err("sprandom=1 preconditions with random writes: use rw=randwrite".into());
        }
        if self.generator_given && job.random_generator != RandomGenerator::Lfsr {
            return Err("sprandom=1 draws its offsets with random_generator=lfsr: drop random_generator".into());
        }
        if self.map_given && !job.norandommap {
            return Err("sprandom=1 keeps no random map (norandommap=1): drop norandommap=0".into());
        }
        if job.nrfiles > 1 {
            return Err("sprandom=1 preconditions one file: drop nrfiles".into());
        }
        if !job.block_sizes.is_fixed() {
            return Err(
                "sprandom=1 writes blocks of one size (bs, the device's mapping unit): drop bsrange/bssplit".into()
            );
        }
        job.random_generator = RandomGenerator::Lfsr;
        job.norandommap = true;
        job.sprandom = Some(SpRandom {
            over_provisioning: self.over_provisioning.unwrap_or(0.15),
            regions: self.regions.unwrap_or(100),
            cache_size: self.cache_size.unwrap_or(0),
        });
        Ok(())
    }
}
