//! Tools about agents: `delegate` (start a sub-agent) and `skill_read` (load a skill's
//! instructions).

pub mod delegate;
pub mod skill_read;
