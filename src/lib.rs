//! maestro: a terminal dashboard and deterministic supervisor for a Conductor/Musician
//! orchestration of Claude Code sessions (see PROTOCOL.md and CONTRACT.md).
//!
//! Data flow:
//! - `core::sources` are actors that own a resource (the `SQLite` connection, the notify
//!   watcher on `temp/`) and send [`core::event::CoreEvent`]s into one channel;
//! - `core::hub` owns all state: it applies events, runs the Sentinel
//!   (`core::sentinel`) and the heartbeat/watchdog rules, and publishes every
//!   [`core::event::Happening`] plus the latest [`core::snapshot::Snapshot`];
//! - presenters read those: `headless` prints them, `tui` draws them;
//! - `demo` plays a scripted orchestration into a scratch project for both to show.
//!
//! `core` never imports ratatui or crossterm.

#![forbid(unsafe_code)]

pub mod cli;
pub mod conductor_cmd;
pub mod core;
pub mod demo;
pub mod doctor;
pub mod headless;
pub mod launch;
pub mod project;
pub mod sentinel_cmd;
pub mod settings;
pub mod souffleur;
pub mod task_cmd;
pub mod tui;
