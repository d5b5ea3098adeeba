//! fio's steady-state detection: `steadystate=iops:10%` (alias `ss`),
//! `steadystate_duration`, `steadystate_ramp_time` and
//! `steadystate_check_interval` end a job once its rate has settled.

use crate::units::{parse_size, parse_time, KbBase};
use std::time::Duration;

/// What is watched: I/Os per second, bytes per second or mean latency (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteadyMeasure {
    Iops,
    Bw,
    Lat,
}

impl SteadyMeasure {
    /// fio's word for it.
    pub fn name(self) -> &'static str {
        match self {
            SteadyMeasure::Iops => "iops",
            SteadyMeasure::Bw => "bw",
            SteadyMeasure::Lat => "lat",
        }
    }
}

/// A job's steady-state criterion.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    pub measure: SteadyMeasure,
    /// `_slope`: the least-squares slope over the window is compared;
    /// otherwise the largest deviation from the window's mean.
    pub slope: bool,
    /// The limit: in percent of the window's mean with `percent`, else in
    /// the measure's units (I/Os/s, bytes/s, ns).
    pub limit: f64,
    pub percent: bool,
    /// The window (`steadystate_duration`), the time before the first
    /// sample (`steadystate_ramp_time`) and between samples.
    pub duration: Duration,
    pub ramp: Duration,
    pub interval: Duration,
}

impl SteadyState {
    /// Samples in the window.
    pub fn samples(&self) -> usize {
        (self.duration.as_millis() / self.interval.as_millis().max(1)).max(1) as usize
    }

    /// fio's name of the criterion, `iops_slope:0.100000%`.
    pub fn name(&self) -> String {
        let slope = if self.slope { "_slope" } else { "" };
        format!("{}{slope}:{:.6}{}", self.measure.name(), self.limit, if self.percent { "%" } else { "" })
    }
}

/// `iops:10%`, `bw_slope:1%`, `iops:500`, `bw:10m`, `lat:2ms`.
pub(crate) fn parse_criterion(text: &str, kb: KbBase) -> Result<(SteadyMeasure, bool, f64, bool), String> {
    let (what, limit) =
        text.split_once(':').ok_or_else(|| format!("'{text}': give CRITERION:LIMIT, e.g. iops:10% or bw_slope:1%"))?;
    let (measure, slope) = match what.trim() {
        "iops" => (SteadyMeasure::Iops, false),
        "iops_slope" => (SteadyMeasure::Iops, true),
        "bw" => (SteadyMeasure::Bw, false),
        "bw_slope" => (SteadyMeasure::Bw, true),
        "lat" => (SteadyMeasure::Lat, false),
        "lat_slope" => (SteadyMeasure::Lat, true),
        other => return Err(format!("'{other}' is not one of iops, iops_slope, bw, bw_slope, lat, lat_slope")),
    };
    let limit = limit.trim();
    if let Some(pct) = limit.strip_suffix('%') {
        let v: f64 = pct.trim().parse().map_err(|_| format!("'{limit}' is not a percentage"))?;
        return Ok((measure, slope, v, true));
    }
    let v = match measure {
        SteadyMeasure::Iops => limit.parse().map_err(|_| format!("'{limit}' is not a number of I/Os per second"))?,
        SteadyMeasure::Bw => parse_size(limit, kb)? as f64,
        SteadyMeasure::Lat => parse_time(limit, Duration::from_micros(1))?.as_nanos() as f64,
    };
    Ok((measure, slope, v, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criteria_read_as_fio_writes_them() {
        let kb = KbBase::default();
        assert_eq!(parse_criterion("iops:10%", kb), Ok((SteadyMeasure::Iops, false, 10.0, true)));
        assert_eq!(parse_criterion("bw_slope:1%", kb), Ok((SteadyMeasure::Bw, true, 1.0, true)));
        assert_eq!(parse_criterion("bw:1m", kb), Ok((SteadyMeasure::Bw, false, 1048576.0, false)));
        assert_eq!(parse_criterion("lat:2ms", kb), Ok((SteadyMeasure::Lat, false, 2e6, false)));
        assert!(parse_criterion("iops", kb).unwrap_err().contains("CRITERION:LIMIT"));
        assert!(parse_criterion("speed:1%", kb).unwrap_err().contains("not one of"));
    }
}
