//! `ethan agents list` (the configured agents, what each changes, and the bindings in the order
//! they are matched) and `ethan skills list` (built-in and installed skills, and the skill folders
//! that could not be read).

use crate::agent::agents::{describe, summary, Agents, DEFAULT};
use crate::config::Loaded;
use std::process::ExitCode;

/// `ethan agents list`.
pub fn list_agents(loaded: &Loaded) -> ExitCode {
    let c = &loaded.config;
    println!("agents:");
    println!(
        "  {DEFAULT:<14} the top-level model ({}) and tools settings",
        c.model.name
    );
    for (name, a) in &c.agents {
        println!("  {name:<14} {}", summary(a));
    }
    let agents = Agents::from_config(c);
    if agents.bindings().is_empty() {
        println!("bindings: none (the default agent answers everywhere)");
    } else {
        println!("bindings (the most specific match wins: sender > thread > chat > channel):");
        for (i, b) in agents.bindings().iter().enumerate() {
            println!("  [{i}] {:<14} {}", b.agent, describe(b));
        }
    }
    ExitCode::SUCCESS
}

/// `ethan skills list`.
pub fn list_skills(loaded: &Loaded) -> ExitCode {
    let dir = loaded.home.join("skills");
    let (skills, problems) = crate::skills::load(&dir);
    for s in &skills {
        let from = s
            .dir
            .as_ref()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| "built-in".into());
        println!("{:<20} {}  [{from}]", s.name, s.description);
    }
    for p in &problems {
        println!("skipped: {p}");
    }
    if skills.is_empty() {
        println!(
            "no skills (add folders with a SKILL.md under {})",
            dir.display()
        );
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
