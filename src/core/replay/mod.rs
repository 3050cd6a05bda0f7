//! Flight recorder and replay.
//!
//! A live maestro records what its sources told the hub ([`recorder`]) in an
//! append-only, size-bounded event log of its own; `maestro replay` reads it back
//! ([`timeline`]), or rebuilds what it can from `comms.db` and `temp/` when there is
//! none ([`reconstruct`]), and plays it through the same hub on a virtual clock
//! ([`player`]): the same anomalies at the same moments.

pub mod input;
pub mod player;
pub mod reconstruct;
pub mod recorder;
pub mod rules;
pub mod timeline;
