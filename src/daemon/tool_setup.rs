//! The one place the built-in tools' dependencies are taken from the configuration: their
//! settings, the secrets to redact, the time zone, the model names, the picture limit and the
//! Lark client ([`setup`]), and the check of the tool names the configuration writes
//! ([`name_problems`]). The tools themselves never read the configuration.

use crate::config::Config;
use crate::tools::lark_common::LarkClient;
use crate::tools::registry::Registry;
use crate::tools::setup::ToolsSetup;
use std::sync::Arc;

/// What the built-in tools get from `config`, their egress guards sharing `egress` and their
/// page reader's children counted in `readers` (the daemon's, shared with its media service:
/// [`crate::media::parse::slots`]); no live settings and no knowledge base (the daemon
/// adds them: [`crate::daemon::wiring::tools`]).
pub fn setup(
    config: &Config,
    egress: &crate::egress::Egress,
    readers: Arc<tokio::sync::Semaphore>,
) -> ToolsSetup {
    ToolsSetup {
        tools: config.tools.clone(),
        secrets: crate::config::secret_values(config),
        timezone: config.timezone.clone(),
        models: config
            .model
            .endpoints()
            .into_iter()
            .map(|e| e.name)
            .collect(),
        max_image_bytes: config.media.max_image_bytes,
        live: None,
        knowledge: None,
        lark: lark_client(config),
        egress: egress.clone(),
        // Web pages are parsed in the limited child process, never in the daemon.
        pages: Arc::new(crate::media::page::ChildPages::new(readers)),
    }
}

/// The built-in tools configured from `config` (`tools.web_search` fixed, no knowledge base,
/// an egress of their own): for the commands and checks that run no daemon.
pub fn registry(config: &Config) -> Registry {
    Registry::builtin(setup(
        config,
        &Default::default(),
        crate::media::parse::slots(),
    ))
}

/// The tool names `config` gets wrong (`tools.*` and each agent's `tools`), for the
/// configuration's own check (`config::load_checked`).
pub fn name_problems(config: &Config) -> Vec<(String, String)> {
    crate::tools::engine::config_names::name_problems(
        &config.tools,
        config.agents.iter().map(|(n, a)| (n.as_str(), &a.tools)),
    )
}

/// The Lark tools' client: `None` unless `channels.lark.app_id` and `app_secret` are both set.
fn lark_client(config: &Config) -> Option<Arc<LarkClient>> {
    let l = &config.channels.lark;
    if l.app_id.trim().is_empty() || l.app_secret.expose().trim().is_empty() {
        return None;
    }
    let lc = crate::config::lark_config(config);
    LarkClient::new(
        &lc.base_url,
        &lc.app_id,
        &lc.app_secret,
        l.user_access_token.expose(),
        l.user_refresh_token.expose(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-ins with a Lark app configured: all of them.
    fn every_builtin() -> Registry {
        let mut config = Config::default();
        config.channels.lark.app_id = "cli_test".into();
        config.channels.lark.app_secret = crate::config::Secret::new("sekret");
        registry(&config)
    }

    /// The built-in tools skip meta-validation at start; this is where it happens instead.
    #[test]
    fn every_builtin_schema_is_valid_and_compiles() {
        let r = every_builtin();
        assert!(r.skipped().is_empty(), "{:?}", r.skipped());
        let names: Vec<String> = r.iter().map(|t| t.decl().name.to_string()).collect();
        // test_panic and test_unapproved_shell.
        let test_tools = 2 * usize::from(cfg!(feature = "test-tools"));
        let browser = 3 * usize::from(cfg!(feature = "browser"));
        assert_eq!(names.len(), 27 + browser + test_tools, "{names:?}");
        assert!(names.iter().any(|n| n == "lark_message_send"), "{names:?}");
        for tool in r.iter() {
            let name = &tool.decl().name;
            crate::tools::schema::check_parameters(&tool.decl().parameters)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let v = r.validator(name).unwrap();
            assert!(v.is_ok(), "{name}: {:?}", v.err());
        }
    }

    /// The fixed catalog is exactly what the registry builds when every tool is enabled.
    #[test]
    fn the_catalog_names_every_builtin() {
        let mut registered: Vec<String> = every_builtin()
            .iter()
            .map(|t| t.decl().name.to_string())
            .collect();
        registered.sort();
        assert_eq!(registered, crate::tools::registry::builtin_names());
    }
}
