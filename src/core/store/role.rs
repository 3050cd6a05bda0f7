//! The Souffleur role's reads and writes on `comms.db` (the writes are the store's). Each layer (router, watcher,
//! teammate) opens its own connection, so a layer that cannot reach the database fails
//! on its own. Calls run on tokio's blocking pool: a busy database never stalls the
//! event loop.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};

use crate::core::domain::souffleur::ConductorView;
use crate::core::error::CoreError;
use crate::core::schema;
use crate::core::store::{self, Author};

#[derive(Clone)]
pub struct RoleDb {
    conn: Arc<Mutex<Connection>>,
    /// `warning` where the CHECK admits it, else `system` (read once).
    warning_type: &'static str,
}

impl RoleDb {
    pub fn open(path: &Path) -> Result<Self, CoreError> {
        let conn = schema::open(path)?;
        schema::verify(&conn, path)?;
        Ok(Self {
            warning_type: store::warning_type(&conn),
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, CoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let guard = conn.lock().map_err(|_| CoreError::Poisoned)?;
            f(&guard).map_err(|e| {
                let text = e.to_string();
                CoreError::database(e, text)
            })
        })
        .await?
    }

    /// Sets the `souffleur` row's state (and, as every writer must, its heartbeat).
    pub async fn set_souffleur_state(&self, state: &'static str) -> Result<(), CoreError> {
        self.with(move |c| store::set_state(c, "souffleur", state).map(drop))
            .await
    }

    pub async fn refresh_souffleur_heartbeat(&self) -> Result<(), CoreError> {
        self.with(|c| store::refresh_heartbeat(c, "souffleur").map(drop))
            .await
    }

    pub async fn souffleur_row_exists(&self) -> Result<bool, CoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT count(*) FROM orchestration_tasks WHERE task_id = 'souffleur'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
        })
        .await
    }

    /// Age of the `souffleur` heartbeat, measured by `SQLite`'s own clock.
    pub async fn souffleur_heartbeat_age(&self) -> Result<Option<Duration>, CoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT (julianday('now') - julianday(last_heartbeat)) * 86400 FROM orchestration_tasks WHERE task_id = 'souffleur'",
                [],
                |r| r.get::<_, Option<f64>>(0),
            )
            .optional()
            .map(|v| v.flatten().map(|s| Duration::from_secs_f64(s.max(0.0))))
        })
        .await
    }

    pub async fn task_count(&self) -> Result<u64, CoreError> {
        self.with(|c| {
            c.query_row("SELECT count(*) FROM orchestration_tasks", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .await
        .map(|n| n.max(0) as u64)
    }

    /// What the watcher reads each cycle, in one short read.
    pub async fn conductor_view(&self) -> Result<ConductorView, CoreError> {
        self.with(|c| {
            let (age, state, session) = c
                .query_row(
                    "SELECT (julianday('now') - julianday(last_heartbeat)) * 86400, state, session_id
                     FROM orchestration_tasks WHERE task_id = 'task-00'",
                    [],
                    |r| Ok((r.get::<_, Option<f64>>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?)),
                )
                .optional()?
                .unwrap_or((None, String::new(), None));
            let count: i64 = c.query_row("SELECT count(*) FROM orchestration_tasks", [], |r| r.get(0))?;
            Ok(ConductorView {
                heartbeat_age: age.map(|s| Duration::from_secs_f64(s.max(0.0))),
                state,
                session_id: session,
                task_count: count.max(0) as u64,
            })
        })
        .await
    }

    /// Inserts a message from the Souffleur; `warning` becomes `system` where the
    /// table does not admit it.
    pub async fn message(
        &self,
        task: &'static str,
        kind: &'static str,
        text: String,
    ) -> Result<(), CoreError> {
        let kind = if kind == "warning" {
            self.warning_type
        } else {
            kind
        };
        self.with(move |c| store::send_message(c, task, Author::Souffleur, kind, &text).map(drop))
            .await
    }

    pub async fn max_message_id(&self) -> Result<i64, CoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT coalesce(max(id), 0) FROM orchestration_messages",
                [],
                |r| r.get(0),
            )
        })
        .await
    }

    /// `instruction` messages for the Souffleur after `after`, oldest first.
    pub async fn instructions_after(&self, after: i64) -> Result<Vec<(i64, String)>, CoreError> {
        self.with(move |c| {
            let mut s = c.prepare(
                "SELECT id, coalesce(message, '') FROM orchestration_messages
                 WHERE task_id = 'souffleur' AND message_type = 'instruction' AND id > ?1 ORDER BY id",
            )?;
            s.query_map([after], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
        })
        .await
    }

    /// The newest recovery payload message for the Souffleur, if any.
    pub async fn latest_payload(&self) -> Result<Option<String>, CoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT message FROM orchestration_messages
                 WHERE task_id = 'souffleur' AND message_type = 'instruction'
                   AND message LIKE 'CONTEXT_RECOVERY_PAYLOAD_V1%' ORDER BY id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
        })
        .await
    }
}
