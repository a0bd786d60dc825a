//! `ethan chat`: a terminal session. `-m TEXT` sends one message and prints the answer on stdout
//! (exit 0; exit 1 with a clear message on stderr when the model endpoint fails, or when a daily
//! token budget refused the turn). Without `-m`,
//! reads lines until EOF, Ctrl-D or `/exit` (a line editor with history on a terminal). Ctrl-C
//! during an answer, or at one of its approval questions, stops it (with `-m`: exit 1); at the
//! prompt, a first Ctrl-C says how to quit and a second one quits. Each tool call leaves one
//! line ([`super::live`]). A new session each time unless `--session NAME`.

use super::live::Live;
use crate::agent::{TurnInput, TurnOutcome};
use crate::config::Loaded;
use crate::consent::terminal::{Line, TerminalInput};
use crate::daemon::commands::{self, Command, Surface};
use crate::store::SharedStorage;
use crate::tools::builtin::memory::Visible;
use ethan_channels::ChannelKind;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub async fn run(
    loaded: Arc<Loaded>,
    message: Option<String>,
    session: Option<String>,
) -> anyhow::Result<ExitCode> {
    let model = loaded.config.model.primary();
    if model.missing_key() {
        anyhow::bail!(
            "no API key: set model.api_key in {} or {} (or point model.base_url at a local \
             endpoint)",
            loaded.path.display(),
            model.key_var()
        );
    }
    if message.as_deref().is_some_and(|m| m.trim().is_empty()) {
        anyhow::bail!("the message given with -m is empty");
    }
    let stores = crate::daemon::open_store::open(&loaded).await?;
    let store = stores.main.clone();
    let input = if message.is_some() {
        TerminalInput::spawn()
    } else {
        TerminalInput::spawn_editor(Some(loaded.home.join("history")))
    };
    use crate::daemon::wiring;
    let sandbox = wiring::services(&loaded, &stores, false);
    let consent = wiring::consent(
        &loaded,
        &store,
        Default::default(),
        Some(input.clone()),
        None,
    );
    let agent = wiring::agent(
        loaded.clone(),
        &stores,
        Some(consent.clone()),
        sandbox.into(),
    )?;
    // MCP servers: a one-shot message waits for their first start (each at most its
    // timeout_secs); a session gets their tools as they come.
    let mcp = crate::mcp::McpManager::new(&loaded, agent.executor.registry_slot());
    mcp.start();
    if message.is_some() {
        let limit = loaded
            .config
            .mcp
            .servers
            .values()
            .map(|s| s.timeout_secs)
            .max()
            .unwrap_or(0);
        mcp.wait_started(std::time::Duration::from_secs(limit))
            .await;
    }
    let name = session.unwrap_or_else(|| {
        format!(
            "{}-{}",
            chrono::Local::now().format("%Y%m%d-%H%M%S"),
            &uuid::Uuid::new_v4().simple().to_string()[..6]
        )
    });
    let chat = Chat {
        key: format!("terminal:{name}"),
        name,
        user: std::env::var("USER").unwrap_or_else(|_| "local".into()),
        store: store.shared(),
        consent,
        agent,
        input,
        loaded,
    };
    let code = match message {
        Some(text) => chat.one_message(text).await,
        None => {
            chat.read_lines().await;
            ExitCode::SUCCESS
        }
    };
    // The terminal session ends: its browser session (tabs, cookies) with it, and the writes
    // its last turn queued (the turn's end, its audit and usage rows) before the process does.
    chat.agent.executor.registry().end_session(&chat.key).await;
    if let Err(e) = store.settle().await {
        eprintln!("ethan: the last turn may not be stored: {e}");
    }
    mcp.shutdown().await;
    if let Some(dir) = &chat.agent.sandbox.settings().await.private_tmp {
        crate::sandbox::remove_private_tmp(dir);
    }
    Ok(code)
}

/// A terminal session and what its turns run with.
struct Chat {
    name: String,
    /// `terminal:<name>`.
    key: String,
    user: String,
    store: ethan_core::store::StorageRef,
    consent: Arc<crate::consent::Consent>,
    agent: Arc<crate::agent::Agent>,
    input: TerminalInput,
    loaded: Arc<Loaded>,
}

impl Chat {
    fn input_for(&self, text: String, events: crate::agent::EventSink) -> TurnInput {
        TurnInput {
            session_key: self.key.clone(),
            channel: ChannelKind::Terminal,
            chat_id: self.name.clone(),
            user_id: self.user.clone(),
            is_owner: true,
            text,
            trace_id: uuid::Uuid::new_v4().simple().to_string(),
            chat: None,
            unattended: false,
            allowed_tools: None,
            events: Some(events),
            model: None,
            job_id: None,
            images: Vec::new(),
            private_input: None,
            outside_input: None,
            child: None,
            fence: None,
        }
    }

    /// Run one turn of `text`, showing its tool calls as they run and its answer (unless
    /// `refused` answers are to be held back) and cards when it ends. Ctrl-C stops it.
    async fn turn(&self, text: String, show_refused: bool) -> crate::agent::TurnReply {
        let cancel = CancellationToken::new();
        let ctrl_c = stop_on_ctrl_c(&cancel);
        self.input.set_turn(Some(cancel.clone()));
        let (live, events) = Live::start(self.input.asking());
        let reply = self
            .agent
            .run_turn_with_cards(&self.input_for(text, events), &cancel)
            .await;
        self.input.set_turn(None);
        ctrl_c.abort();
        let answer = match &reply.outcome {
            TurnOutcome::Answer(t) | TurnOutcome::IterationCap(t)
                if show_refused || !reply.refused =>
            {
                Some(t.as_str())
            }
            _ => None,
        };
        live.finish(answer).await;
        for card in &reply.cards {
            println!("\n{}", ethan_cards::render_text(card));
        }
        reply
    }

    /// `-m TEXT`: one turn; the exit code a script sees.
    async fn one_message(&self, text: String) -> ExitCode {
        let reply = self.turn(text, false).await;
        if let (true, TurnOutcome::Answer(why)) = (reply.refused, &reply.outcome) {
            // Over a daily budget: no answer, and a script must see it.
            eprintln!("ethan: {why}");
            return ExitCode::FAILURE;
        }
        match reply.outcome {
            TurnOutcome::Answer(_) | TurnOutcome::IterationCap(_) => ExitCode::SUCCESS,
            TurnOutcome::Failed {
                user_message,
                detail,
            } => {
                eprintln!("ethan: {user_message}\n  detail: {detail}");
                ExitCode::FAILURE
            }
            TurnOutcome::Stopped => {
                eprintln!("(stopped)");
                ExitCode::FAILURE
            }
        }
    }

    /// Lines until EOF, Ctrl-D, `/exit` or a second Ctrl-C at the prompt: commands answered
    /// here, everything else a turn.
    async fn read_lines(&self) {
        eprintln!(
            "Ethan — session {}. Type a message; /new starts over, /exit or Ctrl-D quits, \
             Ctrl-C stops an answer.",
            self.name
        );
        let mut interrupted = false;
        loop {
            let text = match self.input.read("you> ", true).await {
                Line::Eof => break,
                // A first Ctrl-C at the prompt warns; a second one in a row quits.
                Line::Interrupted if interrupted => break,
                Line::Interrupted => {
                    interrupted = true;
                    eprintln!("(press Ctrl-C again or Ctrl-D to quit)");
                    continue;
                }
                Line::Text(line) => line.trim().to_string(),
            };
            interrupted = false;
            if text.is_empty() {
                continue;
            }
            match commands::parse_in(&text, Surface::Terminal) {
                Some(Command::Exit) => break,
                Some(cmd) => {
                    println!("{}", self.command(&cmd).await);
                    continue;
                }
                None => {}
            }
            match self.turn(text, true).await.outcome {
                TurnOutcome::Answer(_) | TurnOutcome::IterationCap(_) => println!(),
                TurnOutcome::Failed {
                    user_message,
                    detail,
                } => eprintln!("ethan: {user_message} ({detail})"),
                TurnOutcome::Stopped => eprintln!("(stopped)"),
            }
        }
    }

    /// The reply to a chat command typed here ([`commands`]' table).
    async fn command(&self, cmd: &Command) -> String {
        if !cmd.in_terminal() {
            return "That command works in chats; here, approvals are asked on this terminal."
                .to_string();
        }
        let tools = self.agent.executor.registry();
        let here = commands::Here {
            store: &self.store,
            consent: &self.consent,
            tools: &tools,
            agents: &self.agent.agents,
            memory: &self.loaded.config.memory,
            session: &self.key,
            place: crate::agent::agents::Place {
                channel: "terminal",
                chat_id: &self.name,
                thread: None,
                sender: &self.user,
            },
            visible: Visible::of(ChannelKind::Terminal, false, "", "", true),
        };
        commands::answer(cmd, &here).await.unwrap_or_default()
    }
}

/// Cancels `turn` on Ctrl-C (SIGINT) until the task is aborted.
fn stop_on_ctrl_c(turn: &CancellationToken) -> tokio::task::JoinHandle<()> {
    let turn = turn.clone();
    ethan_core::task::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            turn.cancel();
        }
    })
}
