//! Lark tools acting through the Open API: calendar, chat history and sending messages
//! ([`lark_common`] holds the client and token handling they share).

pub mod lark_calendar;
pub mod lark_common;
pub mod lark_messages;
pub mod lark_send;
