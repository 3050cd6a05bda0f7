//! A private OpenSSH server on 127.0.0.1 for the remote-project tests and the
//! `remote` bench: a generated host key, an authorized key and a config file in a
//! temporary folder, reached as the host `devbox` with host-key checking on.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long sshd may take to answer its first command.
const READY_WITHIN: Duration = Duration::from_secs(20);

const SSHD: &str = "/usr/sbin/sshd";

/// A private sshd, and an ssh configuration that reaches it as the host `devbox`.
pub struct Sshd {
    dir: tempfile::TempDir,
    child: Child,
    /// The maestro the "remote host" runs.
    exe: String,
}

impl Sshd {
    /// Starts one whose host runs the maestro at `exe`, or says why not (then the
    /// caller returns).
    pub fn start(test: &str, exe: &str) -> Option<Self> {
        let missing = [SSHD, "ssh", "ssh-keygen"]
            .into_iter()
            .find(|p| Command::new(p).arg("-V").output().is_err());
        if let Some(p) = missing {
            eprintln!("skipping {test}: {p} is not installed (.ci/run installs openssh-server)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for key in ["host_key", "user_key", "stranger_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .output()
                .unwrap();
            assert!(out.status.success(), "ssh-keygen: {out:?}");
        }
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).unwrap();
        let port = free_port();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "ListenAddress 127.0.0.1\nPort {port}\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\nPidFile {dir}/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n",
                dir = d.display()
            ),
        )
        .unwrap();
        let host_key = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        std::fs::write(
            d.join("known_hosts"),
            format!("[127.0.0.1]:{port} {host_key}"),
        )
        .unwrap();
        for (name, key) in [
            ("ssh_config", "user_key"),
            ("stranger_config", "stranger_key"),
        ] {
            // Host-key checking stays on: the generated host key is the one known.
            std::fs::write(
                d.join(name),
                format!(
                    "Host *\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {dir}/{key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {dir}/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
                    dir = d.display()
                ),
            )
            .unwrap();
        }
        // sshd run as root wants its privilege-separation folder.
        if rustix::process::geteuid().is_root() {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let log = std::fs::File::create(d.join("sshd.log")).unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut sshd = Self {
            dir,
            child,
            exe: exe.to_owned(),
        };
        // Up once a command goes through it (a deadline, not a guess).
        let end = Instant::now() + READY_WITHIN;
        loop {
            let out = sshd.ssh(&["true"]);
            if out.status.success() {
                return Some(sshd);
            }
            if let Ok(Some(status)) = sshd.child.try_wait() {
                eprintln!(
                    "skipping {test}: sshd could not start ({status}): {}",
                    sshd.log()
                );
                return None;
            }
            assert!(
                Instant::now() < end,
                "sshd did not answer: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                sshd.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir().join("sshd.log")).unwrap_or_default()
    }

    /// Runs a command on `devbox` with the test's ssh configuration.
    pub fn ssh(&self, command: &[&str]) -> std::process::Output {
        Command::new("ssh")
            .arg("-F")
            .arg(self.dir().join("ssh_config"))
            .arg("devbox")
            .args(command)
            .output()
            .unwrap()
    }

    /// A maestro configuration whose `[remote]` reaches `devbox` and runs
    /// `remote_maestro` there (this build of maestro by default, with a data and config
    /// folder of the test's own, as the remote user's would be).
    pub fn config(&self, remote_maestro: Option<&str>, ssh_config: &str) -> PathBuf {
        let home = self.dir().join("remote-home");
        std::fs::create_dir_all(&home).unwrap();
        let maestro = remote_maestro.map_or_else(
            || {
                format!(
                    "env XDG_DATA_HOME={home}/data XDG_CONFIG_HOME={home}/config CLAUDE_CONFIG_DIR={home}/claude {exe}",
                    home = home.display(),
                    exe = self.exe
                )
            },
            str::to_owned,
        );
        let path = self.dir().join(format!("maestro-{ssh_config}.toml"));
        std::fs::write(
            &path,
            format!(
                "[remote]\nssh = [\"ssh\", \"-F\", {cfg:?}]\nmaestro = {maestro:?}\n",
                cfg = self.dir().join(ssh_config).display().to_string(),
            ),
        )
        .unwrap();
        path
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
