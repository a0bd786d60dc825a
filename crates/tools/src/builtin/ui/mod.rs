//! Tools that shape the conversation itself: `ui_card` (cards) and `find_tools`.

pub mod find_tools;
pub mod ui_card;
