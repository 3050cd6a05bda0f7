//! The terminal while the dashboard owns it: raw mode, the alternate screen and mouse
//! capture on entry, restored on every way out; and the thread that reads its events.

use crossterm::event::{self, Event};
use crossterm::execute;
use ratatui::DefaultTerminal;
use tokio::sync::mpsc;

/// Restores the terminal on every way out: drop, error, panic (hook) and signals.
pub struct TerminalGuard {
    pub terminal: DefaultTerminal,
}

impl TerminalGuard {
    pub fn enter(project: &str) -> Result<Self, crate::tui::error::TuiError> {
        let terminal = ratatui::try_init().map_err(crate::tui::error::TuiError::Open)?;
        // ratatui's hook restores raw mode and the screen; ours adds mouse and cursor.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            leave_extras();
            previous(info);
        }));
        let mut out = std::io::stdout();
        execute!(
            out,
            event::EnableMouseCapture,
            crossterm::terminal::SetTitle(format!("maestro: {project}"))
        )
        .map_err(crate::tui::error::TuiError::SetUp)?;
        Ok(Self { terminal })
    }

    /// Ctrl-Z: give the terminal back, stop, and take it again on `fg`.
    pub fn suspend(&mut self) {
        leave_extras();
        ratatui::restore();
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTSTP);
        // Execution resumes here after SIGCONT.
        let _ = crossterm::terminal::enable_raw_mode();
        let _ = execute!(
            std::io::stdout(),
            crossterm::terminal::EnterAlternateScreen,
            event::EnableMouseCapture
        );
        let _ = self.terminal.clear();
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        leave_extras();
        ratatui::restore();
    }
}

fn leave_extras() {
    let _ = execute!(
        std::io::stdout(),
        event::DisableMouseCapture,
        crossterm::cursor::Show
    );
}

/// Reads terminal events on a thread of its own (crossterm's reads block).
pub fn spawn_input(tx: mpsc::Sender<Event>) {
    let _ = std::thread::Builder::new()
        .name("maestro-input".into())
        .spawn(move || {
            while let Ok(ev) = event::read() {
                if tx.blocking_send(ev).is_err() {
                    break;
                }
            }
        });
}
