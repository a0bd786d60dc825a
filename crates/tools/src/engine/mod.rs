//! The tool engine: the registry of tools, the executor that turns proposals into results
//! (policy, schema validation, replay guard, consent, timeout, audit), and its helpers
//! (redaction, spill files, truncation of the model's copy).

pub mod config_names;
pub mod executor;
pub mod policy;
pub mod redact;
pub mod registry;
pub mod replay;
pub mod schema;
pub mod setup;
pub mod spill;
pub mod truncate;
