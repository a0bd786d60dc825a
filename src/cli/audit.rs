//! `ethan audit [-n N] [--session S]`: the newest tool-call audit entries (arguments redacted);
//! for a sub-agent's session (`<parent>/sub<depth>-<id>`, named in its answer), its transcript
//! too.

use crate::config::Loaded;
use std::process::ExitCode;

pub async fn print(loaded: &Loaded, n: usize, session: Option<&str>) -> anyhow::Result<ExitCode> {
    let store = crate::daemon::open_store::open(loaded).await?.main;
    let rows = store.recent_audit(n, session).await?;
    if rows.is_empty() {
        println!(
            "no tool calls recorded{}",
            session.map(|s| format!(" for {s}")).unwrap_or_default()
        );
    }
    for e in rows.iter().rev() {
        let when = chrono::DateTime::from_timestamp_millis(e.started_ms)
            .map(|t| {
                t.with_timezone(&chrono::Local)
                    .format("%Y-%m-%d %H:%M:%S")
                    .to_string()
            })
            .unwrap_or_default();
        let outcome = if e.ok {
            "ok".to_string()
        } else {
            e.error_kind.clone().unwrap_or_else(|| "error".into())
        };
        let mut args: String = e.args.chars().take(100).collect();
        if args.len() < e.args.len() {
            args.push('…');
        }
        println!(
            "{when}  {:<10} {:<12} {:<10} try {} {:>6} ms {:>8} B  {}  [{}]",
            e.channel,
            e.tool,
            outcome,
            e.attempt,
            e.ended_ms - e.started_ms,
            e.output_bytes,
            args,
            e.session_key
        );
        if let Some(err) = &e.error {
            println!("    error: {}", err.lines().next().unwrap_or(""));
        }
        if let Some(p) = &e.spill_path {
            println!("    full output: {p}");
        }
        if let Some(m) = &e.model {
            println!("    proposed by model: {m}");
        }
    }
    if let Some(key) = session.filter(|k| k.contains("/sub")) {
        let id = store.current_session(key).await?;
        let messages = store.load_window(&id, 1_000).await?;
        println!("\ntranscript of {key} ({} messages):", messages.len());
        for m in &messages {
            let text = m.content.as_deref().unwrap_or("").trim();
            if !text.is_empty() {
                println!("{}: {text}", m.role.as_str());
            }
            for c in &m.tool_calls {
                println!("{} calls {}({})", m.role.as_str(), c.name, c.arguments);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
