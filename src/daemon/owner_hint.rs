//! At start, for each chat channel that nobody owns yet (no `owners:` entry for it, none claimed
//! or added): how to claim the bot. Until someone does, nobody there can approve a tool call.

use crate::config::Loaded;
use crate::consent::owners::Owners;
use ethan_channels::ChannelKind;

/// The sentence for a channel nobody owns.
pub fn claim_hint(channel: ChannelKind, loaded: &Loaded) -> String {
    let id = match channel {
        ChannelKind::Lark => "lark:<your open_id>",
        _ => "telegram:<your user id>",
    };
    format!(
        "nobody owns the bot on {} yet, so nobody there can approve a tool call: run `ethan owner \
         claim` on this machine and send `/claim <code>` to the bot in a direct message, or add \
         owners: [\"{id}\"] to {}",
        channel.as_str(),
        loaded.path.display()
    )
}

/// Warn, for each of `channels` that nobody owns, how to claim it.
pub async fn warn_without_owner(owners: &Owners, loaded: &Loaded, channels: &[ChannelKind]) {
    for &c in channels {
        if !owners.has_owner(c).await {
            tracing::warn!("{}", claim_hint(c, loaded));
        }
    }
}
