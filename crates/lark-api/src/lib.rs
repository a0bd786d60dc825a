//! `ethan-lark-api`: the Lark/Feishu Open API client, below both the Lark channel
//! (`ethan-channels`, which re-exports these modules under `ethan_channels::lark`) and the Lark
//! tools, so that the tools reach Lark without depending on the channels.
//!
//! What this crate owns:
//! - [`api`]: the client as the app (`tenant_access_token`, send/reply, cards, bot info, the
//!   long-connection endpoint and its [`api::ClientConfig`]), per-chat pacing;
//! - [`user_api`]: calls as a Lark user (`user_access_token`, refreshed and kept in the
//!   daemon's kv store);
//! - [`codes`]: the Open API error codes and their meanings;
//! - [`content`]: message content as text (`post` rich text, `@` mentions, placeholders for
//!   what is not text).
//!
//! What it does not own: events, transports, rendering replies, or how an API error becomes a
//! channel error (all in `ethan-channels`).

pub mod api;
pub mod codes;
pub mod content;
pub mod user_api;
