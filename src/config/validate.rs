//! The configuration's checks that serde cannot express (ranges, addresses, names that must
//! refer to something configured), each section in a function of its own; [`validate_all`]
//! gives every failing one, in this order.

use super::{check_store, check_url, key_err, Config, ConfigError};

/// Checks that serde cannot express: every failing one.
pub(super) fn validate_all(c: &Config) -> Vec<ConfigError> {
    let mut errs = Vec::new();
    let names = models(c, &mut errs);
    endpoints(c, &mut errs);
    model_limits(c, &mut errs);
    agents(c, &names, &mut errs);
    runtime(c, &mut errs);
    mcp_servers(c, &mut errs);
    tool_keys(c, &mut errs);
    errs
}

/// The primary model and its fallbacks: addresses, unique names, `max_tokens`. Returns the
/// models' names, for the checks that refer to a model.
fn models(c: &Config, errs: &mut Vec<ConfigError>) -> Vec<String> {
    errs.extend(check_url("model.base_url", &c.model.base_url, false).err());
    for (i, f) in c.model.fallback.iter().enumerate() {
        errs.extend(check_url(&format!("model.fallback[{i}].base_url"), &f.base_url, false).err());
        if f.name.trim().is_empty() {
            errs.push(key_err(
                &format!("model.fallback[{i}].name"),
                "must not be empty",
            ));
        }
    }
    let names: Vec<String> = c.model.endpoints().into_iter().map(|e| e.name).collect();
    for (i, n) in names.iter().enumerate().skip(1) {
        if names[..i].contains(n) {
            errs.push(key_err(
                &format!("model.fallback[{}].name", i - 1),
                format!("{n:?} is already the name of another model; names pick a model, so each must be unique"),
            ));
        }
    }
    if c.model.max_tokens == 0 {
        errs.push(key_err("model.max_tokens", "must be at least 1"));
    }
    names
}

/// The store and the other services' addresses (Telegram, Lark, embeddings, transcription), and media limits.
fn endpoints(c: &Config, errs: &mut Vec<ConfigError>) {
    errs.extend(check_store(&c.store).err());
    errs.extend(
        check_url(
            "channels.telegram.api_url",
            &c.channels.telegram.api_url,
            false,
        )
        .err(),
    );
    errs.extend(
        check_url(
            "channels.telegram.webhook_url",
            &c.channels.telegram.webhook_url,
            true,
        )
        .err(),
    );
    errs.extend(check_url("channels.lark.base_url", &c.channels.lark.base_url, true).err());
    errs.extend(
        check_url(
            "knowledge.embeddings.base_url",
            &c.knowledge.embeddings.base_url,
            true,
        )
        .err(),
    );
    errs.extend(
        check_url(
            "media.transcription.base_url",
            &c.media.transcription.base_url,
            true,
        )
        .err(),
    );
    if !c.media.transcription.base_url.trim().is_empty()
        && c.media.transcription.model.trim().is_empty()
    {
        errs.push(key_err(
            "media.transcription.model",
            "must be set when media.transcription.base_url is (e.g. whisper-1)",
        ));
    }
    if c.media.max_image_bytes == 0 {
        errs.push(key_err("media.max_image_bytes", "must be at least 1"));
    }
}

/// The primary model's name and limits.
fn model_limits(c: &Config, errs: &mut Vec<ConfigError>) {
    if c.model.name.trim().is_empty() {
        errs.push(key_err("model.name", "must not be empty"));
    }
    if c.model.max_tool_iterations == 0 {
        errs.push(key_err("model.max_tool_iterations", "must be at least 1"));
    }
    if c.model.history_messages == 0 {
        errs.push(key_err("model.history_messages", "must be at least 1"));
    }
    if c.model.context_tokens < 2_000 {
        errs.push(key_err(
            "model.context_tokens",
            "must be at least 2000 (the system prompt, the summary and one turn must fit)",
        ));
    }
}

/// Agents, bindings and the summary model: each names a configured model or agent.
fn agents(c: &Config, names: &[String], errs: &mut Vec<ConfigError>) {
    for (name, a) in &c.agents {
        if name == "default" {
            errs.push(key_err(
                "agents.default",
                "is the name of the top-level model and tools; give this agent another name",
            ));
        }
        let m = a.model.trim();
        if !m.is_empty() && !names.iter().any(|n| n == m) {
            errs.push(key_err(
                &format!("agents.{name}.model"),
                format!(
                    "{m:?} is not a configured model; expected model.name or a model.fallback \
                     name ({})",
                    names.join(", ")
                ),
            ));
        }
        if a.max_tool_iterations == Some(0) {
            errs.push(key_err(
                &format!("agents.{name}.max_tool_iterations"),
                "must be at least 1",
            ));
        }
    }
    for (i, b) in c.bindings.iter().enumerate() {
        if b.agent != "default" && !c.agents.contains_key(&b.agent) {
            let known: Vec<&str> = std::iter::once("default")
                .chain(c.agents.keys().map(String::as_str))
                .collect();
            errs.push(key_err(
                &format!("bindings[{i}].agent"),
                format!(
                    "no agent named {:?} (the agents are: {})",
                    b.agent,
                    known.join(", ")
                ),
            ));
        }
        if !["telegram", "lark", "terminal", "web"].contains(&b.channel.as_str()) {
            errs.push(key_err(
                &format!("bindings[{i}].channel"),
                format!("{:?}: expected telegram, lark, terminal or web", b.channel),
            ));
        }
    }
    let summary = c.memory.summary_model.trim();
    if !summary.is_empty() && !names.iter().any(|n| n == summary) {
        errs.push(key_err(
            "memory.summary_model",
            format!(
                "{summary:?} is not a configured model; expected model.name or a \
                 model.fallback name ({})",
                names.join(", ")
            ),
        ));
    }
}

/// Timeouts, streaming modes, owners, the time zone and the gateway's address.
fn runtime(c: &Config, errs: &mut Vec<ConfigError>) {
    if c.model.timeout_secs == 0 {
        errs.push(key_err("model.timeout_secs", "must be at least 1"));
    }
    if c.model.idle_timeout_secs == 0 {
        errs.push(key_err("model.idle_timeout_secs", "must be at least 1"));
    }
    if c.channels.lark.streaming == ethan_channels::StreamMode::Draft
        || c.channels.lark.streaming == ethan_channels::StreamMode::Edit
    {
        errs.push(key_err(
            "channels.lark.streaming",
            "Lark streams into a card: expected card (or auto) or off",
        ));
    }
    if c.channels.telegram.streaming == ethan_channels::StreamMode::Card {
        errs.push(key_err(
            "channels.telegram.streaming",
            "cards are Lark's: expected auto, draft, edit or off",
        ));
    }
    for (i, o) in c.owners.iter().enumerate() {
        match o.split_once(':') {
            Some(("telegram", id)) if id.trim().parse::<i64>().is_ok() => {}
            Some(("lark", id)) if !id.trim().is_empty() => {}
            _ => errs.push(key_err(
                &format!("owners[{i}]"),
                format!("{o:?} must look like telegram:<numeric user id> or lark:<open_id>"),
            )),
        }
    }
    if let Some(tz) = c.timezone.as_deref().filter(|t| !t.trim().is_empty()) {
        if let Err(e) = crate::tz::parse_zone(tz) {
            errs.push(key_err("timezone", e.to_string()));
        }
    }
    if c.gateway.listen.parse::<std::net::SocketAddr>().is_err() {
        errs.push(key_err(
            "gateway.listen",
            format!(
                "{:?} is not an address like 127.0.0.1:8900",
                c.gateway.listen
            ),
        ));
    }
}

/// MCP servers: a usable name, exactly one of command or url, and what belongs to each.
fn mcp_servers(c: &Config, errs: &mut Vec<ConfigError>) {
    for (name, s) in &c.mcp.servers {
        let key = format!("mcp.servers.{name}");
        if name.is_empty()
            || !name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
        {
            errs.push(key_err(&key, "a server name must match [A-Za-z0-9_-]+"));
        }
        if name.contains("__") || name.ends_with('_') {
            errs.push(key_err(
                &key,
                "a server name must not contain `__` or end with `_` (tool names are \
                 mcp__<server>__<tool>, and patterns mcp__<server>__* must name one server)",
            ));
        }
        match (&s.command, &s.url) {
            (Some(c), None) if !c.trim().is_empty() => {}
            (None, Some(u)) => errs.extend(check_url(&format!("{key}.url"), u, false).err()),
            _ => errs.push(key_err(
                &key,
                "exactly one of command (a program speaking MCP on stdio) or url (a streamable \
                     HTTP endpoint) must be set",
            )),
        }
        if s.url.is_some() && (!s.args.is_empty() || !s.env.is_empty()) {
            errs.push(key_err(
                &key,
                "args and env belong to a command server, not a url",
            ));
        }
        if s.command.is_some() && !s.headers.is_empty() {
            errs.push(key_err(
                &format!("{key}.headers"),
                "headers belong to a url server",
            ));
        }
        if s.timeout_secs == 0 {
            errs.push(key_err(
                &format!("{key}.timeout_secs"),
                "must be at least 1",
            ));
        }
    }
}

/// Per-tool sections: names only of tool-name characters.
fn tool_keys(c: &Config, errs: &mut Vec<ConfigError>) {
    for (name, _) in c.tools.per_tool.iter() {
        if !name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
        {
            errs.push(key_err(&format!("tools.{name}"), "unknown key"));
        }
    }
}
