//! The adapter settings of each chat channel, built from the `channels` section.

use ethan_channels::lark::{LarkConfig, LarkMode};
use ethan_channels::telegram::TelegramConfig;

/// The Telegram adapter settings from `channels.telegram` (webhook mode when `mode: webhook`).
pub fn telegram_config(config: &crate::config::Config) -> TelegramConfig {
    let t = &config.channels.telegram;
    TelegramConfig {
        token: t.token.expose().to_string(),
        api_url: t.api_url.clone(),
        poll_timeout_secs: 25,
        webhook_url: (t.mode == crate::config::TelegramMode::Webhook)
            .then(|| t.webhook_url.clone()),
        webhook_secret: t.webhook_secret.expose().to_string(),
        streaming: t.streaming,
        // Faster than this only earns 429s.
        stream_interval: std::time::Duration::from_millis(t.stream_interval_ms.max(250)),
    }
}

/// The Lark adapter settings from `channels.lark` (base URL resolved from `domain`).
pub fn lark_config(config: &crate::config::Config) -> LarkConfig {
    let l = &config.channels.lark;
    LarkConfig {
        app_id: l.app_id.trim().to_string(),
        app_secret: l.app_secret.expose().to_string(),
        base_url: ethan_channels::lark::resolve_base_url(
            l.domain == crate::config::LarkDomain::Lark,
            &l.base_url,
        ),
        mode: match l.mode {
            crate::config::LarkMode::Websocket => LarkMode::Websocket,
            crate::config::LarkMode::Webhook => LarkMode::Webhook,
        },
        encrypt_key: l.encrypt_key.expose().to_string(),
        verification_token: l.verification_token.expose().to_string(),
        stale_after_secs: l.stale_after_secs,
        streaming: l.streaming,
        stream_interval: std::time::Duration::from_millis(l.stream_interval_ms.max(100)),
    }
}
