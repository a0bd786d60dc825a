//! What `ethan chat` shows while a turn runs: the answer printed on stdout as the model writes
//! it, and a one-line status on stderr with a spinner and the seconds waited while the model
//! thinks (`⠹ thinking (4s, Ctrl-C stops)`) or a tool runs (`⠹ running shell: ls -la (2s, …)`),
//! wiped before anything else is written (only when stderr is a terminal). Each tool call, once
//! it ends, leaves one line on stderr, dim on a terminal: `✓ file_read notes.txt · 3 ms`,
//! `✗ shell rm -r old · denied` ([`tool_line`]); one cut short by the turn's end says
//! `· stopped`. On a terminal, control characters in the
//! model's text are shown escaped, so an answer cannot drive the terminal.

use crate::consent::display::escape_invisible;
use ethan_core::event::{EventSink, TurnEvent};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
    /// `asking`: set while a consent question waits at the terminal (no status line then).
    pub fn start(asking: Arc<AtomicBool>) -> (Live, EventSink) {
        let (tx, rx) = mpsc::unbounded_channel();
        let done = CancellationToken::new();
        let task = ethan_core::task::spawn(print_events(
            rx,
            done.clone(),
            std::io::stdout().is_terminal(),
            std::io::stderr().is_terminal(),
            asking,
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

/// What the status line says while nothing else is shown.
enum Waiting {
    /// Waiting for the model's first words.
    Model,
    /// A tool runs: `… running shell: ls`.
    Tool(String),
}

/// The status line on stderr (a terminal only): drawn over and over with a spinner and the
/// seconds waited, wiped before anything else is written.
struct Status {
    enabled: bool,
    shown: bool,
    waiting: Option<(Waiting, std::time::Instant)>,
    frame: usize,
    /// Set while a consent question waits for its answer on the terminal.
    asking: Arc<AtomicBool>,
}

impl Status {
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

    fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
            self.shown = false;
        }
    }

    fn wait(&mut self, w: Option<Waiting>) {
        self.clear();
        self.waiting = w.map(|w| (w, std::time::Instant::now()));
    }

    /// Redraw (a tick); not in the first 300 ms (a quick answer shows no flicker), nor while a
    /// question waits for its answer on the terminal.
    fn draw(&mut self) {
        let asking = self.asking.load(Ordering::SeqCst);
        let Some((what, since)) = &self.waiting else {
            return;
        };
        if !self.enabled || asking || since.elapsed().as_millis() < 300 {
            return;
        }
        let secs = since.elapsed().as_secs();
        let text = match what {
            Waiting::Model => "thinking".to_string(),
            Waiting::Tool(line) => line.clone(),
        };
        self.frame = (self.frame + 1) % Self::FRAMES.len();
        eprint!(
            "\r\x1b[2K{} {} ({secs}s, Ctrl-C stops)",
            Self::FRAMES[self.frame],
            escape_invisible(&text)
        );
        let _ = std::io::stderr().flush();
        self.shown = true;
    }
}

/// The printing loop; returns the answer text streamed since the last reset.
async fn print_events(
    mut rx: mpsc::UnboundedReceiver<TurnEvent>,
    done: CancellationToken,
    stdout_tty: bool,
    stderr_tty: bool,
    asking: Arc<AtomicBool>,
) -> String {
    let mut streamed = String::new();
    let mut status = Status {
        enabled: stderr_tty,
        shown: false,
        waiting: None,
        frame: 0,
        asking,
    };
    status.wait(Some(Waiting::Model));
    // Whether stdout is in the middle of a line (a status line needs a line of its own).
    let mut mid_line = false;
    // The calls started and not ended: their names and one-line summaries, by call id, in the
    // order they started.
    let mut running: Vec<(String, String, String)> = Vec::new();
    let tool_out = |line: String| {
        let line = escape_invisible(&line);
        if stderr_tty {
            eprintln!("\x1b[2m{line}\x1b[0m");
        } else {
            eprintln!("{line}");
        }
    };
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(120));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let e = tokio::select! {
            biased;
            e = rx.recv() => match e {
                Some(e) => e,
                None => break,
            },
            // The turn ended and everything it sent has been taken (biased: the queue first).
            _ = done.cancelled() => break,
            _ = tick.tick() => {
                if mid_line && status.waiting.is_some() && status.enabled {
                    println!();
                    mid_line = false;
                }
                status.draw();
                continue;
            }
        };
        match e {
            TurnEvent::Delta(t) => {
                status.wait(None);
                let shown = if stdout_tty {
                    escape_invisible(&t)
                } else {
                    t.clone()
                };
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(shown.as_bytes());
                let _ = out.flush();
                mid_line = !t.ends_with('\n');
                streamed.push_str(&t);
            }
            TurnEvent::DeltaReset => {
                status.wait(Some(Waiting::Model));
                if !streamed.is_empty() {
                    println!();
                    mid_line = false;
                    streamed.clear();
                }
            }
            TurnEvent::ToolStart { id, name, summary } => {
                let line = if summary.is_empty() {
                    format!("running {name}")
                } else {
                    format!("running {name}: {summary}")
                };
                running.push((id, name, summary));
                status.wait(Some(Waiting::Tool(line)));
            }
            TurnEvent::ToolEnd {
                id,
                name,
                ms,
                ok,
                denied,
            } => {
                status.clear();
                if mid_line {
                    println!();
                    mid_line = false;
                }
                let summary = match running.iter().position(|(i, _, _)| *i == id) {
                    Some(at) => running.remove(at).2,
                    None => String::new(),
                };
                tool_out(tool_line(&name, &summary, ms, ok, denied));
                status.wait(Some(Waiting::Model));
            }
            _ => {}
        }
    }
    status.clear();
    // Calls the turn's end cut short (Ctrl-C, /stop) leave their line too.
    if !running.is_empty() && mid_line {
        println!();
    }
    for (_, name, summary) in running {
        tool_out(stopped_line(&name, &summary));
    }
    streamed
}

/// The line of a call the turn's end cut short: `✗ shell sleep 60 · stopped`.
pub fn stopped_line(name: &str, summary: &str) -> String {
    if summary.is_empty() {
        format!("✗ {name} · stopped")
    } else {
        format!("✗ {name} {summary} · stopped")
    }
}

/// The line a tool call leaves: `✓ file_read notes.txt · 3 ms`, `✗ shell rm x · denied`,
/// `✗ web_fetch https://… · failed after 1.2 s`.
pub fn tool_line(name: &str, summary: &str, ms: u64, ok: bool, denied: bool) -> String {
    let took = if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    };
    let what = if summary.is_empty() {
        name.to_string()
    } else {
        format!("{name} {summary}")
    };
    match (ok, denied) {
        (true, _) => format!("✓ {what} · {took}"),
        (false, true) => format!("✗ {what} · denied"),
        (false, false) => format!("✗ {what} · failed after {took}"),
    }
}

#[cfg(test)]
mod tests {
    use super::tool_line;

    #[test]
    fn a_tool_line_says_what_ran_how_it_ended_and_how_long_it_took() {
        assert_eq!(
            tool_line("file_read", "notes.txt", 3, true, false),
            "✓ file_read notes.txt · 3 ms"
        );
        assert_eq!(
            tool_line("shell", "rm x", 0, false, true),
            "✗ shell rm x · denied"
        );
        assert_eq!(
            tool_line("clock", "", 1234, false, false),
            "✗ clock · failed after 1.2 s"
        );
        assert_eq!(
            super::stopped_line("shell", "sleep 60"),
            "✗ shell sleep 60 · stopped"
        );
    }
}
