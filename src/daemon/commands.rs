//! Chat commands, handled before the model, in one table for the daemon's chats and the terminal
//! (`ethan chat`): `/start`, `/help`, `/new`, `/stop`, `/approve [id]`, `/deny [id]`,
//! `/claim <code>`, `/usage`, `/memory`, `/agent`, and the terminal's `/exit`. A command may
//! carry `@botname` (already removed by the adapter for the bot's own name) and arguments.
//!
//! [`answer`] gives the replies that are the same wherever a command is typed (`/help`, `/new`,
//! `/stop` with nothing running, `/agent`, `/memory`); who may use a command in a group, and the
//! commands that act on a running turn or on approvals, are the router's.

use crate::agent::agents::{self, Agents};
use crate::config::MemoryConfig;
use crate::consent::Consent;
use crate::tools::builtin::memory::Visible;
use ethan_core::store::StorageRef;

/// A recognised command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    New,
    Stop,
    /// Approve a pending request (its id, or the only one waiting in the chat).
    Approve(Option<String>),
    Deny(Option<String>),
    /// Claim ownership with a one-time code from `ethan owner claim`.
    Claim(String),
    /// Today's token usage (owner only).
    Usage,
    /// What is remembered about the asker (a direct chat) or the group.
    Memory,
    /// Which agent answers here, and why.
    Agent,
    /// Leave the terminal session (the terminal only).
    Exit,
}

/// Where a command is typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// A chat through the daemon (Telegram, Lark, the web page).
    Chat,
    /// `ethan chat`.
    Terminal,
}

/// One command: its names (the first is the one shown), how it is built from its first
/// argument, and where it is a command at all (`chat`) and where it is answered (`terminal`:
/// elsewhere the terminal says it works in chats).
struct Entry {
    names: &'static [&'static str],
    make: fn(Option<String>) -> Command,
    chat: bool,
    terminal: bool,
}

/// Every command.
const TABLE: &[Entry] = &[
    Entry {
        names: &["help", "start"],
        make: |_| Command::Help,
        chat: true,
        terminal: true,
    },
    Entry {
        names: &["new", "reset"],
        make: |_| Command::New,
        chat: true,
        terminal: true,
    },
    Entry {
        names: &["stop", "cancel"],
        make: |_| Command::Stop,
        chat: true,
        terminal: true,
    },
    Entry {
        names: &["approve", "yes"],
        make: Command::Approve,
        chat: true,
        terminal: false,
    },
    Entry {
        names: &["deny", "no"],
        make: Command::Deny,
        chat: true,
        terminal: false,
    },
    Entry {
        names: &["claim"],
        make: |a| Command::Claim(a.unwrap_or_default()),
        chat: true,
        terminal: false,
    },
    Entry {
        names: &["usage"],
        make: |_| Command::Usage,
        chat: true,
        terminal: false,
    },
    Entry {
        names: &["memory"],
        make: |_| Command::Memory,
        chat: true,
        terminal: true,
    },
    Entry {
        names: &["agent"],
        make: |_| Command::Agent,
        chat: true,
        terminal: true,
    },
    Entry {
        names: &["exit", "quit"],
        make: |_| Command::Exit,
        chat: false,
        terminal: true,
    },
];

impl Command {
    /// Commands that must not wait behind a running turn (they act on it).
    pub fn bypasses_queue(&self) -> bool {
        matches!(
            self,
            Command::Stop | Command::Approve(_) | Command::Deny(_) | Command::Claim(_)
        )
    }

    /// Whether the terminal answers this command (the others work in chats only).
    pub fn in_terminal(&self) -> bool {
        entry_of(self).is_some_and(|e| e.terminal)
    }
}

fn entry_of(cmd: &Command) -> Option<&'static Entry> {
    TABLE
        .iter()
        .find(|e| std::mem::discriminant(&(e.make)(None)) == std::mem::discriminant(cmd))
}

/// Parse `text`, typed in a chat, as a command.
pub fn parse(text: &str) -> Option<Command> {
    parse_in(text, Surface::Chat)
}

/// Parse `text`, typed on `surface`, as a command.
pub fn parse_in(text: &str, surface: Surface) -> Option<Command> {
    let mut words = text.split_whitespace();
    let first = words.next()?;
    let name = first.strip_prefix('/')?;
    let name = name.split('@').next().unwrap_or(name).to_ascii_lowercase();
    let entry = TABLE
        .iter()
        .find(|e| e.names.contains(&name.as_str()))
        .filter(|e| surface == Surface::Terminal || e.chat)?;
    Some((entry.make)(words.next().map(str::to_string)))
}

/// Where a command is answered, for [`answer`].
pub struct Here<'a> {
    /// The store (a fresh session for `/new`, the facts for `/memory`).
    pub store: &'a StorageRef,
    /// The session grants `/new` clears.
    pub consent: &'a Consent,
    pub agents: &'a Agents,
    pub memory: &'a MemoryConfig,
    /// The session key.
    pub session: &'a str,
    /// The chat, for `/agent`.
    pub place: agents::Place<'a>,
    /// What `/memory` may list here.
    pub visible: Visible,
}

/// The reply to a command answered the same in every chat and the terminal (`/help`, `/new`,
/// `/stop` when nothing is running, `/agent`, `/memory`); `None` for the others. Who may use
/// one in a group is checked before.
pub async fn answer(cmd: &Command, here: &Here<'_>) -> Option<String> {
    Some(match cmd {
        Command::Help => HELP.to_string(),
        Command::New => match here.store.new_session(here.session).await {
            Ok(_) => {
                here.consent.grants.clear(here.session).await;
                "Started a fresh conversation.".to_string()
            }
            Err(e) => {
                tracing::error!("/new failed: {e}");
                "I couldn't start a new conversation (database error).".to_string()
            }
        },
        Command::Stop => "Nothing is running.".to_string(),
        Command::Agent => agents::answer_for(here.agents, here.place),
        Command::Memory => crate::memory::listing(here.store, &here.visible, here.memory).await,
        _ => return None,
    })
}

pub const HELP: &str = "Hi, I'm **Ethan**, an assistant backed by a language model.\n\n\
Ask me anything in plain words. I can use tools on the machine I run on; anything that changes \
something needs my owner's approval first.\n\n\
Commands:\n\
- /new — start a fresh conversation (I forget this one; in a group, owner only)\n\
- /stop — cancel the answer I'm working on (in a group: the owner or whoever asked)\n\
- /approve <id>, /deny <id> — answer an approval request (owner only)\n\
- /usage — today's token usage and budgets (owner only)\n\
- /memory — what I remember about you (in a group: about this group)\n\
- /agent — which of my agents answers here, and why\n\
- /claim <code> — become my owner with a code from `ethan owner claim` (in a DM)\n\
- /help — this message";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(parse("/start"), Some(Command::Help));
        assert_eq!(parse("/new@ethan_bot please"), Some(Command::New));
        assert_eq!(parse("  /STOP"), Some(Command::Stop));
        assert_eq!(
            parse("/approve abc123"),
            Some(Command::Approve(Some("abc123".into())))
        );
        assert_eq!(parse("/deny"), Some(Command::Deny(None)));
        assert_eq!(
            parse("/claim K7PQ2MZX"),
            Some(Command::Claim("K7PQ2MZX".into()))
        );
        assert_eq!(parse("/usage@ethan_bot"), Some(Command::Usage));
        assert_eq!(parse("/memory"), Some(Command::Memory));
        assert_eq!(parse("/agent"), Some(Command::Agent));
        assert_eq!(parse("/unknown"), None);
        assert_eq!(parse("hello /new"), None);
        assert_eq!(parse(""), None);
        assert!(parse("/stop").unwrap().bypasses_queue());
        assert!(!parse("/new").unwrap().bypasses_queue());
        // The terminal's own: not a command in a chat (the model gets it).
        assert_eq!(parse("/exit"), None);
        assert_eq!(parse_in("/quit", Surface::Terminal), Some(Command::Exit));
        assert!(parse_in("/usage", Surface::Terminal).is_some_and(|c| !c.in_terminal()));
        assert!(parse_in("/memory", Surface::Terminal).is_some_and(|c| c.in_terminal()));
    }
}
