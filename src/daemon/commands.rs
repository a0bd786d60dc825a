//! Chat commands handled by the daemon itself, before the model: `/start`, `/help`, `/new`,
//! `/stop`, `/approve [id]`, `/deny [id]`, `/claim <code>`, `/usage`, `/memory`, `/agent`. A command may carry `@botname`
//! (already removed by the adapter for the bot's own name) and arguments.

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
}

impl Command {
    /// Commands that must not wait behind a running turn (they act on it).
    pub fn bypasses_queue(&self) -> bool {
        matches!(
            self,
            Command::Stop | Command::Approve(_) | Command::Deny(_) | Command::Claim(_)
        )
    }
}

/// Parse `text` as a command.
pub fn parse(text: &str) -> Option<Command> {
    let mut words = text.split_whitespace();
    let first = words.next()?;
    let name = first.strip_prefix('/')?;
    let name = name.split('@').next().unwrap_or(name);
    let arg = words.next().map(str::to_string);
    match name.to_ascii_lowercase().as_str() {
        "start" | "help" => Some(Command::Help),
        "new" | "reset" => Some(Command::New),
        "stop" | "cancel" => Some(Command::Stop),
        "approve" | "yes" => Some(Command::Approve(arg)),
        "deny" | "no" => Some(Command::Deny(arg)),
        "claim" => Some(Command::Claim(arg.unwrap_or_default())),
        "usage" => Some(Command::Usage),
        "memory" => Some(Command::Memory),
        "agent" => Some(Command::Agent),
        _ => None,
    }
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
    }
}
