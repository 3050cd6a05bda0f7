//! Projects on other hosts, over the operator's own OpenSSH: no port, no agent.
//!
//! A remote project is written `ssh://[user@]host[:port]/absolute/path` ([`address`]).
//! maestro runs `<[remote] ssh> HOST -- <[remote] maestro> serve --project PATH` and
//! keeps that one connection for both directions ([`wire`]): the remote maestro's
//! sources tell it what they told their hub, line by line, and it answers requests
//! (an action, a question) on the same stdin. Locally a hub of its own is fed from the
//! link ([`link`]), so the dashboard, the headless output and the metrics see a remote
//! project as they see a local one; a dropped link is caught up without loss or
//! doubles ([`catch_up`]). Commands (`maestro task approve … --project ssh://…`) run
//! the same command on the host instead ([`forward`]).

pub mod address;
pub mod bounded;
pub mod catch_up;
pub mod forward;
pub mod link;
pub mod ssh;
pub mod wire;

pub use address::RemoteProject;

/// `[remote]`: how to reach other hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSettings {
    /// The ssh client's argv, before the host (`["ssh", "-F", "file"]`).
    pub ssh: Vec<String>,
    /// The maestro command on the remote host, as its shell runs it.
    pub maestro: String,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        Self {
            ssh: vec!["ssh".into()],
            maestro: "maestro".into(),
        }
    }
}
