//! maestro's integration tests, built as one test binary: the real `maestro` executable
//! on real files, databases, processes and signals (outside programs are stubs on a
//! scratch PATH). One binary links the library once instead of once per file.

mod common;

mod alive_actions;
mod bad_input;
mod claude;
mod clock_gaps;
mod conductor_watch;
mod dashboard;
mod dashboard_overlays;
mod dashboard_text;
mod demo;
mod docs;
mod faults;
mod headless;
mod history;
mod hooks;
mod house;
mod house_adding;
mod injection;
mod journal;
mod journal_faults;
mod journal_full_disk;
mod journal_matrix;
mod kitty;
mod layout_sizes;
mod limits;
mod loops;
mod many;
mod metrics;
mod musician;
mod overlay_sizes;
mod paths;
mod pipelines;
mod planted;
mod relaunch_once;
mod remote;
mod replay;
mod sentinel_files;
mod sessions;
mod souffleur;
mod souffleur_recovery;
mod task_commands;
mod tmux;
mod told;
mod trust;
mod usage;
mod watch_never_quiet;
