//! What `ethan chat` shows while a turn runs: the answer printed on stdout as the model writes
//! it, and a one-line status on stderr while a tool runs (`… running shell: ls -la`), cleared
//! when it ends (only when stderr is a terminal). On a terminal, control characters in the
//! model's text are shown escaped, so an answer cannot drive the terminal.

use crate::consent::display::escape_invisible;
use ethan_core::event::{EventSink, TurnEvent};
use std::io::{IsTerminal, Write};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Prints a turn's events as they come; [`Live::finish`] prints what is left of the answer.
pub struct Live {
    task: JoinHandle<String>,
    done: CancellationToken,
}

impl Live {
    /// Start printing; the sink goes into the turn's [`crate::agent::TurnInput::events`].
    pub fn start() -> (Live, EventSink) {
        let (tx, rx) = mpsc::unbounded_channel();
        let done = CancellationToken::new();
        let task = tokio::spawn(print_events(
            rx,
            done.clone(),
            std::io::stdout().is_terminal(),
            std::io::stderr().is_terminal(),
        ));
        (Live { task, done }, tx)
    }

    /// Print the events already sent (the turn has ended), then print
    /// the end of `answer`: the part not streamed yet (e.g. a note added after the model's
    /// text), or the whole answer when what was streamed is not its beginning.
    pub async fn finish(self, answer: Option<&str>) {
        self.done.cancel();
        let streamed = self.task.await.unwrap_or_default();
        let shown = |t: &str| {
            if std::io::stdout().is_terminal() {
                escape_invisible(t)
            } else {
                t.to_string()
            }
        };
        let mut out = std::io::stdout().lock();
        match answer {
            Some(a) if !streamed.is_empty() && a.starts_with(&streamed) => {
                let _ = writeln!(out, "{}", shown(&a[streamed.len()..]));
            }
            Some(a) if !streamed.is_empty() => {
                let _ = writeln!(out, "\n{}", shown(a));
            }
            Some(a) => {
                let _ = writeln!(out, "{}", shown(a));
            }
            None if !streamed.is_empty() => {
                let _ = writeln!(out);
            }
            None => {}
        }
        let _ = out.flush();
    }
}

/// The printing loop; returns the answer text streamed since the last reset.
async fn print_events(
    mut rx: mpsc::UnboundedReceiver<TurnEvent>,
    done: CancellationToken,
    stdout_tty: bool,
    stderr_tty: bool,
) -> String {
    let mut streamed = String::new();
    let mut status = false;
    let clear_status = |status: &mut bool| {
        if *status {
            eprint!("\r\x1b[2K");
            *status = false;
        }
    };
    loop {
        let e = tokio::select! {
            biased;
            e = rx.recv() => match e {
                Some(e) => e,
                None => break,
            },
            // The turn ended and everything it sent has been taken (biased: the queue first).
            _ = done.cancelled() => break,
        };
        match e {
            TurnEvent::Delta(t) => {
                clear_status(&mut status);
                let shown = if stdout_tty {
                    escape_invisible(&t)
                } else {
                    t.clone()
                };
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(shown.as_bytes());
                let _ = out.flush();
                streamed.push_str(&t);
            }
            TurnEvent::DeltaReset if !streamed.is_empty() => {
                println!();
                streamed.clear();
            }
            TurnEvent::ToolStart { name, summary, .. } if stderr_tty => {
                clear_status(&mut status);
                let line = if summary.is_empty() {
                    format!("… running {name}")
                } else {
                    format!("… running {name}: {summary}")
                };
                eprint!("{}", escape_invisible(&line));
                status = true;
            }
            TurnEvent::ToolEnd { .. } => clear_status(&mut status),
            _ => {}
        }
    }
    clear_status(&mut status);
    streamed
}
