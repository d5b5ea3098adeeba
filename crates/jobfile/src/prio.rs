//! Per-I/O priorities, as fio's io_uring and libaio engines give them
//! (`cmdprio_percentage`, `cmdprio_class`, `cmdprio`, `cmdprio_hint`,
//! `cmdprio_bssplit`), and the CPU lists of `cpus_allowed`/`cpumask`.

use crate::units::{parse_size, KbBase};

/// An I/O priority value, `class << 13 | hint << 3 | level`; class 0
/// (none given) is best-effort, as fio makes it.
pub(crate) fn ioprio_value(class: u16, level: u16, hint: u16) -> u16 {
    let class = if class == 0 { 2 } else { class };
    (class << 13) | (hint << 3) | level
}

/// Which I/Os of a job get a priority of their own, per direction (read,
/// write): each rule covers the I/Os of one block size (or all), and hands
/// its priorities to consecutive percentages of them; the rest keep the
/// job's priority.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CmdPrio {
    pub rules: [Vec<PrioRule>; 2],
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrioRule {
    /// `None`: every I/O of the direction (`cmdprio_percentage`).
    pub bs: Option<u64>,
    /// (percentage, priority): the first `p1` percent of these I/Os get the
    /// first priority, the next `p2` the second, and so on.
    pub shares: Vec<(u32, u16)>,
}

impl CmdPrio {
    /// The priority of an I/O of `len` bytes in direction `dir` (0 read,
    /// 1 write), given `roll`, uniform in 0..100; `None`: the job's own.
    pub fn pick(&self, dir: usize, len: u64, roll: u32) -> Option<u16> {
        let rule = self.rules.get(dir)?.iter().find(|r| r.bs.is_none_or(|bs| bs == len))?;
        let mut upto = 0;
        for &(share, prio) in &rule.shares {
            upto += share;
            if roll < upto {
                return Some(prio);
            }
        }
        None
    }
}

/// What the job file gave, per direction, before it is put together.
#[derive(Debug, Clone, Default)]
pub(crate) struct CmdPrioOptions {
    pub percentage: Option<[u32; 2]>,
    pub class: [u16; 2],
    pub level: [u16; 2],
    pub hint: [u16; 2],
    pub bssplit: Option<String>,
}

/// fio's `READ,WRITE` pair of small integers: one value is both's.
pub(crate) fn pair(text: &str, max: u32) -> Result<[u32; 2], String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let one = |t: &str| -> Result<u32, String> {
        let v: u32 = t.parse().map_err(|_| format!("'{t}' is not a whole number"))?;
        if v > max {
            return Err(format!("{v} is above {max}"));
        }
        Ok(v)
    };
    match parts.as_slice() {
        [both] => Ok([one(both)?; 2]),
        [r, w] => Ok([one(r)?, one(w)?]),
        _ => Err("give one value, or READ,WRITE".into()),
    }
}

impl CmdPrioOptions {
    /// The rules, or `None` when neither a percentage nor a split was given.
    pub(crate) fn build(&self, kb: KbBase) -> Result<Option<CmdPrio>, String> {
        // As fio: a cmdprio priority without a class is realtime.
        let class = self.class.map(|c| if c == 0 { 1 } else { c });
        let implicit = |d: usize| ioprio_value(class[d], self.level[d], self.hint[d]);
        match (self.percentage, &self.bssplit) {
            (Some(_), Some(_)) => Err("cmdprio_percentage and cmdprio_bssplit cannot both be given (as in fio)".into()),
            (None, None) => Ok(None),
            (Some(p), None) => Ok(Some(CmdPrio {
                rules: std::array::from_fn(|d| vec![PrioRule { bs: None, shares: vec![(p[d], implicit(d))] }]),
            })),
            (None, Some(split)) => {
                let dirs: Vec<&str> = split.split(',').collect();
                if dirs.len() > 2 {
                    return Err("cmdprio_bssplit takes READ,WRITE lists; trims have no priority".into());
                }
                let read = split_rules(dirs[0], implicit(0), kb)?;
                let write = match dirs.get(1) {
                    Some(w) => split_rules(w, implicit(1), kb)?,
                    None => split_rules(dirs[0], implicit(1), kb)?,
                };
                Ok(Some(CmdPrio { rules: [read, write] }))
            }
        }
    }
}

/// One direction's `BS/PERC[/CLASS/LEVEL[/HINT]]:...` list: entries of one
/// block size make one rule, their shares in the order given.
fn split_rules(text: &str, implicit: u16, kb: KbBase) -> Result<Vec<PrioRule>, String> {
    let mut rules: Vec<PrioRule> = Vec::new();
    for entry in text.split(':').map(str::trim).filter(|e| !e.is_empty()) {
        let fields: Vec<&str> = entry.split('/').collect();
        let bs = parse_size(fields[0], kb)?;
        let num = |i: usize, max: u32| -> Result<u32, String> {
            let v: u32 = fields[i].trim().parse().map_err(|_| format!("'{entry}': '{}' is not a number", fields[i]))?;
            Ok(v.min(max))
        };
        let perc = if fields.len() > 1 && !fields[1].is_empty() { num(1, 100)? } else { 0 };
        let prio = match fields.len() {
            1 | 2 => implicit,
            4 => ioprio_value(num(2, 3)? as u16, num(3, 7)? as u16, 0),
            5 => ioprio_value(num(2, 3)? as u16, num(3, 7)? as u16, num(4, 7)? as u16),
            _ => return Err(format!("'{entry}' is not BS/PERCENT[/CLASS/LEVEL[/HINT]]")),
        };
        if perc == 0 {
            continue;
        }
        match rules.iter_mut().find(|r| r.bs == Some(bs)) {
            Some(r) => r.shares.push((perc, prio)),
            None => rules.push(PrioRule { bs: Some(bs), shares: vec![(perc, prio)] }),
        }
    }
    if let Some(r) = rules.iter().find(|r| r.shares.iter().map(|s| s.0).sum::<u32>() > 100) {
        return Err(format!("the shares of block size {} add up to more than 100%", r.bs.unwrap_or(0)));
    }
    Ok(rules)
}

/// `cpus_allowed`'s list, `0-3,5`, checked against the `ncpus` CPUs here
/// (fio refuses a CPU the machine does not have, and so does dcload).
pub(crate) fn cpu_list(text: &str, ncpus: u32) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let num = |t: &str| t.trim().parse::<u32>().map_err(|_| format!("'{part}' is not a CPU or a range of CPUs"));
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo > hi {
            return Err(format!("'{part}': the range runs backwards"));
        }
        cpus.extend(lo..=hi);
    }
    present(cpus, ncpus)
}

/// `cpumask`'s bit mask (`0x3`, or decimal) as a CPU list.
pub(crate) fn cpu_mask(text: &str, ncpus: u32) -> Result<Vec<u32>, String> {
    let t = text.trim();
    let mask = match t.strip_prefix("0x").or(t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse(),
    }
    .map_err(|_| format!("'{text}' is not a CPU mask (0x... or a decimal)"))?;
    present((0..64).filter(|b| mask >> b & 1 == 1).collect(), ncpus)
}

/// `cpus` sorted, without repeats, each one a CPU of the `ncpus` here.
fn present(mut cpus: Vec<u32>, ncpus: u32) -> Result<Vec<u32>, String> {
    cpus.sort_unstable();
    cpus.dedup();
    match cpus.last() {
        None => Err("no CPU given".into()),
        Some(&top) if top >= ncpus => {
            Err(format!("CPU {top} does not exist here (this machine has CPUs 0-{})", ncpus - 1))
        }
        Some(_) => Ok(cpus),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percentage_gives_every_io_of_a_direction_the_same_chance() {
        let o = CmdPrioOptions { percentage: Some([20, 0]), ..Default::default() };
        let c = o.build(KbBase::default()).unwrap().unwrap();
        let rt0 = ioprio_value(1, 0, 0);
        assert_eq!((c.pick(0, 4096, 19), c.pick(0, 4096, 20)), (Some(rt0), None));
        assert_eq!(c.pick(1, 4096, 0), None, "0% of writes");
    }

    #[test]
    fn a_split_gives_each_block_size_its_shares() {
        let o = CmdPrioOptions {
            bssplit: Some("64k/25/1/1:64k/75/3/2:1024k/0,1024k/10".into()),
            class: [0, 2],
            ..Default::default()
        };
        let c = o.build(KbBase::default()).unwrap().unwrap();
        assert_eq!(c.pick(0, 65536, 24), Some(ioprio_value(1, 1, 0)));
        assert_eq!(c.pick(0, 65536, 99), Some(ioprio_value(3, 2, 0)));
        assert_eq!(c.pick(0, 1 << 20, 0), None, "a 0% entry gives none");
        assert_eq!(c.pick(1, 1 << 20, 9), Some(ioprio_value(2, 0, 0)), "the write class given");
        assert_eq!(c.pick(1, 1 << 20, 10), None);
        let bad = CmdPrioOptions { bssplit: Some("4k/60:4k/60".into()), ..Default::default() };
        assert!(bad.build(KbBase::default()).unwrap_err().contains("more than 100%"));
        let both = CmdPrioOptions { bssplit: Some("4k/60".into()), percentage: Some([1, 1]), ..Default::default() };
        assert!(both.build(KbBase::default()).unwrap_err().contains("cannot both"));
    }

    #[test]
    fn cpu_lists_and_masks() {
        assert_eq!(cpu_list("0-2,1,5", 8), Ok(vec![0, 1, 2, 5]));
        assert!(cpu_list("0-3", 2).unwrap_err().contains("CPU 3 does not exist here (this machine has CPUs 0-1)"));
        assert_eq!(cpu_mask("0x5", 4), Ok(vec![0, 2]));
        assert!(cpu_mask("0", 4).unwrap_err().contains("no CPU"));
    }
}
