//! fio's `random_distribution`: which blocks random I/O favours. A per-
//! direction list (`a,b` for reads and writes) is taken only when both are
//! the same, as for the block sizes: a job draws one offset stream.

use crate::blocksizes::one_for_all;
use crate::units::{parse_size, KbBase};

/// How a random job picks its blocks.
#[derive(Debug, Clone, PartialEq)]
pub enum RandomDistribution {
    /// Every block alike (fio's `random`, the default).
    Uniform,
    /// A Zipf law over the blocks with exponent `theta` (not 1).
    Zipf { theta: f64, center: Option<f64> },
    /// fio's Pareto: `h` of the accesses go to `1 - h` of the blocks.
    Pareto { h: f64, center: Option<f64> },
    /// Normal around the middle, standard deviation `dev_pct` percent of
    /// the blocks (0: uniform, as fio).
    Normal { dev_pct: f64, center: Option<f64> },
    /// Contiguous zones from the start, each taking its share of accesses,
    /// uniform inside.
    Zoned(Vec<Zone>),
    /// Exactly these block numbers, again and again; with `stride` each
    /// round moves on by the list's length (`random_sequence_stride=1`).
    Sequence(Vec<u64>),
}

/// A zone of `random_distribution=zoned` (`Percent`) or `zoned_abs`
/// (`Bytes`), and the percentage of the accesses that land in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Zone {
    pub access_pct: u32,
    pub size: ZoneSize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneSize {
    Percent(u32),
    Bytes(u64),
}

impl RandomDistribution {
    pub fn is_uniform(&self) -> bool {
        *self == RandomDistribution::Uniform
    }
}

/// `random_distribution=NAME[:ARGS]`.
pub(crate) fn parse_distribution(text: &str, kb: KbBase) -> Result<RandomDistribution, String> {
    // A sequence's block numbers are comma-separated themselves.
    let value =
        if text.trim_start().starts_with("sequence") { text.trim() } else { one_for_all(text, "random_distribution")? };
    let (name, args) = value.split_once(':').unwrap_or((value, ""));
    let name = name.trim();
    match name {
        "random" if args.is_empty() => Ok(RandomDistribution::Uniform),
        "random" => Err("random takes no arguments".into()),
        "zipf" | "pareto" | "normal" => {
            let (param, center) = param_and_center(name, args)?;
            Ok(match name {
                "zipf" if param == 1.0 => return Err("zipf's theta must not be 1.0 (as in fio)".into()),
                "zipf" if param <= 0.0 => return Err(format!("zipf's theta must be above 0, not {param}")),
                "zipf" => RandomDistribution::Zipf { theta: param, center },
                "pareto" if !(param > 0.0 && param < 1.0) => {
                    return Err(format!("pareto's h must be between 0 and 1 (e.g. 0.9), not {param}"))
                }
                "pareto" => RandomDistribution::Pareto { h: param, center },
                _ if !(0.0..=100.0).contains(&param) => {
                    return Err(format!("normal's deviation is a percentage of the file, 0-100, not {param}"))
                }
                _ => RandomDistribution::Normal { dev_pct: param, center },
            })
        }
        "zoned" | "zoned_abs" => parse_zones(args, name == "zoned_abs", kb).map(RandomDistribution::Zoned),
        "sequence" => {
            let blocks = args
                .split([',', ':'])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<u64>().map_err(|_| format!("sequence: '{s}' is not a block number")))
                .collect::<Result<Vec<_>, _>>()?;
            if blocks.is_empty() {
                return Err("sequence needs block numbers (sequence:2,0,1)".into());
            }
            Ok(RandomDistribution::Sequence(blocks))
        }
        _ => Err(format!("'{name}' is not one of: random, zipf, pareto, normal, zoned, zoned_abs, sequence")),
    }
}

/// `THETA[:CENTER]`: the distribution's parameter and where in the file
/// (0.0-1.0) its peak goes; without a center the peak is anywhere.
fn param_and_center(name: &str, args: &str) -> Result<(f64, Option<f64>), String> {
    let mut parts = args.split(':').map(str::trim);
    let param = match parts.next() {
        Some(p) if !p.is_empty() => p.parse::<f64>().map_err(|_| format!("{name}: '{p}' is not a number"))?,
        _ => return Err(format!("{name} needs its parameter ({name}:{})", example(name))),
    };
    let center = match parts.next() {
        Some(c) => {
            let c = c.parse::<f64>().map_err(|_| format!("{name}: center '{c}' is not a number"))?;
            if !(0.0..=1.0).contains(&c) {
                return Err(format!("{name}: center {c} is not within 0.0-1.0 (a fraction of the file)"));
            }
            Some(c)
        }
        None => None,
    };
    if let Some(extra) = parts.next() {
        return Err(format!("{name}: unexpected ':{extra}'"));
    }
    Ok((param, center))
}

fn example(name: &str) -> &'static str {
    match name {
        "zipf" => "1.2",
        "pareto" => "0.9",
        _ => "10",
    }
}

/// `ACCESS/RANGE:...`; one range left empty takes what the others leave
/// (`zoned:50/5:30/15:20/`). Accesses must add up to 100, and so must the
/// percentage ranges of `zoned`.
fn parse_zones(args: &str, absolute: bool, kb: KbBase) -> Result<Vec<Zone>, String> {
    let name = if absolute { "zoned_abs" } else { "zoned" };
    let mut zones = Vec::new();
    let mut open = None;
    for entry in args.split(':').map(str::trim).filter(|e| !e.is_empty()) {
        let (access, range) =
            entry.split_once('/').ok_or_else(|| format!("{name}: '{entry}' is not ACCESS%/RANGE (e.g. 50/5)"))?;
        let access_pct =
            access.trim().parse::<u32>().map_err(|_| format!("{name}: '{access}' is not a whole percentage"))?;
        let range = range.trim();
        let size = if range.is_empty() {
            if open.replace(zones.len()).is_some() {
                return Err(format!("{name}: only one zone may leave its range empty"));
            }
            ZoneSize::Percent(0)
        } else if absolute {
            ZoneSize::Bytes(parse_size(range, kb)?)
        } else {
            ZoneSize::Percent(range.parse::<u32>().map_err(|_| format!("{name}: '{range}' is not a whole percentage"))?)
        };
        zones.push(Zone { access_pct, size });
    }
    if zones.is_empty() {
        return Err(format!("{name} needs zones (e.g. {name}:50/{}:50/)", if absolute { "1g" } else { "10" }));
    }
    let accesses: u32 = zones.iter().map(|z| z.access_pct).sum();
    if accesses != 100 {
        return Err(format!("{name}: the accesses add up to {accesses}%, not 100%"));
    }
    if absolute {
        if let Some(i) = open {
            return Err(format!("zoned_abs: zone {} has no size; give each zone its size", i + 1));
        }
    } else {
        let given: u32 = zones.iter().map(|z| if let ZoneSize::Percent(p) = z.size { p } else { 0 }).sum();
        match open {
            Some(i) if given <= 100 => zones[i].size = ZoneSize::Percent(100 - given),
            _ if given == 100 => {}
            _ => return Err(format!("zoned: the ranges add up to {given}% of the file, not 100%")),
        }
    }
    Ok(zones)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<RandomDistribution, String> {
        parse_distribution(t, KbBase::default())
    }

    #[test]
    fn named_distributions_and_their_parameters() {
        assert_eq!(parse("random").unwrap(), RandomDistribution::Uniform);
        assert_eq!(parse("zipf:0.5").unwrap(), RandomDistribution::Zipf { theta: 0.5, center: None });
        assert_eq!(parse("pareto:0.9:0.25").unwrap(), RandomDistribution::Pareto { h: 0.9, center: Some(0.25) });
        assert_eq!(parse("normal:10").unwrap(), RandomDistribution::Normal { dev_pct: 10.0, center: None });
        assert_eq!(parse("sequence:2,0,1").unwrap(), RandomDistribution::Sequence(vec![2, 0, 1]));
        assert_eq!(parse("zipf:1.2,zipf:1.2").unwrap(), RandomDistribution::Zipf { theta: 1.2, center: None });
    }

    #[test]
    fn zones_fill_the_open_range_and_must_add_up() {
        let z = |a, p| Zone { access_pct: a, size: ZoneSize::Percent(p) };
        assert_eq!(
            parse("zoned:50/5:30/15:20/").unwrap(),
            RandomDistribution::Zoned(vec![z(50, 5), z(30, 15), z(20, 80)])
        );
        assert_eq!(parse("zoned:50/5:30/15:20/80").unwrap(), parse("zoned:50/5:30/15:20/").unwrap());
        assert_eq!(
            parse("zoned_abs:60/1m:40/3m").unwrap(),
            RandomDistribution::Zoned(vec![
                Zone { access_pct: 60, size: ZoneSize::Bytes(1 << 20) },
                Zone { access_pct: 40, size: ZoneSize::Bytes(3 << 20) }
            ])
        );
        assert!(parse("zoned:50/5:30/15").unwrap_err().contains("add up to 80%"));
        assert!(parse("zoned:50/50:50/60").unwrap_err().contains("110%"));
        assert!(parse("zoned_abs:50/1m:50/").unwrap_err().contains("no size"));
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        assert!(parse("zipf:1").unwrap_err().contains("not be 1.0"));
        assert!(parse("zipf").unwrap_err().contains("zipf:1.2"));
        assert!(parse("pareto:1.5").unwrap_err().contains("between 0 and 1"));
        assert!(parse("normal:10:2").unwrap_err().contains("0.0-1.0"));
        assert!(parse("gauss:1").unwrap_err().contains("not one of"));
        assert!(parse("zipf:1.2,pareto:0.5").unwrap_err().contains("one random_distribution"));
    }
}
