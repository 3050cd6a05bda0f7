//! maestro: a terminal dashboard and deterministic supervisor for a Conductor/Musician
//! orchestration of Claude Code sessions (see docs/orchestration.md and docs/cli.md).
//!
//! Data flow:
//! - `core::sources` are actors that own a resource (the `SQLite` connection, the notify
//!   watcher on `temp/`) and send [`core::event::CoreEvent`]s into one channel;
//! - `core::hub` owns all state: it applies events, runs the Sentinel
//!   (`core::sentinel`) and the heartbeat/watchdog rules, and publishes every
//!   [`core::event::Happening`] plus the latest [`core::snapshot::Snapshot`];
//! - presenters read those: `cli::headless` prints them, `tui` draws them, `metrics`
//!   serves them to Prometheus, and the pipelines (`core::pipeline`) hear them on the
//!   bus;
//! - Claude Code's hooks reach the core through a spool (`core::hooks`); gaps in
//!   maestro's own running are noticed by `core::clock::gaps`;
//! - every write to `comms.db` goes through `core::store`, every name maestro gives a
//!   file through `core::paths`; the operator's task actions are `core::actions`;
//! - `cli` parses the command line and runs one verb family per file; its `demo`
//!   plays a scripted orchestration into a scratch project for both to show.
//!
//! `core` never imports ratatui or crossterm.

#![forbid(unsafe_code)]

pub mod cli;
pub mod core;
pub mod metrics;
pub mod remote;
pub mod settings;
pub mod tui;
