//! Who owns the bot: `owners:` in the config (`telegram:<user id>`, `lark:<open_id>`) plus owners
//! stored in SQLite (claimed with `/claim <code>` after `ethan owner claim`, or added with
//! `ethan owner add`). Only owners may approve or use side-effect tools on chat platforms.

use crate::config::Config;
use ethan_channels::ChannelKind;
use ethan_core::store::{StorageRef, StoreError};
use rand::RngExt;

/// How long a claim code stays valid, in seconds.
pub const CLAIM_TTL_SECS: i64 = 600;

#[derive(Clone)]
pub struct Owners {
    configured: Vec<(String, String)>,
    store: StorageRef,
}

impl Owners {
    pub fn new(config: &Config, store: StorageRef) -> Self {
        let configured = config
            .owners
            .iter()
            .filter_map(|o| o.split_once(':'))
            .map(|(c, id)| (c.trim().to_string(), id.trim().to_string()))
            .collect();
        Self { configured, store }
    }

    /// Whether `user_id` owns the bot on `channel`. The terminal user and the gateway token holder
    /// (`Web`) are owners by construction.
    pub async fn is_owner(&self, channel: ChannelKind, user_id: &str) -> bool {
        if matches!(channel, ChannelKind::Terminal | ChannelKind::Web) {
            return true;
        }
        if self
            .configured
            .iter()
            .any(|(c, id)| c == channel.as_str() && id == user_id)
        {
            return true;
        }
        match self.store.is_stored_owner(channel.as_str(), user_id).await {
            Ok(b) => b,
            Err(e) => {
                tracing::error!("owner lookup failed: {e}");
                false
            }
        }
    }

    /// Whether `channel` has any owner at all.
    pub async fn has_owner(&self, channel: ChannelKind) -> bool {
        self.configured.iter().any(|(c, _)| c == channel.as_str())
            || self
                .store
                .has_stored_owner(channel.as_str())
                .await
                .unwrap_or(false)
    }

    /// Create a one-time claim code (8 characters, no look-alikes), valid for 10 minutes.
    pub async fn new_claim_code(&self) -> Result<String, StoreError> {
        const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        let mut rng = rand::rng();
        let code: String = (0..8)
            .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
            .collect();
        self.store
            .put_claim_code(&code, chrono::Utc::now().timestamp() + CLAIM_TTL_SECS)
            .await?;
        Ok(code)
    }

    /// Handle `/claim <code>` from `user_id`: the reply text.
    pub async fn claim(&self, channel: ChannelKind, user_id: &str, code: &str) -> String {
        let code = code.trim().to_ascii_uppercase();
        match self.store.take_claim_code(&code).await {
            Ok(true) => match self.store.add_owner(channel.as_str(), user_id, "claim").await {
                Ok(_) => {
                    tracing::info!("{channel} user {user_id} claimed ownership");
                    "You are now the owner of this bot. Tools that change things will ask you for approval.".into()
                }
                Err(e) => {
                    tracing::error!("claim failed: {e}");
                    "The claim could not be saved (database error).".into()
                }
            },
            Ok(false) => "That claim code is not valid (codes work once, for 10 minutes). Run `ethan owner claim` again.".into(),
            Err(e) => {
                tracing::error!("claim failed: {e}");
                "The claim could not be checked (database error).".into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn configured_and_claimed_owners() {
        let store = crate::store::Store::open_in_memory().unwrap().shared();
        let cfg = crate::config::from_value(serde_json::json!({"owners": ["telegram:1"]})).unwrap();
        let o = Owners::new(&cfg, store);
        assert!(o.is_owner(ChannelKind::Telegram, "1").await);
        assert!(!o.is_owner(ChannelKind::Lark, "1").await);
        assert!(!o.has_owner(ChannelKind::Lark).await);
        let code = o.new_claim_code().await.unwrap();
        assert_eq!(code.len(), 8);
        assert!(o
            .claim(ChannelKind::Lark, "ou_x", "WRONG")
            .await
            .contains("not valid"));
        assert!(o
            .claim(ChannelKind::Lark, "ou_x", &code.to_lowercase())
            .await
            .contains("now the owner"));
        assert!(o.is_owner(ChannelKind::Lark, "ou_x").await);
        assert!(o.has_owner(ChannelKind::Lark).await);
        assert!(o
            .claim(ChannelKind::Lark, "ou_y", &code)
            .await
            .contains("not valid"));
    }
}
