//! dcload: a load generator for buffered, `RWF_DONTCACHE` and `O_DIRECT` I/O
//! that reads fio job files and writes fio-compatible results.
//!
//! Layout: [`cli`] parses fio's command-line grammar; `dc_jobfile` resolves
//! jobs; [`plan`] expands them into instances; [`prepare`] lays files out and
//! probes modes; [`worker`] runs one instance's I/O loop over an [`engine`];
//! [`stats`] and [`logs`] record; [`run`] orchestrates into [`results`];
//! [`report`] exports them.

pub mod cli;
pub mod contents;
pub mod diskutil;
pub mod engine;
pub mod error;
pub mod iolog;
pub mod limits;
pub mod logs;
pub mod offsets;
pub mod output;
pub mod pace;
pub mod plan;
pub mod prepare;
pub mod progress;
pub mod random;
pub mod report;
pub mod results;
pub mod run;
pub mod side;
pub mod sprandom;
pub mod stats;
pub mod steady;
pub mod verify;
pub mod verify_state;
pub mod worker;
