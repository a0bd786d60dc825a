//! OpenAI Chat Completions message shapes (`POST {base_url}/chat/completions`), defined in the
//! core crate ([`ethan_core::message`]) because the store and the agent share them.

pub use ethan_core::message::*;
