//! Replay.
//!
//! `maestro replay` reads the flight recorder's log back
//! ([`crate::core::event_log::timeline`]), or rebuilds what it can from `comms.db` and
//! `temp/` when there is none ([`reconstruct`]), and plays it through the same hub on a
//! virtual clock ([`player`]): the same anomalies at the same moments, judged by the
//! recorded [`rules`].

pub mod player;
pub mod reconstruct;
pub mod rules;
