//! The flight recorder's event log: what a live maestro's sources told the hub, in an
//! append-only, size-bounded file of its own.
//!
//! [`input`] is the log's line format, [`recorder`] writes it beside a running hub, and
//! [`timeline`] reads it back into sessions for `maestro replay`. It sits below the hub
//! (which records through it) and below `replay` (which plays it).

pub mod input;
pub mod recorder;
pub mod timeline;
