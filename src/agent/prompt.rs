//! The system prompt: `model.system_prompt` from the config, then the built-in text that tells
//! the model where it is, how to answer, and how to reach the tools it was not sent (the agent
//! adds the session's memory snapshot after it).

use crate::config::Loaded;
use ethan_channels::ChannelKind;

/// The system prompt of a turn in `channel` that may use the tools in `allowed`.
/// `custom` is the agent's own prompt (else `model.system_prompt`).
pub fn system_prompt(
    config: &Loaded,
    custom: &str,
    channel: ChannelKind,
    allowed: &std::collections::BTreeSet<String>,
) -> String {
    let has_tools = !allowed.is_empty();
    let mut s = String::new();
    let custom = custom.trim();
    if !custom.is_empty() {
        s.push_str(custom);
        s.push_str("\n\n");
    }
    let now = chrono::Local::now().format("%Y-%m-%d %H:%M %Z");
    let place = match channel {
        ChannelKind::Telegram => "a Telegram chat",
        ChannelKind::Lark => "a Lark/Feishu chat",
        ChannelKind::Terminal => "a terminal session",
        ChannelKind::Web => "a web chat",
    };
    s.push_str(&format!(
        "You are Ethan, an assistant that answers people in {place}. The current time is {now}.\n\
         Answer concisely in Markdown. Use the tools when they help; a tool result that starts with \
         \"Error\" explains what to fix, so correct the call or tell the person what went wrong.\n\
         Relative file paths are resolved in the workspace {}.",
        config.workspace().display()
    ));
    if has_tools {
        s.push_str(
            "\nOnly some tools are listed up front; call find_tools with what you need to get more.",
        );
        if allowed.contains("memory_save") {
            s.push_str(
                "\nWhen the person tells you something worth remembering in later conversations \
                 (a preference, a name, a decision), save it with memory_save.",
            );
        }
        if allowed.contains("history_search") {
            s.push_str("\nEarlier messages no longer shown here can be found with history_search.");
        }
    } else {
        s.push_str("\nNo tools are available in this chat.");
    }
    s
}
