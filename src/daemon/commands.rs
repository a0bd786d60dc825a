//! Chat commands handled by the daemon itself, before the model: `/start`, `/help`, `/new`,
//! `/stop`. A command may carry `@botname` (already removed by the adapter) and arguments.

/// A recognised command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Help,
    New,
    Stop,
}

/// Parse the first word of `text` as a command.
pub fn parse(text: &str) -> Option<Command> {
    let first = text.split_whitespace().next()?;
    let name = first.strip_prefix('/')?;
    let name = name.split('@').next().unwrap_or(name);
    match name.to_ascii_lowercase().as_str() {
        "start" | "help" => Some(Command::Help),
        "new" | "reset" => Some(Command::New),
        "stop" | "cancel" => Some(Command::Stop),
        _ => None,
    }
}

pub const HELP: &str = "Hi, I'm **Ethan**, an assistant backed by a language model.\n\n\
Ask me anything in plain words. I can read files and list folders on the machine I run on to answer you.\n\n\
Commands:\n\
- /new — start a fresh conversation (I forget this one)\n\
- /stop — cancel the answer I'm working on\n\
- /help — this message";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(parse("/start"), Some(Command::Help));
        assert_eq!(parse("/new@ethan_bot please"), Some(Command::New));
        assert_eq!(parse("  /STOP"), Some(Command::Stop));
        assert_eq!(parse("/unknown"), None);
        assert_eq!(parse("hello /new"), None);
        assert_eq!(parse(""), None);
    }
}
