//! File tools (`file_read`, `file_list`, `file_write`) and the path resolution and protection
//! every file and search tool uses ([`paths`]).

pub mod file_list;
pub mod file_read;
pub mod file_write;
pub mod paths;
pub mod write_preview;
