//! Stdin for the terminal, read on one thread and shared by the chat prompt and the consent
//! question so they never compete for the same bytes. On a terminal it is a line editor
//! (`rustyline`: editing, history kept in `$ETHAN_HOME/history`, Ctrl-C reported as
//! [`Line::Interrupted`] instead of a signal); otherwise plain lines (`yes | ethan chat -m …`).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio_util::sync::CancellationToken;

/// What a read gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// Ctrl-C at the prompt (line editor only).
    Interrupted,
    /// Ctrl-D, or the end of input.
    Eof,
}

struct Request {
    prompt: String,
    /// Whether the line goes into the history (chat messages, not consent answers).
    history: bool,
    reply: oneshot::Sender<Line>,
}

#[derive(Clone)]
enum Source {
    Plain(Arc<Mutex<mpsc::Receiver<String>>>),
    Editor(std::sync::mpsc::Sender<Request>),
}

/// Lines from stdin, read on a dedicated thread.
#[derive(Clone)]
pub struct TerminalInput {
    source: Source,
    /// The turn running now, which a Ctrl-C at one of its questions stops.
    turn: Arc<std::sync::Mutex<Option<CancellationToken>>>,
    /// Set while a consent question waits for its answer ([`TerminalInput::asking`]).
    asking: Arc<std::sync::atomic::AtomicBool>,
}

impl TerminalInput {
    /// Plain lines from stdin.
    pub fn spawn() -> Self {
        let (tx, rx) = mpsc::channel(16);
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                let Ok(line) = line else { break };
                if tx.blocking_send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            source: Source::Plain(Arc::new(Mutex::new(rx))),
            turn: Arc::default(),
            asking: Arc::default(),
        }
    }

    /// A line editor when stdin and stderr are a terminal (history in `history`, when given),
    /// else plain lines.
    pub fn spawn_editor(history: Option<PathBuf>) -> Self {
        use std::io::IsTerminal;
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return Self::spawn();
        }
        let mut editor = match rustyline::DefaultEditor::new() {
            Ok(e) => e,
            Err(_) => return Self::spawn(),
        };
        if let Some(h) = &history {
            let _ = editor.load_history(h);
        }
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        std::thread::spawn(move || {
            use rustyline::error::ReadlineError;
            for req in rx {
                let line = match editor.readline(&req.prompt) {
                    Ok(l) => {
                        if req.history && !l.trim().is_empty() {
                            let _ = editor.add_history_entry(l.as_str());
                            if let Some(h) = &history {
                                let _ = editor.save_history(h);
                            }
                        }
                        Line::Text(l)
                    }
                    Err(ReadlineError::Interrupted) => Line::Interrupted,
                    Err(_) => Line::Eof,
                };
                let _ = req.reply.send(line);
            }
        });
        Self {
            source: Source::Editor(tx),
            turn: Arc::default(),
            asking: Arc::default(),
        }
    }

    /// The flag set while a consent question waits for its answer here, so a status line (the
    /// chat's spinner) is not drawn over it.
    pub fn asking(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.asking.clone()
    }

    /// The turn running now (`None` between turns): a Ctrl-C at one of its questions stops it.
    pub fn set_turn(&self, turn: Option<CancellationToken>) {
        *self.turn.lock().unwrap_or_else(|e| e.into_inner()) = turn;
    }

    /// Stop the turn running now, if any.
    pub fn stop_turn(&self) {
        if let Some(t) = &*self.turn.lock().unwrap_or_else(|e| e.into_inner()) {
            t.cancel();
        }
    }

    /// Show `prompt` and read a line; `history`: keep it for the up arrow.
    pub async fn read(&self, prompt: &str, history: bool) -> Line {
        match &self.source {
            Source::Plain(rx) => {
                if !prompt.is_empty() {
                    eprint!("{prompt}");
                    let _ = std::io::stderr().flush();
                }
                match rx.lock().await.recv().await {
                    Some(l) => Line::Text(l),
                    None => Line::Eof,
                }
            }
            Source::Editor(tx) => {
                let (reply, rx) = oneshot::channel();
                let req = Request {
                    prompt: prompt.to_string(),
                    history,
                    reply,
                };
                if tx.send(req).is_err() {
                    return Line::Eof;
                }
                rx.await.unwrap_or(Line::Eof)
            }
        }
    }

    /// The next line, or `None` at EOF or Ctrl-C.
    pub async fn next_line(&self) -> Option<String> {
        match self.read("", false).await {
            Line::Text(l) => Some(l),
            Line::Interrupted | Line::Eof => None,
        }
    }
}
