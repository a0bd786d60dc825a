use super::*;
use serde_json::json;

#[test]
fn defaults_follow_the_design() {
    let c = from_value(json!({})).unwrap();
    assert_eq!(c.model.base_url, "https://api.openai.com/v1");
    assert_eq!(c.model.max_tool_iterations, 20);
    assert_eq!(c.model.history_messages, 400);
    assert_eq!(c.model.context_tokens, 32_000);
    assert_eq!(c.memory.decay_days, 90);
    assert_eq!(c.memory.snapshot_chars, 2_000);
    assert_eq!(c.tools.summarise_over_chars, 12_000);
    assert_eq!(c.channels.telegram.api_url, "https://api.telegram.org");
    assert_eq!(c.channels.telegram.dm_policy, DmPolicy::Allowlist);
    assert_eq!(c.tools.profile, Profile::Full);
    assert_eq!(c.gateway.listen, "127.0.0.1:8900");
    assert_eq!(c.channels.lark.stale_after_secs, 900);
}

#[test]
fn only_secret_looking_mcp_values_are_secrets() {
    let v = |s: &str| Secret::new(s);
    assert!(mcp_value_is_secret("GITHUB_TOKEN", &v("ghp_1")));
    assert!(mcp_value_is_secret("Authorization", &v("Bearer x")));
    assert!(mcp_value_is_secret("X-Api-Key", &v("abc")));
    assert!(mcp_value_is_secret(
        "DATABASE_URL",
        &v("postgres://user:pass@db.internal/app")
    ));
    assert!(!mcp_value_is_secret("NODE_ENV", &v("production")));
    assert!(!mcp_value_is_secret("PORT", &v("3000")));
    assert!(!mcp_value_is_secret("Accept", &v("application/json")));
}

#[test]
fn a_providers_key_variable_goes_only_to_the_hosts_it_is_for() {
    let env = |name: &str| match name {
        "OPENAI_API_KEY" => Some("sk-openai".to_string()),
        "ANTHROPIC_API_KEY" => Some("sk-ant".to_string()),
        "ANTHROPIC_BASE_URL" => Some("https://proxy.example/anthropic".to_string()),
        _ => None,
    };
    let fill = |provider, url: &str, primary| {
        let (mut url, mut key) = (url.to_string(), Secret::default());
        fill_endpoint(provider, &mut url, &mut key, primary, env);
        (url, key.expose().to_string())
    };
    // A fallback entry on another host gets no key it was not given.
    assert_eq!(
        fill(ProviderKind::Openai, "http://127.0.0.1:11434/v1", false),
        ("http://127.0.0.1:11434/v1".into(), String::new())
    );
    assert_eq!(
        fill(ProviderKind::Openai, "https://api.deepseek.com/v1", false).1,
        ""
    );
    // Empty, the public endpoint, or the variable's own host: the key goes with it.
    assert_eq!(
        fill(ProviderKind::Openai, "", false),
        ("https://api.openai.com/v1".into(), "sk-openai".into())
    );
    assert_eq!(
        fill(ProviderKind::Openai, "https://api.openai.com/v1/", false).1,
        "sk-openai"
    );
    assert_eq!(
        fill(ProviderKind::Anthropic, "", false),
        ("https://proxy.example/anthropic".into(), "sk-ant".into())
    );
    assert_eq!(
        fill(
            ProviderKind::Anthropic,
            "https://proxy.example/anthropic",
            false
        )
        .1,
        "sk-ant"
    );
    // The primary takes its provider's variable whatever its host (as before).
    assert_eq!(
        fill(ProviderKind::Openai, "https://api.deepseek.com/v1", true).1,
        "sk-openai"
    );
}

#[test]
fn every_design_key_is_accepted() {
    let yaml = include_str!("../../tests/fixtures/config_all_keys.yaml");
    let raw: serde_json::Value = serde_json::to_value(serde_yaml_value(yaml)).unwrap();
    let c = from_value(raw.clone()).unwrap();
    validate(&c).unwrap();
    assert_eq!(c.channels.telegram.allow_from, vec!["42".to_string()]);
    assert_eq!(c.tools.per_tool["shell"].timeout_secs, Some(30));
    assert!(notices(&raw).is_empty(), "{:?}", notices(&raw));
}

/// Every key the config accepts (asked of serde, section by section) is in the example, and
/// the example loads without a problem.
#[test]
fn the_example_config_has_every_key_and_loads() {
    use origin::Seg;
    use serde_json::Value;
    fn check(segs: &mut Vec<Seg>, values: &[&Value], missing: &mut Vec<String>) {
        let Some(keys) = problems::keys_at(segs) else {
            return;
        };
        let tools = segs.len() == 1 && segs[0] == Seg::Key("tools".into());
        for k in keys {
            let children: Vec<&Value> = values.iter().filter_map(|v| v.get(&k)).collect();
            segs.push(Seg::Key(k.clone()));
            if children.is_empty() {
                missing.push(origin::key_string(segs));
            } else if problems::keys_at(segs).is_some() {
                check(segs, &children, missing);
            } else {
                // A list of sections, or a map of them (`mcp.servers`): every item's keys.
                for (step, items) in [
                    (
                        Seg::Index(0),
                        children
                            .iter()
                            .filter_map(|c| c.as_array())
                            .flatten()
                            .collect::<Vec<_>>(),
                    ),
                    (
                        Seg::Key("x".into()),
                        children
                            .iter()
                            .filter_map(|c| c.as_object())
                            .flat_map(|m| m.values())
                            .collect(),
                    ),
                ] {
                    segs.push(step);
                    if problems::keys_at(segs).is_some() {
                        check(segs, &items, missing);
                    }
                    segs.pop();
                }
            }
            segs.pop();
        }
        if tools {
            let per_tool: Vec<&Value> = values
                .iter()
                .filter_map(|v| v.as_object())
                .flat_map(|m| m.iter())
                .filter(|(k, _)| !TOOLS_SECTION_KEYS.contains(&k.as_str()))
                .map(|(_, v)| v)
                .collect();
            segs.push(Seg::Key("shell".into()));
            check(segs, &per_tool, missing);
            segs.pop();
        }
    }
    let raw = serde_yaml_value(include_str!("../../config.example.yaml"));
    let c = from_value(raw.clone()).unwrap();
    let problems = validate_all(&c);
    assert!(problems.is_empty(), "{problems:?}");
    let mut missing = Vec::new();
    check(&mut Vec::new(), &[&raw], &mut missing);
    assert!(missing.is_empty(), "config.example.yaml lacks {missing:?}");
    // The check itself finds a missing key.
    let mut less = raw.clone();
    less["retention"]
        .as_object_mut()
        .unwrap()
        .remove("log_days");
    less["model"]["fallback"][0]
        .as_object_mut()
        .unwrap()
        .remove("max_tokens");
    let mut missing = Vec::new();
    check(&mut Vec::new(), &[&less], &mut missing);
    assert!(
        missing.contains(&"retention.log_days".to_string()),
        "{missing:?}"
    );
    assert!(
        missing
            .iter()
            .any(|m| m.starts_with("model.fallback") && m.ends_with("max_tokens")),
        "{missing:?}"
    );
}

#[test]
fn streaming_modes_accept_an_unquoted_off_and_refuse_a_typo() {
    use ethan_channels::StreamMode;
    let v = serde_yaml_value(
        "channels:\n  telegram:\n    streaming: off\n  lark:\n    streaming: false\n",
    );
    let c = from_value(v).unwrap();
    assert_eq!(c.channels.telegram.streaming, StreamMode::Off);
    assert_eq!(c.channels.lark.streaming, StreamMode::Off);
    let c = from_value(serde_yaml_value(
        "channels:\n  telegram:\n    streaming: edit\n",
    ))
    .unwrap();
    assert_eq!(c.channels.telegram.streaming, StreamMode::Edit);
    assert_eq!(c.channels.lark.streaming, StreamMode::Auto);
    let err = from_value(json!({"channels": {"telegram": {"streaming": "drafts"}}}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("channels.telegram.streaming"), "{err}");
    assert!(err.contains("auto, draft, edit, card or off"), "{err}");
    let c = from_value(json!({"channels": {"lark": {"streaming": "edit"}}})).unwrap();
    let err = validate(&c).unwrap_err().to_string();
    assert!(err.contains("channels.lark.streaming"), "{err}");
}

/// Parse YAML through the `config` crate, exactly as `load` does.
fn serde_yaml_value(yaml: &str) -> serde_json::Value {
    let c = config::Config::builder()
        .add_source(config::File::from_str(yaml, config::FileFormat::Yaml))
        .build()
        .unwrap();
    let mut v: serde_json::Value = c.try_deserialize().unwrap();
    strip_nulls(&mut v);
    v
}

#[test]
fn mcp_servers_are_checked_and_their_values_are_secrets() {
    let c = from_value(json!({"mcp": {"servers": {
            "a": {"command": "srv", "env": {"TOKEN_X": "env-secret-1"}},
            "b": {"url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "Bearer tok-12345678"}}
        }}}))
        .unwrap();
    validate(&c).unwrap();
    let s = secret_values(&c);
    for v in ["env-secret-1", "Bearer tok-12345678", "tok-12345678"] {
        assert!(s.iter().any(|x| x == v), "{v} in {s:?}");
    }
    assert_eq!(c.mcp.servers["a"].timeout_secs, 60);
    assert!(c.mcp.servers["a"].enabled);
    for (bad, key) in [
        (json!({"x y": {"command": "srv"}}), "mcp.servers.x y"),
        (json!({"a": {}}), "mcp.servers.a"),
        (
            json!({"a": {"command": "srv", "url": "http://x/"}}),
            "mcp.servers.a",
        ),
        (json!({"a": {"url": "ftp://x/"}}), "mcp.servers.a.url"),
        (
            json!({"a": {"command": "srv", "timeout_secs": 0}}),
            "mcp.servers.a.timeout_secs",
        ),
        (
            json!({"a": {"command": "srv", "headers": {"A": "b"}}}),
            "mcp.servers.a.headers",
        ),
    ] {
        let c = from_value(json!({"mcp": {"servers": bad}})).unwrap();
        let err = validate(&c).unwrap_err().to_string();
        assert!(err.contains(key), "{err}");
    }
    let err = from_value(json!({"mcp": {"servers": {"a": {"command": "x", "cmd": 1}}}}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("mcp.servers.a.cmd"), "{err}");
}

#[test]
fn unknown_key_names_its_path() {
    let err = from_value(json!({"channels": {"telegram": {"tokn": "x"}}})).unwrap_err();
    let s = err.to_string();
    assert!(s.contains("channels.telegram.tokn"), "{s}");
    assert!(s.contains("unknown key"), "{s}");
    let err = from_value(json!({"modle": {}})).unwrap_err().to_string();
    assert!(err.contains("`modle`"), "{err}");
}

#[test]
fn bad_value_names_its_path() {
    let c = from_value(json!({"model": {"idle_timeout_secs": 0}})).unwrap();
    let err = validate(&c).unwrap_err();
    assert!(err.to_string().contains("model.idle_timeout_secs"), "{err}");
    let err = from_value(json!({"model": {"timeout_secs": "soon"}})).unwrap_err();
    assert!(err.to_string().contains("model.timeout_secs"), "{err}");
    let err = from_value(json!({"channels": {"telegram": {"dm_policy": "everyone"}}}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("channels.telegram.dm_policy"), "{err}");
    let err = from_value(json!({"tools": {"shell": {"timeout": 3}}}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("tools.shell"), "{err}");
}

#[test]
fn validation_names_the_key() {
    let c = from_value(json!({"model": {"base_url": "not a url"}})).unwrap();
    assert!(validate(&c)
        .unwrap_err()
        .to_string()
        .contains("model.base_url"));
    let c = from_value(json!({"owners": ["bob"]})).unwrap();
    assert!(validate(&c).unwrap_err().to_string().contains("owners[0]"));
    let c = from_value(json!({"owners": ["telegram:1", "telegram:abc"]})).unwrap();
    assert!(validate(&c).unwrap_err().to_string().contains("owners[1]"));
    let c = from_value(json!({"gateway": {"listen": "localhost"}})).unwrap();
    assert!(validate(&c)
        .unwrap_err()
        .to_string()
        .contains("gateway.listen"));
    let c = from_value(json!({"timezone": "Mars/Olympus"})).unwrap();
    let e = validate(&c).unwrap_err().to_string();
    assert!(e.contains("timezone") && e.contains("Mars/Olympus"), "{e}");
    validate(&from_value(json!({"timezone": "Asia/Shanghai"})).unwrap()).unwrap();
}

#[test]
fn secrets_are_redacted_in_debug() {
    let c = from_value(json!({"model": {"api_key": "sk-very-secret"}})).unwrap();
    let dbg = format!("{c:?}");
    assert!(!dbg.contains("sk-very-secret"));
    assert!(dbg.contains("<redacted>"));
}

#[test]
fn ethan_home_itself_is_never_the_workspace() {
    let home = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    let loaded = |config: Config| Loaded {
        config,
        home: home.path().to_path_buf(),
        path: home.path().join("config.yaml"),
        file_found: false,
        notices: Vec::new(),
    };
    assert_eq!(
        loaded(config.clone()).workspace(),
        home.path().join("workspace")
    );
    for named in [
        home.path().display().to_string(),
        format!("{}/.", home.path().display()),
    ] {
        config.tools.workspace = named;
        assert_eq!(
            loaded(config.clone()).workspace(),
            home.path().join("workspace")
        );
    }
    config.tools.workspace = home.path().join("elsewhere").display().to_string();
    assert_eq!(loaded(config).workspace(), home.path().join("elsewhere"));
}

#[test]
fn numeric_ids_are_strings() {
    let c = from_value(
        json!({"owners": ["telegram:1"], "channels": {"telegram": {"allow_from": [123, "456"]}}}),
    )
    .unwrap();
    assert_eq!(c.channels.telegram.allow_from, vec!["123", "456"]);
    // A binding's chat, thread and sender too: a Telegram group id written unquoted.
    let c = from_value(json!({"agents": {"helper": {}}, "bindings": [
            {"agent": "helper", "channel": "telegram", "chat_id": -100666, "thread": 7,
             "sender": 42},
            {"agent": "helper", "channel": "telegram", "chat_id": "-100777"}]}))
    .unwrap();
    let b = &c.bindings[0];
    assert_eq!(
        (
            b.chat_id.as_deref(),
            b.thread.as_deref(),
            b.sender.as_deref()
        ),
        (Some("-100666"), Some("7"), Some("42"))
    );
    assert_eq!(c.bindings[1].chat_id.as_deref(), Some("-100777"));
    assert_eq!(c.bindings[1].thread, None);
}
