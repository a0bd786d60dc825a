//! `ethan init`: a first `config.yaml`, asked for on the terminal (or taken from flags with
//! `--yes`), each endpoint tested before it is written: the model as the chat will use it
//! ([`crate::provider::probe`]: its model list, else a one-token completion; the models it
//! lists are offered as the model name), a Telegram token with `getMe`, a Lark app with a
//! `tenant_access_token` request. A failure says whether the network failed or the service
//! refused; a value that failed its test is written only when the person types `yes` to that
//! (with `--yes`, a failure writes nothing). The file is written with mode 0600 (it holds
//! keys; 0640 with its folder's group in a set-group-ID folder such as the Debian package's
//! /etc/ethan), commented, and never over an existing one without `--force`.

use crate::config::{self, Config, ModelConfig};
use crate::provider::probe::Failed;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The answers `ethan init` needs; each flag skips its question.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct InitArgs {
    /// OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1
    #[arg(long, value_name = "URL")]
    pub model_base_url: Option<String>,
    /// The endpoint's API key (empty for a local server that takes none)
    #[arg(long, value_name = "KEY")]
    pub model_api_key: Option<String>,
    /// The model, e.g. gpt-4o-mini
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,
    /// A Telegram bot token from @BotFather (empty: no Telegram)
    #[arg(long, value_name = "TOKEN")]
    pub telegram_token: Option<String>,
    /// The Bot API URL (default https://api.telegram.org)
    #[arg(long, value_name = "URL")]
    pub telegram_api_url: Option<String>,
    /// A Lark/Feishu self-built app's App ID (empty: no Lark)
    #[arg(long, value_name = "ID")]
    pub lark_app_id: Option<String>,
    /// The app's App Secret
    #[arg(long, value_name = "SECRET")]
    pub lark_app_secret: Option<String>,
    /// The Open API URL (default https://open.feishu.cn; https://open.larksuite.com for Lark)
    #[arg(long, value_name = "URL")]
    pub lark_base_url: Option<String>,
    /// The owner: telegram:<user id> or lark:<open_id> (empty: claim it later with `ethan owner claim`)
    #[arg(long, value_name = "ID")]
    pub owner: Option<String>,
    /// Ask nothing: flags and defaults only
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Replace an existing config file
    #[arg(long)]
    pub force: bool,
    /// Write the file without testing the endpoints
    #[arg(long)]
    pub no_check: bool,
}

/// What goes into the file.
#[derive(Debug, Default, Clone)]
struct Answers {
    base_url: String,
    api_key: String,
    name: String,
    telegram_token: String,
    telegram_api_url: String,
    lark_app_id: String,
    lark_app_secret: String,
    lark_base_url: String,
    owner: String,
}

const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// Questions on stderr, answers from stdin (a line each; end of input takes the defaults).
struct Prompt {
    ask: bool,
    tty: bool,
    lines: std::io::StdinLock<'static>,
}

impl Prompt {
    fn line(&mut self, question: &str, default: &str, secret: bool) -> String {
        if !self.ask {
            return default.to_string();
        }
        let shown = match (default.is_empty(), secret) {
            (true, _) => String::new(),
            (false, true) => " [keep the one given]".to_string(),
            (false, false) => format!(" [{default}]"),
        };
        eprint!("{question}{shown}: ");
        let _ = std::io::stderr().flush();
        let echo_off = (secret && self.tty).then(EchoOff::new).flatten();
        let mut s = String::new();
        let read = self.lines.read_line(&mut s);
        if echo_off.is_some() {
            eprintln!();
        }
        drop(echo_off);
        match read {
            Ok(0) | Err(_) => {
                // End of input: the defaults from here on.
                self.ask = false;
                default.to_string()
            }
            Ok(_) if s.trim().is_empty() => default.to_string(),
            Ok(_) => s.trim().to_string(),
        }
    }

    fn yes(&mut self, question: &str, default: bool) -> bool {
        let d = if default { "Y/n" } else { "y/N" };
        let a = self.line(&format!("{question} ({d})"), "", false);
        match a.to_ascii_lowercase().as_str() {
            "" => default,
            a => a.starts_with('y'),
        }
    }

    /// Whether to write `what` although its test failed: only the word `yes`, typed out, says
    /// so (Enter, `y`, or the end of input do not).
    fn write_untested(&mut self, what: &str) -> bool {
        let a = self.line(
            &format!("Write {what} to the file untested anyway? Type yes to write it"),
            "",
            false,
        );
        a.eq_ignore_ascii_case("yes")
    }
}

/// Terminal echo off while a secret is typed; restored on drop.
struct EchoOff(libc::termios);

impl EchoOff {
    fn new() -> Option<EchoOff> {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a zeroed, then filled, termios struct.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) != 0 {
                return None;
            }
            let saved = t;
            t.c_lflag &= !libc::ECHO;
            t.c_lflag |= libc::ECHONL;
            if libc::tcsetattr(0, libc::TCSANOW, &t) != 0 {
                return None;
            }
            Some(EchoOff(saved))
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: restores the attributes read in `new`.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.0);
        }
    }
}

/// Where the file goes: `--config`, else `$ETHAN_CONFIG`, else `$ETHAN_HOME/config.yaml`.
pub fn target(config_flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(p) = config_flag {
        return Ok(p);
    }
    if let Some(p) = std::env::var_os("ETHAN_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(config::home_dir()?.join("config.yaml"))
}

pub async fn run(path: PathBuf, args: InitArgs) -> anyhow::Result<ExitCode> {
    if path.exists() && !args.force {
        eprintln!(
            "ethan: {} already exists; nothing written. Edit it (`ethan doctor` checks it), or \
             run `ethan init --force` to replace it.",
            path.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    let stdin = std::io::stdin();
    let mut p = Prompt {
        ask: !args.yes,
        tty: stdin.is_terminal(),
        lines: stdin.lock(),
    };
    if p.ask {
        eprintln!(
            "Setting up Ethan: {} will be written. Press Enter to take the value in brackets.\n",
            path.display()
        );
    }
    let mut a = Answers {
        telegram_api_url: args.telegram_api_url.clone().unwrap_or_default(),
        lark_base_url: args.lark_base_url.clone().unwrap_or_default(),
        ..Answers::default()
    };
    let check = !args.no_check;

    ask_model(&mut p, &args, &mut a, check).await?;
    ask_telegram(&mut p, &args, &mut a, check).await?;
    ask_lark(&mut p, &args, &mut a, check).await?;
    ask_owner(&mut p, &args, &mut a)?;

    let text = render(&a);
    // What is written must load: the same checks as `ethan run`.
    config::from_value(json_of(&a))?;
    let service = write_private(&path, &text, args.force)?.map(ServiceUser::of_group);
    match &service {
        Some(s) => println!(
            "Wrote {} (mode 0640: its group {} may read it).",
            path.display(),
            s.name
        ),
        None => println!("Wrote {} (mode 0600).", path.display()),
    }
    next_steps(&a, &path, service.as_ref());
    Ok(ExitCode::SUCCESS)
}

/// The model endpoint, until it answers as the chat will use it (or the person writes it
/// untested, in so many words). Asked again, the answers given are the defaults, or the URL
/// that answered when `/v1` was left out.
async fn ask_model(
    p: &mut Prompt,
    args: &InitArgs,
    a: &mut Answers,
    check: bool,
) -> anyhow::Result<()> {
    let mut url_default = DEFAULT_BASE_URL.to_string();
    let mut key_default = std::env::var("OPENAI_API_KEY").unwrap_or_default();
    loop {
        a.base_url = ask(
            p,
            &args.model_base_url,
            "Model endpoint (OpenAI-compatible base URL)",
            &url_default,
            false,
        );
        a.api_key = ask(
            p,
            &args.model_api_key,
            "API key (empty for a local server)",
            &key_default,
            true,
        );
        let listed = if check && args.model_name.is_none() {
            listed_models(a).await
        } else {
            Vec::new()
        };
        if p.ask && !listed.is_empty() {
            eprintln!("  the server lists: {}", listed.join(", "));
        }
        a.name = ask(
            p,
            &args.model_name,
            "Model name",
            default_model(&listed),
            false,
        );
        if !check {
            break;
        }
        match test_model(a).await {
            Ok(line) => {
                eprintln!("  ok: {line}");
                break;
            }
            Err(e) if p.ask => {
                eprintln!("  the model endpoint does not answer as the chat will use it: {e}");
                if p.yes("Try again?", true) {
                    url_default = e.suggestion.unwrap_or_else(|| a.base_url.clone());
                    key_default = a.api_key.clone();
                    continue;
                }
                if !p.write_untested("this endpoint and key") {
                    anyhow::bail!("nothing written: the model endpoint did not answer");
                }
                break;
            }
            Err(e) => anyhow::bail!("the model endpoint does not answer as the chat will use it: {e} (nothing written; --no-check skips the tests)"),
        }
    }
    Ok(())
}

/// The Telegram bot token (empty: no Telegram), tested with `getMe`.
async fn ask_telegram(
    p: &mut Prompt,
    args: &InitArgs,
    a: &mut Answers,
    check: bool,
) -> anyhow::Result<()> {
    loop {
        a.telegram_token = ask(
            p,
            &args.telegram_token,
            "Telegram bot token from @BotFather (empty: no Telegram)",
            "",
            true,
        );
        if a.telegram_token.is_empty() || !check {
            break;
        }
        match test_telegram(a).await {
            Ok(me) => {
                eprintln!("  ok: getMe: {me}");
                break;
            }
            Err(e) if p.ask => {
                eprintln!("  {e}");
                if p.yes("Try again?", true) {
                    continue;
                }
                if !p.write_untested("this token") {
                    a.telegram_token.clear();
                    eprintln!("  Telegram left out (add channels.telegram.token later)");
                }
                break;
            }
            Err(e) => anyhow::bail!("{e} (nothing written)"),
        }
    }
    Ok(())
}

/// The Lark app's id and secret (empty id: no Lark), tested with a `tenant_access_token`
/// request.
async fn ask_lark(
    p: &mut Prompt,
    args: &InitArgs,
    a: &mut Answers,
    check: bool,
) -> anyhow::Result<()> {
    loop {
        a.lark_app_id = ask(
            p,
            &args.lark_app_id,
            "Lark/Feishu App ID (empty: no Lark)",
            "",
            false,
        );
        if a.lark_app_id.is_empty() {
            break;
        }
        a.lark_app_secret = ask(p, &args.lark_app_secret, "Lark/Feishu App Secret", "", true);
        if !check {
            break;
        }
        match test_lark(a).await {
            Ok(line) => {
                eprintln!("  ok: {line}");
                break;
            }
            Err(e) if p.ask => {
                eprintln!("  {e}");
                if p.yes("Try again?", true) {
                    continue;
                }
                if !p.write_untested("this app id and secret") {
                    a.lark_app_id.clear();
                    a.lark_app_secret.clear();
                    eprintln!("  Lark left out (add channels.lark later)");
                }
                break;
            }
            Err(e) => anyhow::bail!("{e} (nothing written)"),
        }
    }
    Ok(())
}

/// The owner, until it has a valid form (or is left empty).
fn ask_owner(p: &mut Prompt, args: &InitArgs, a: &mut Answers) -> anyhow::Result<()> {
    loop {
        a.owner = ask(
            p,
            &args.owner,
            "Owner, telegram:<user id> or lark:<open_id> (empty: claim it later)",
            "",
            false,
        );
        match owner_ok(&a.owner) {
            Ok(()) => break,
            Err(e) if p.ask => eprintln!("  {e}"),
            Err(e) => anyhow::bail!("{e}"),
        }
    }
    Ok(())
}

fn ask(
    p: &mut Prompt,
    flag: &Option<String>,
    question: &str,
    default: &str,
    secret: bool,
) -> String {
    match flag {
        Some(v) => v.trim().to_string(),
        None => p.line(question, default, secret),
    }
}

fn owner_ok(owner: &str) -> Result<(), String> {
    match owner.split_once(':') {
        _ if owner.is_empty() => Ok(()),
        Some(("telegram", id)) if id.trim().parse::<i64>().is_ok() => Ok(()),
        Some(("lark", id)) if !id.trim().is_empty() => Ok(()),
        _ => Err(format!(
            "{owner:?} must look like telegram:<numeric user id> or lark:<open_id>"
        )),
    }
}

/// The answers as the config's own shape (only what was given).
fn json_of(a: &Answers) -> serde_json::Value {
    let mut v = serde_json::json!({
        "model": {"base_url": a.base_url, "name": a.name},
    });
    if !a.api_key.is_empty() {
        v["model"]["api_key"] = a.api_key.clone().into();
    }
    if !a.telegram_token.is_empty() {
        v["channels"]["telegram"]["token"] = a.telegram_token.clone().into();
        if !a.telegram_api_url.is_empty() {
            v["channels"]["telegram"]["api_url"] = a.telegram_api_url.clone().into();
        }
    }
    if !a.lark_app_id.is_empty() {
        v["channels"]["lark"]["app_id"] = a.lark_app_id.clone().into();
        v["channels"]["lark"]["app_secret"] = a.lark_app_secret.clone().into();
        if !a.lark_base_url.is_empty() {
            v["channels"]["lark"]["base_url"] = a.lark_base_url.clone().into();
        }
    }
    if !a.owner.is_empty() {
        v["owners"] = serde_json::json!([a.owner]);
    }
    v
}

fn config_of(a: &Answers) -> anyhow::Result<Config> {
    Ok(config::from_value(json_of(a))?)
}

/// How long init waits for each answer of the model endpoint.
const MODEL_TEST_SECS: u64 = 30;

/// The models the endpoint lists; empty when it lists none or cannot be asked.
async fn listed_models(a: &Answers) -> Vec<String> {
    match config_of(a) {
        Ok(c) => crate::provider::probe::listed_models(&c.model.primary(), MODEL_TEST_SECS).await,
        Err(_) => Vec::new(),
    }
}

/// The model name offered: the usual default when the server lists it or lists nothing, else
/// the first model it lists.
fn default_model(listed: &[String]) -> &str {
    match listed.first() {
        Some(first) if !listed.iter().any(|m| m == DEFAULT_MODEL) => first,
        _ => DEFAULT_MODEL,
    }
}

/// Whether the model endpoint of `a` answers as the chat will use it.
async fn test_model(a: &Answers) -> Result<String, Failed> {
    let c = config_of(a).map_err(|e| Failed::from(format!("{e:#}")))?;
    let ep = c.model.primary();
    if ep.missing_key() {
        return Err(format!("{} needs an API key", ep.base_url).into());
    }
    if ep.provider == crate::config::ProviderKind::Openai {
        return crate::provider::probe::judge(&ep, MODEL_TEST_SECS)
            .await
            .map(|j| j.line);
    }
    let cfg = ModelConfig {
        timeout_secs: MODEL_TEST_SECS,
        ..ModelConfig::default()
    };
    crate::cli::doctor::model_answers(&ep, &cfg)
        .await
        .map_err(Failed::from)
}

/// A failed channel test in words: a network failure named as one, a refusal as a refusal.
fn channel_problem(platform: &str, refused: &str, e: &ethan_channels::ChannelError) -> String {
    use ethan_channels::ChannelError;
    match e.cause() {
        ChannelError::Transport { message, .. } => {
            format!("cannot reach {platform}: network error: {message}")
        }
        ChannelError::Unauthorized { message, .. } => {
            format!("{platform} refuses {refused}: {message}")
        }
        other => format!("{platform} answers with an error: {other}"),
    }
}

async fn test_telegram(a: &Answers) -> anyhow::Result<String> {
    use ethan_channels::telegram::{TelegramChannel, TelegramConfig};
    use ethan_channels::Channel;
    let c = config_of(a)?;
    let problem = |e: &ethan_channels::ChannelError| {
        anyhow::anyhow!(channel_problem("Telegram", "the token", e))
    };
    let ch = TelegramChannel::new(TelegramConfig {
        poll_timeout_secs: 1,
        webhook_url: None,
        ..config::telegram_config(&c)
    })
    .map_err(|e| problem(&e))?;
    ch.probe().await.map_err(|e| problem(&e))
}

async fn test_lark(a: &Answers) -> anyhow::Result<String> {
    use ethan_channels::lark::api::ApiError;
    use ethan_channels::lark::LarkChannel;
    let c = config_of(a)?;
    let ch = LarkChannel::new(config::lark_config(&c))?;
    match ch.api().tenant_access_token().await {
        Ok(_) => Ok(format!(
            "tenant_access_token for app {} at {}",
            a.lark_app_id,
            ch.api().base_url()
        )),
        Err(ApiError::Transport { message, .. }) => {
            anyhow::bail!("cannot reach Lark: network error: {message}")
        }
        Err(e @ ApiError::Auth { .. }) => anyhow::bail!("Lark refuses the app: {e}"),
        Err(e) => anyhow::bail!("Lark answers with an error: {e}"),
    }
}

/// YAML double-quoted scalar (a JSON string is one).
fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The commented file.
fn render(a: &Answers) -> String {
    let mut out = String::from(
        "# Ethan's configuration, written by `ethan init`. Every key, with its default and what it\n\
         # does: config.example.yaml in the repository. `ethan doctor` checks this file.\n\
         # Any key can also be set with ETHAN__SECTION__KEY (e.g. ETHAN__MODEL__NAME).\n\n",
    );
    out.push_str("# The language model: an OpenAI-compatible Chat Completions endpoint.\nmodel:\n");
    out.push_str(&format!("  base_url: {}\n", q(&a.base_url)));
    if a.api_key.is_empty() {
        out.push_str("  # api_key: \"\"   # empty: OPENAI_API_KEY from the environment, or none\n");
    } else {
        out.push_str(&format!("  api_key: {}\n", q(&a.api_key)));
    }
    out.push_str(&format!("  name: {}\n", q(&a.name)));
    let tg = !a.telegram_token.is_empty();
    let lark = !a.lark_app_id.is_empty();
    if tg || lark {
        out.push_str("\n# The chats Ethan answers in.\nchannels:\n");
    } else {
        out.push_str(
            "\n# No chat channel yet: `ethan chat` works in the terminal. To add Telegram:\n\
             # channels:\n#   telegram:\n#     token: \"123456:ABC…\"   # from @BotFather\n",
        );
    }
    if tg {
        out.push_str("  telegram:\n    # From @BotFather.\n");
        out.push_str(&format!("    token: {}\n", q(&a.telegram_token)));
        if !a.telegram_api_url.is_empty() {
            out.push_str(&format!("    api_url: {}\n", q(&a.telegram_api_url)));
        }
        out.push_str("    # Who may DM the bot besides the owners: allowlist (owners + allow_from), owner_only, or open.\n    dm_policy: allowlist\n");
    }
    if lark {
        out.push_str("  lark:\n    # A self-built app (Credentials & Basic Info).\n");
        out.push_str(&format!("    app_id: {}\n", q(&a.lark_app_id)));
        out.push_str(&format!("    app_secret: {}\n", q(&a.lark_app_secret)));
        if !a.lark_base_url.is_empty() {
            out.push_str(&format!("    base_url: {}\n", q(&a.lark_base_url)));
        }
        out.push_str("    # Events arrive over a long connection: no public URL needed.\n    mode: websocket\n");
    }
    out.push_str(
        "\n# Who owns the bot (approves risky tool calls, may use every tool in chats).\n",
    );
    if a.owner.is_empty() {
        out.push_str("# Empty: run `ethan owner claim` and send the code it prints to the bot.\nowners: []\n");
    } else {
        out.push_str(&format!("owners:\n  - {}\n", q(&a.owner)));
    }
    out
}

/// Write `text` to `path` readable by the owner only (0600), its folder created 0700; in a
/// set-group-ID folder closed to others (the package's /etc/ethan, root:ethan 2750) the file
/// takes the folder's group and that group may read it (0640): the service's user reads the
/// config `sudo ethan init` wrote there, and cannot change it. Returns that group.
fn write_private(path: &Path, text: &str, replace: bool) -> anyhow::Result<Option<u32>> {
    use anyhow::Context;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let group = shared_group(dir);
    let mut o = std::fs::OpenOptions::new();
    o.write(true).mode(0o600);
    if replace {
        o.create(true).truncate(true);
    } else {
        o.create_new(true);
    }
    let mut f = o
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    // An existing file keeps its mode and group on open: set both before the keys go in. The
    // group reads it only once the file is surely that group's.
    let shared = group.filter(|&gid| std::os::unix::fs::fchown(&f, None, Some(gid)).is_ok());
    let mode = if shared.is_some() { 0o640 } else { 0o600 };
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    Ok(shared)
}

/// The group of a set-group-ID folder that others cannot enter, whose files are meant for it.
fn shared_group(dir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).ok()?;
    (m.mode() & 0o2000 != 0 && m.mode() & 0o007 == 0).then(|| m.gid())
}

/// The user a config written for a group is meant for: the user of the group's name (the
/// package's `ethan`, whose home is its `ETHAN_HOME`), if there is one.
struct ServiceUser {
    name: String,
    home: Option<PathBuf>,
}

impl ServiceUser {
    fn of_group(gid: u32) -> ServiceUser {
        use nix::unistd::{Gid, Group, User};
        let name = match Group::from_gid(Gid::from_raw(gid)) {
            Ok(Some(g)) => g.name,
            _ => gid.to_string(),
        };
        let home = User::from_name(&name).ok().flatten().map(|u| u.dir);
        ServiceUser { name, home }
    }
}

/// The commands to run next. For a config written for a service's user, run as that user with
/// its `ETHAN_HOME`: as root they would use root's own home.
fn next_steps(a: &Answers, path: &Path, service: Option<&ServiceUser>) {
    let config_flag = format!(" --config {}", path.display());
    let ethan = match service {
        Some(ServiceUser {
            name,
            home: Some(home),
        }) => format!(
            "sudo -u {name} ETHAN_HOME={} ethan{config_flag}",
            home.display()
        ),
        _ if path
            == config::home_dir()
                .map(|h| h.join("config.yaml"))
                .unwrap_or_default() =>
        {
            "ethan".to_string()
        }
        _ => format!("ethan{config_flag}"),
    };
    println!("Next:");
    println!("  {ethan} doctor      checks the setup");
    println!("  {ethan} chat        talks to the agent in this terminal");
    let chats = !a.telegram_token.is_empty() || !a.lark_app_id.is_empty();
    if chats && a.owner.is_empty() {
        println!("  {ethan} owner claim  prints a code; send it to the bot to become its owner");
    }
    if service.is_some() {
        println!("  sudo systemctl enable --now ethan      starts the service");
    } else if chats {
        println!("  {ethan} run         serves the chats");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_loads_as_written() {
        let a = Answers {
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key: "sk-\"quoted\"".into(),
            name: "m".into(),
            telegram_token: "1:abc".into(),
            owner: "telegram:42".into(),
            ..Answers::default()
        };
        let text = render(&a);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, &text).unwrap();
        let loaded = config::load(&config::LoadOptions {
            config_path: Some(path),
        })
        .unwrap();
        assert_eq!(loaded.config.model.api_key.expose(), "sk-\"quoted\"");
        assert_eq!(loaded.config.owners, vec!["telegram:42"]);
        assert_eq!(loaded.config.channels.telegram.token.expose(), "1:abc");
    }

    #[test]
    fn a_set_group_id_folder_closed_to_others_lends_its_group_read_access() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let mode_of = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
        let dir = tempfile::tempdir().unwrap();
        let folder = |name: &str, mode: u32| {
            let d = dir.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
            d.join("config.yaml")
        };
        // The package's /etc/ethan: the group reads the file, others nothing.
        let shared = folder("etc-ethan", 0o2750);
        let group = write_private(&shared, "a: 1\n", false).unwrap();
        assert_eq!(mode_of(&shared), 0o640);
        let gid = std::fs::metadata(dir.path().join("etc-ethan"))
            .unwrap()
            .gid();
        assert_eq!(std::fs::metadata(&shared).unwrap().gid(), gid);
        assert_eq!(group, Some(gid));
        // Replacing a file someone made readable to all makes it the group's again.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&shared, "a: 2\n", true).unwrap();
        assert_eq!(mode_of(&shared), 0o640);
        // Set-group-ID but open to others, or not set-group-ID: the owner only.
        for (name, mode) in [("open", 0o2755), ("plain", 0o750)] {
            let p = folder(name, mode);
            assert_eq!(write_private(&p, "a: 1\n", false).unwrap(), None);
            assert_eq!(mode_of(&p), 0o600, "{name}");
        }
    }

    #[test]
    fn owners_are_checked() {
        assert!(owner_ok("").is_ok());
        assert!(owner_ok("telegram:1").is_ok());
        assert!(owner_ok("lark:ou_x").is_ok());
        assert!(owner_ok("bob").is_err());
        assert!(owner_ok("telegram:abc").is_err());
    }
}
