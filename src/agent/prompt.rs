//! The system prompt: `model.system_prompt` from the config, then the built-in text that tells
//! the model where it is and how to answer.

use crate::config::Loaded;
use ethan_channels::ChannelKind;

pub fn system_prompt(config: &Loaded, channel: ChannelKind, has_tools: bool) -> String {
    let mut s = String::new();
    let custom = config.config.model.system_prompt.trim();
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
    } else {
        s.push_str("\nNo tools are available in this chat.");
    }
    s
}
