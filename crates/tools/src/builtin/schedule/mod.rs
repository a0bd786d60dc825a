//! Scheduled-job tools: `schedule_create`, `schedule_list`, `schedule_pause`, `schedule_remove`.

pub mod schedule_create;
pub mod schedule_list;
pub mod schedule_pause;
pub mod schedule_remove;
