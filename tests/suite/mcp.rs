//! MCP servers through the real daemon, the fake Bot API and the scripted model, against real MCP
//! servers no one here wrote: `@modelcontextprotocol/server-everything` (over stdio and over its
//! streamable HTTP mode) and `mcp-server-time` (stdio), installed by `tests/tools/install.sh` and
//! run by path (no download at test time).
//!
//! In the owner's Telegram DM: a read-only tool runs without a question, a tool that is not
//! read-only asks and runs once approved, `get-env` shows none of the daemon's secrets; a
//! non-owner in a group never gets an `mcp__` tool; a killed server answers a dependency error and
//! is back within 30 s; a server whose command does not exist is logged once and the daemon runs
//! on; every MCP call has its audit row; `ethan mcp list` shows servers and tools with their risk,
//! and `ethan doctor` checks that each server starts; an MCP tool's description shown to the
//! model makes a `memory_save` ask the owner.

use crate::support::{run_cli, wait_until, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const STRANGER: i64 = 4242;
const GROUP: i64 = -100777;
const WAIT: Duration = Duration::from_secs(30);
/// How long a server may take to start and list its tools.
const READY: Duration = Duration::from_secs(60);

// ----- the installed servers -----------------------------------------------------------------

/// Paths of the servers `tests/tools/install.sh` installs.
struct Servers {
    everything: PathBuf,
    time: PathBuf,
}

/// Finds the installed servers (`ETHAN_TEST_TOOLS`, else `<repo>/target/test-tools`); fails,
/// saying how to install them, when they are missing.
fn servers() -> Servers {
    let dir = std::env::var_os("ETHAN_TEST_TOOLS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-tools"));
    let s = Servers {
        everything: dir.join("npm/node_modules/.bin/mcp-server-everything"),
        time: dir.join("venv/bin/mcp-server-time"),
    };
    for p in [&s.everything, &s.time] {
        assert!(
            p.is_file(),
            "{} is missing: the MCP tests need the real servers; run tests/tools/install.sh \
             (or set ETHAN_TEST_TOOLS to the directory it installed into)",
            p.display()
        );
    }
    s
}

fn everything_yaml(s: &Servers) -> String {
    format!(
        "    everything: {{ command: \"{}\", args: [] }}\n",
        s.everything.display()
    )
}

// ----- daemon, config, model requests --------------------------------------------------------

/// Writes a config with the model, Telegram (owner [`OWNER`]) and `servers` (YAML lines under
/// `mcp.servers`), then `extra`.
fn config(
    home: &TestHome,
    tg: &FakeTelegram,
    model: &ScriptedModel,
    api_key: &str,
    servers: &str,
    extra: &str,
) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: \"{api_key}\"\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n\
         mcp:\n  servers:\n{servers}{extra}",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
}

/// Starts the daemon with its own temp directory (so the workspace is not inside the system temp
/// directory) and `envs`.
fn start(home: &TestHome, envs: &[(&str, &str)]) -> Daemon {
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let tmp = tmp.to_str().unwrap().to_string();
    let mut all = vec![("TMPDIR", tmp.as_str())];
    all.extend_from_slice(envs);
    Daemon::start_with_env(home, &all)
}

/// Waits until the daemon logged that server `name` is up with its tools listed: a line naming
/// the server that says `ready` or counts `tools`, and is no warning or error.
async fn wait_ready(home: &TestHome, name: &str) {
    let ready = || {
        home.log().lines().any(|l| {
            let lower = l.to_lowercase();
            l.contains(name)
                && lower.contains("mcp")
                && (lower.contains("ready") || lower.contains(" tools"))
                && !lower.contains("error")
                && !lower.contains("fail")
                && !l.contains(" WARN ")
        })
    };
    let deadline = Instant::now() + READY;
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "MCP server {name:?} was not reported ready within {READY:?}; daemon.log:\n{}",
            home.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `(tool_call_id, content)` of every tool message of a request.
fn tool_results(req: &Value) -> Vec<(String, String)> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                content_text(&m["content"]),
            )
        })
        .collect()
}

fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

/// The content of the tool message answering `id` in `req`.
fn result_for(req: &Value, id: &str) -> String {
    tool_results(req)
        .into_iter()
        .find(|(i, _)| i == id)
        .map(|(_, c)| c)
        .unwrap_or_else(|| panic!("no tool result for {id} in {}", req["messages"]))
}

/// The tool names offered in a request.
fn offered(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The callback data of the newest inline keyboard sent.
fn approval_buttons(tg: &FakeTelegram) -> Vec<String> {
    tg.sent_messages()
        .iter()
        .rev()
        .find_map(|m| m["reply_markup"]["inline_keyboard"][0].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
        .collect()
}

fn group_mention(update_id: i64, user: i64, text: &str) -> Value {
    let text = format!("@ethan_test_bot {text}");
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 1700000000,
            "chat": {"id": GROUP, "type": "supergroup", "title": "team"},
            "from": {"id": user, "is_bot": false, "first_name": "U"},
            "text": text,
            "entities": [{"type": "mention", "offset": 0, "length": 15}],
        }
    })
}

/// `(tool, ok, error_kind)` of every audit row, in order.
fn audit_rows(home: &TestHome) -> Vec<(String, bool, Option<String>)> {
    crate::support::store::rows(
        home,
        "SELECT tool, ok, error_kind FROM audit ORDER BY id",
        &[],
    )
    .into_iter()
    .map(|r| {
        (
            r[0].clone().unwrap_or_default(),
            r[1].as_deref() == Some("1"),
            r[2].clone(),
        )
    })
    .collect()
}

// ----- processes -----------------------------------------------------------------------------

/// `(pid, command line)` of every live descendant of `root`.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut procs = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces, so read after the last ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid: u32 = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if state == "Z" {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        procs.push((pid, ppid, cmdline));
    }
    let mut found = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for (pid, ppid, cmd) in &procs {
            if *ppid == parent && !found.iter().any(|(p, _)| p == pid) {
                found.push((*pid, cmd.clone()));
                parents.push(*pid);
            }
        }
    }
    found
}

/// The pid of the daemon's descendant whose command line contains `needle`.
fn server_pid(daemon: &Daemon, needle: &str) -> Option<u32> {
    descendants(daemon.pid())
        .into_iter()
        .find(|(_, cmd)| cmd.contains(needle))
        .map(|(pid, _)| pid)
}

/// Whether `pid` is gone or a zombie.
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .map(|i| stat[i + 1..].split_whitespace().next() == Some("Z"))
            .unwrap_or(true),
    }
}

/// The local addresses (hex, as in `/proc/net/tcp{,6}`) of the sockets listening on `port`.
fn listening(port: u16) -> Vec<String> {
    let port = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .filter_map(|l| {
                    let fields: Vec<&str> = l.split_whitespace().collect();
                    let local = fields.get(1)?;
                    (fields.get(3) == Some(&"0A") && local.ends_with(&port))
                        .then(|| local.trim_end_matches(&port).to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Node preload: `listen(port, …)` without a host listens on 127.0.0.1.
const LOOPBACK_PRELOAD: &str = r#"
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if ((typeof port === "number" || (typeof port === "string" && /^[0-9]+$/.test(port)))
      && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
"#;

/// server-everything in streamable HTTP mode on a loopback port; killed when dropped.
struct HttpServer {
    child: Child,
    port: u16,
    stderr: PathBuf,
}

impl HttpServer {
    /// Starts it on a free port and waits until it says it listens (bounded).
    async fn start(s: &Servers, dir: &Path) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let stderr = dir.join("http-server.err");
        // The server listens on every interface (`app.listen(PORT)`, no host option): a preload
        // gives a bare port the loopback host, so the test stays on 127.0.0.1.
        let preload = dir.join("loopback-only.cjs");
        std::fs::write(&preload, LOOPBACK_PRELOAD).unwrap();
        let child = Command::new(&s.everything)
            .arg("streamableHttp")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("PORT", port.to_string())
            .env("NODE_OPTIONS", format!("--require {}", preload.display()))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start server-everything streamableHttp");
        let mut server = HttpServer {
            child,
            port,
            stderr,
        };
        let deadline = Instant::now() + READY;
        loop {
            let said = std::fs::read_to_string(&server.stderr).unwrap_or_default();
            if said.contains(&format!("listening on port {port}"))
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                let addrs = listening(port);
                assert_eq!(
                    addrs,
                    ["0100007F"],
                    "server-everything must listen on 127.0.0.1 only"
                );
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("server-everything streamableHttp exited ({status}): {said}");
            }
            assert!(
                Instant::now() < deadline,
                "server-everything streamableHttp did not listen on {port} within {READY:?}: {said}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ----- tests ---------------------------------------------------------------------------------

/// A read-only MCP tool (`echo`: `readOnlyHint: true`) runs without a question: it is not in the
/// first request, `find_tools` finds it, the model gets the echoed text, nothing asks on Telegram,
/// and the audit has its row under the server's name.
#[tokio::test(flavor = "multi_thread")]
async fn echo_is_read_only_and_runs_without_a_question() {
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("f1", "find_tools", r#"{"query": "echo"}"#),
        Step::tool_call(
            "e1",
            "mcp__everything__echo",
            r#"{"message": "parrot-words-7731"}"#,
        ),
        Step::echo_last_tool_result("said: "),
    ])
    .await;
    config(&home, &tg, &model, "sk-test", &everything_yaml(&s), "");
    let mut daemon = start(&home, &[]);
    wait_ready(&home, "everything").await;
    tg.push_text(OWNER, OWNER, "echo something");

    let sent = tg.wait_for_sent(1, WAIT).await;
    let reqs = model.wait_for_requests(3, WAIT).await;
    assert!(
        !offered(&reqs[0]).iter().any(|n| n.starts_with("mcp__")),
        "an MCP tool was sent up front: {:?}",
        offered(&reqs[0])
    );
    let found = result_for(&reqs[1], "f1");
    assert!(found.contains("mcp__everything__echo"), "{found}");
    assert!(
        offered(&reqs[1]).contains(&"mcp__everything__echo".to_string()),
        "{:?}",
        offered(&reqs[1])
    );
    let echoed = result_for(&reqs[2], "e1");
    assert!(echoed.contains("parrot-words-7731"), "{echoed}");
    assert!(!echoed.starts_with("Error"), "{echoed}");

    // No approval prompt: the one message sent is the answer, without a keyboard.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent_now = tg.sent_messages();
    assert_eq!(sent_now.len(), 1, "{}", tg.describe_calls());
    let text = sent[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("parrot-words-7731") && !text.contains("Approval needed"),
        "{text}"
    );
    assert!(sent[0]["reply_markup"].is_null(), "{:?}", sent[0]);
    model.assert_protocol_ok();

    let rows = audit_rows(&home);
    let mcp: Vec<_> = rows.iter().filter(|r| r.0.starts_with("mcp__")).collect();
    assert_eq!(mcp.len(), 1, "{rows:?}");
    assert_eq!(mcp[0].0, "mcp__everything__echo");
    assert!(mcp[0].1, "{rows:?}");
    daemon.stop();
    home.assert_no_panic();
}

/// A tool that is not read-only (`gzip-file-as-resource`: `readOnlyHint: false`) asks the owner
/// first, and runs once the owner presses Approve.
#[tokio::test(flavor = "multi_thread")]
async fn gzip_asks_and_runs_after_the_owner_approves() {
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let args = json!({
        "name": "note.txt.gz",
        "data": "data:text/plain;base64,aGVsbG8gd29ybGQ=",
    })
    .to_string();
    let model = ScriptedModel::start(vec![
        Step::tool_call("g1", "mcp__everything__gzip-file-as-resource", &args),
        Step::echo_last_tool_result("gz: "),
    ])
    .await;
    config(&home, &tg, &model, "sk-test", &everything_yaml(&s), "");
    let mut daemon = start(&home, &[]);
    wait_ready(&home, "everything").await;
    tg.push_text(OWNER, OWNER, "compress hello world");

    let sent = tg.wait_for_sent(1, WAIT).await;
    let ask = sent[0]["text"].as_str().unwrap_or_default();
    assert!(ask.contains("Approval needed"), "{ask}");
    assert!(ask.contains("gzip-file-as-resource"), "{ask}");
    // Nothing ran while the question waits.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(model.requests().len(), 1, "{}", model.describe());
    assert!(
        !audit_rows(&home)
            .iter()
            .any(|r| r.0.starts_with("mcp__") && r.1),
        "{:?}",
        audit_rows(&home)
    );

    let approve = approval_buttons(&tg)
        .into_iter()
        .find(|b| b.starts_with("ap:o:"))
        .expect("an approve-once button");
    tg.push_update(FakeTelegram::callback_update(
        tg.next_update_id(),
        OWNER,
        OWNER,
        &approve,
    ));
    let reqs = model.wait_for_requests(2, WAIT).await;
    let result = result_for(&reqs[1], "g1");
    assert!(!result.starts_with("Error"), "{result}");
    // The result is a resource link to the gzipped file: its name must reach the model.
    assert!(result.contains("note.txt.gz"), "{result}");
    tg.wait_for_sent(2, WAIT).await;
    model.assert_protocol_ok();

    let rows = audit_rows(&home);
    let mcp: Vec<_> = rows.iter().filter(|r| r.0.starts_with("mcp__")).collect();
    assert_eq!(mcp.len(), 1, "{rows:?}");
    assert_eq!(mcp[0].0, "mcp__everything__gzip-file-as-resource");
    assert!(mcp[0].1, "{rows:?}");
    daemon.stop();
    home.assert_no_panic();
}

/// `get-env` prints the server's whole environment: it holds the variable configured for the
/// server, and none of the daemon's secrets (model key, bot token, keys in the daemon's env).
#[tokio::test(flavor = "multi_thread")]
async fn get_env_shows_none_of_the_daemons_secrets() {
    const MODEL_KEY: &str = "sk-model-key-DO-NOT-LEAK-4711";
    const BOT_TOKEN: &str = "123456:BOTTOKEN-DO-NOT-LEAK-4712";
    const OPENAI_KEY: &str = "sk-openai-env-DO-NOT-LEAK-4713";
    const GITHUB_TOKEN: &str = "ghp_DO_NOT_LEAK_4714";
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start_with_token(BOT_TOKEN).await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("v1", "mcp__everything__get-env", "{}"),
        Step::text("looked"),
    ])
    .await;
    let server = format!(
        "    everything: {{ command: \"{}\", args: [], env: {{ MCP_TEST_MARKER: \"env-value-DO-NOT-LOG-4715\" }} }}\n",
        s.everything.display()
    );
    config(&home, &tg, &model, MODEL_KEY, &server, "");
    let mut daemon = start(
        &home,
        &[
            ("OPENAI_API_KEY", OPENAI_KEY),
            ("GITHUB_TOKEN", GITHUB_TOKEN),
        ],
    );
    wait_ready(&home, "everything").await;
    tg.push_text(OWNER, OWNER, "show the server's environment");

    let reqs = model.wait_for_requests(2, WAIT).await;
    let env = result_for(&reqs[1], "v1");
    assert!(!env.starts_with("Error"), "{env}");
    // It is the environment dump, with the server's configured variable, whose value (a secret
    // of the config, like a header) is redacted before the model sees it.
    assert!(env.contains("MCP_TEST_MARKER"), "{env}");
    assert!(!env.contains("env-value-DO-NOT-LOG-4715"), "{env}");
    for secret in [MODEL_KEY, BOT_TOKEN, OPENAI_KEY, GITHUB_TOKEN] {
        assert!(!env.contains(secret), "{secret} reached the server: {env}");
    }
    assert!(
        !env.contains("DO-NOT-LEAK") && !env.contains("DO_NOT_LEAK"),
        "{env}"
    );
    assert!(
        !env.contains("OPENAI_API_KEY") && !env.contains("GITHUB_TOKEN"),
        "{env}"
    );
    // Nor anywhere else the model was sent.
    let all = reqs[1].to_string();
    for secret in [MODEL_KEY, BOT_TOKEN, OPENAI_KEY, GITHUB_TOKEN] {
        assert!(!all.contains(secret), "{secret} in the model request");
    }
    tg.wait_for_sent(1, WAIT).await;
    daemon.stop();
    // A configured env value counts as a secret: not in the log.
    let log = home.log();
    assert!(
        !log.contains("env-value-DO-NOT-LOG"),
        "env value in daemon.log"
    );
    for secret in [MODEL_KEY, BOT_TOKEN, OPENAI_KEY, GITHUB_TOKEN] {
        assert!(!log.contains(secret), "{secret} in daemon.log");
    }
    home.assert_no_panic();
}

/// A non-owner in a group is offered no MCP tool, `find_tools` finds none for them, and a call
/// to one by name is refused; the owner, in the same daemon, finds them.
#[tokio::test(flavor = "multi_thread")]
async fn a_non_owner_in_a_group_never_gets_an_mcp_tool() {
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        // The stranger's turn.
        Step::tool_call("f1", "find_tools", r#"{"query": "*"}"#),
        Step::tool_call("f2", "find_tools", r#"{"query": "echo env gzip mcp"}"#),
        Step::tool_call(
            "e1",
            "mcp__everything__echo",
            r#"{"message": "stranger-words-8842"}"#,
        ),
        Step::text("group answer"),
        // The owner's turn.
        Step::tool_call("f3", "find_tools", r#"{"query": "*"}"#),
        Step::text("owner answer"),
    ])
    .await;
    config(&home, &tg, &model, "sk-test", &everything_yaml(&s), "");
    let mut daemon = start(&home, &[]);
    wait_ready(&home, "everything").await;
    tg.push_update(group_mention(
        tg.next_update_id(),
        STRANGER,
        "what tools do you have?",
    ));
    let reqs = model.wait_for_requests(4, WAIT).await;
    tg.wait_for_sent(1, WAIT).await;
    for (i, req) in reqs.iter().enumerate() {
        let names = offered(req);
        assert!(
            !names.iter().any(|n| n.starts_with("mcp__")),
            "request #{i} offered the stranger {names:?}"
        );
    }
    let all = result_for(&reqs[1], "f1");
    assert!(!all.contains("mcp__"), "find_tools * for a stranger: {all}");
    let some = result_for(&reqs[2], "f2");
    assert!(!some.contains("mcp__"), "find_tools for a stranger: {some}");
    let call = result_for(&reqs[3], "e1");
    assert!(call.starts_with("Error"), "{call}");
    assert!(
        !call.contains("stranger-words-8842"),
        "the call ran: {call}"
    );

    // The same daemon has the tools for its owner.
    tg.push_text(OWNER, OWNER, "and for me?");
    let reqs = model.wait_for_requests(6, WAIT).await;
    let owners = result_for(&reqs[5], "f3");
    assert!(owners.contains("mcp__everything__echo"), "{owners}");
    tg.wait_for_sent(2, WAIT).await;
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}

/// Killing the server's process: the next call answers a dependency error (the tool is still
/// known), and within 30 s a restarted server serves calls again. Every MCP call has one audit row
/// naming the server.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_answers_a_dependency_error_then_serves_again() {
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let echo = |id: &str, words: &str| {
        Step::tool_call(
            id,
            "mcp__everything__echo",
            &json!({ "message": words }).to_string(),
        )
    };
    let model = ScriptedModel::start(vec![
        echo("b1", "before-the-kill"),
        Step::echo_last_tool_result("r: "),
        echo("d1", "while-it-is-down"),
        Step::echo_last_tool_result("r: "),
    ])
    .await;
    config(&home, &tg, &model, "sk-test", &everything_yaml(&s), "");
    let mut daemon = start(&home, &[]);
    wait_ready(&home, "everything").await;
    tg.push_text(OWNER, OWNER, "echo before");
    let reqs = model.wait_for_requests(2, WAIT).await;
    let before = result_for(&reqs[1], "b1");
    assert!(before.contains("before-the-kill"), "{before}");
    tg.wait_for_sent(1, WAIT).await;
    let mut mcp_calls = 1;

    let old = server_pid(&daemon, "mcp-server-everything").unwrap_or_else(|| {
        panic!(
            "no server-everything process under the daemon: {:?}",
            descendants(daemon.pid())
        )
    });
    // Servers run in the workspace.
    let cwd = std::fs::read_link(format!("/proc/{old}/cwd")).unwrap();
    assert_eq!(cwd, home.path().join("workspace"));
    let status = Command::new("kill")
        .args(["-KILL", &old.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let killed_at = Instant::now();
    wait_until("the killed server is gone", WAIT, || is_dead(old)).await;

    tg.push_text(OWNER, OWNER, "echo while it is down");
    let reqs = model.wait_for_requests(4, WAIT).await;
    let down = result_for(&reqs[3], "d1");
    mcp_calls += 1;
    assert!(
        down.starts_with("Error (dependency)"),
        "a call to the killed server: {down}"
    );
    assert!(
        !down.contains("unknown") && !down.contains("no tool named"),
        "{down}"
    );
    tg.wait_for_sent(2, WAIT).await;

    // Within 30 s of the kill a call is served again (each try is one turn).
    let mut tries = 0;
    let served = loop {
        tries += 1;
        let id = format!("a{tries}");
        let before = model.requests().len();
        model.push_step(echo(&id, &format!("after-restart-{tries}")));
        model.push_step(Step::echo_last_tool_result("r: "));
        tg.push_text(OWNER, OWNER, &format!("echo again {tries}"));
        let reqs = model.wait_for_requests(before + 2, WAIT).await;
        mcp_calls += 1;
        tg.wait_for_sent(2 + tries, WAIT).await;
        let got = result_for(&reqs[before + 1], &id);
        if got.contains(&format!("after-restart-{tries}")) {
            break got;
        }
        assert!(
            got.starts_with("Error (dependency)"),
            "while restarting, try {tries}: {got}"
        );
        assert!(
            killed_at.elapsed() < Duration::from_secs(30),
            "the server was not serving again 30 s after the kill (last: {got}); daemon.log:\n{}",
            home.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(!served.starts_with("Error"), "{served}");
    let new = server_pid(&daemon, "mcp-server-everything").expect("a restarted server process");
    assert_ne!(new, old);

    let rows = audit_rows(&home);
    let mcp: Vec<_> = rows.iter().filter(|r| r.0.starts_with("mcp__")).collect();
    assert_eq!(mcp.len(), mcp_calls, "one audit row per MCP call: {rows:?}");
    assert!(
        mcp.iter().all(|r| r.0 == "mcp__everything__echo"),
        "{rows:?}"
    );
    assert!(
        mcp.iter()
            .any(|r| !r.1 && r.2.as_deref() == Some("dependency")),
        "the refused call is audited as a dependency error: {rows:?}"
    );
    assert!(mcp.last().unwrap().1, "{rows:?}");
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}

/// A server whose command does not exist: exactly one warning or error line names it (its retries
/// are quiet), and the daemon answers messages meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_whose_command_does_not_exist_is_logged_once_and_the_daemon_runs_on() {
    const GHOST: &str = "/nonexistent/ethan-mcp-ghost-server";
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::text("still answering")]).await;
    let servers = format!("    ghost: {{ command: \"{GHOST}\", args: [] }}\n");
    config(&home, &tg, &model, "sk-test", &servers, "");
    let mut daemon = start(&home, &[]);
    // Long enough for several restart attempts (the delay grows from the first seconds).
    tokio::time::sleep(Duration::from_secs(10)).await;
    tg.push_text(OWNER, OWNER, "are you there?");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["text"], "still answering", "{sent:?}");
    assert!(daemon.is_running());

    let log = home.log();
    let loud: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .filter(|l| l.contains("ghost") || l.contains(GHOST))
        .collect();
    assert_eq!(
        loud.len(),
        1,
        "expected one warning naming the server; got {loud:#?}\ndaemon.log:\n{log}"
    );
    assert!(
        loud[0].contains("ghost") && loud[0].contains(GHOST),
        "the line names the server and its command: {}",
        loud[0]
    );
    daemon.stop();
    home.assert_no_panic();
}

/// `mcp-server-time` over stdio: `get_current_time` answers (read-only, so no question), and
/// `tools.fast_path` can name it so it is sent up front.
#[tokio::test(flavor = "multi_thread")]
async fn the_time_server_answers_over_stdio() {
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "t1",
            "mcp__time__get_current_time",
            r#"{"timezone": "UTC"}"#,
        ),
        Step::echo_last_tool_result("time: "),
    ])
    .await;
    let servers = format!(
        "    time: {{ command: \"{}\", args: [] }}\n",
        s.time.display()
    );
    config(
        &home,
        &tg,
        &model,
        "sk-test",
        &servers,
        "tools:\n  fast_path: [mcp__time__get_current_time]\n",
    );
    let mut daemon = start(&home, &[]);
    wait_ready(&home, "time").await;
    tg.push_text(OWNER, OWNER, "what time is it in UTC?");
    let reqs = model.wait_for_requests(2, WAIT).await;
    assert!(
        offered(&reqs[0]).contains(&"mcp__time__get_current_time".to_string()),
        "tools.fast_path names it: {:?}",
        offered(&reqs[0])
    );
    let got = result_for(&reqs[1], "t1");
    assert!(!got.starts_with("Error"), "{got}");
    assert!(
        got.contains("UTC") && got.contains("datetime") && got.contains("day_of_week"),
        "{got}"
    );
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert!(
        !sent[0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Approval needed"),
        "{sent:?}"
    );
    let rows = audit_rows(&home);
    assert!(
        rows.iter()
            .any(|r| r.0 == "mcp__time__get_current_time" && r.1),
        "{rows:?}"
    );
    daemon.stop();
    home.assert_no_panic();
}

/// server-everything in its streamable HTTP mode, configured with `url:` and a header: a call
/// answers, and the header's value (a secret) is not in the daemon's log.
#[tokio::test(flavor = "multi_thread")]
async fn everything_over_streamable_http_answers() {
    const HEADER_SECRET: &str = "Bearer header-secret-DO-NOT-LOG-5151";
    let s = servers();
    let home = TestHome::new();
    let http = HttpServer::start(&s, home.path()).await;
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "h1",
            "mcp__remote__echo",
            r#"{"message": "over-http-3131"}"#,
        ),
        Step::echo_last_tool_result("r: "),
    ])
    .await;
    let servers = format!(
        "    remote: {{ url: \"{}\", headers: {{ Authorization: \"{HEADER_SECRET}\" }} }}\n",
        http.url()
    );
    config(&home, &tg, &model, "sk-test", &servers, "");
    let mut daemon = start(&home, &[]);
    wait_ready(&home, "remote").await;
    tg.push_text(OWNER, OWNER, "echo over http");
    let reqs = model.wait_for_requests(2, WAIT).await;
    let got = result_for(&reqs[1], "h1");
    assert!(got.contains("over-http-3131"), "{got}");
    tg.wait_for_sent(1, WAIT).await;
    let rows = audit_rows(&home);
    assert!(
        rows.iter().any(|r| r.0 == "mcp__remote__echo" && r.1),
        "{rows:?}"
    );
    daemon.stop();
    assert!(
        !home.log().contains("header-secret-DO-NOT-LOG"),
        "the header value is in daemon.log"
    );
    home.assert_no_panic();
}

/// `ethan mcp list` (no daemon running) starts each server, lists its tools with the risk words
/// of `ethan tools list`, and stops them.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_list_prints_servers_and_tools_with_their_risk() {
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![]).await;
    let servers = format!(
        "{}    time: {{ command: \"{}\", args: [] }}\n",
        everything_yaml(&s),
        s.time.display()
    );
    config(&home, &tg, &model, "sk-test", &servers, "");
    // The home lives until the command is done.
    let (out, _home) = tokio::task::spawn_blocking(move || {
        let out = run_cli(&home, &["mcp", "list"], None);
        (out, home)
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |tool: &str| -> String {
        text.lines()
            .find(|l| {
                l.split_whitespace().any(|w| {
                    w == tool
                        || w.strip_prefix("mcp__")
                            .and_then(|r| r.split_once("__"))
                            .is_some_and(|(_, t)| t == tool)
                })
            })
            .unwrap_or_else(|| panic!("no line for {tool} in:\n{text}"))
            .to_string()
    };
    assert!(text.contains("everything"), "{text}");
    assert!(text.contains("time"), "{text}");
    let echo = line("echo");
    assert!(echo.contains("read_only"), "{echo}");
    let gzip = line("gzip-file-as-resource");
    assert!(!gzip.contains("read_only"), "{gzip}");
    assert!(
        ["write", "exec", "dangerous"]
            .iter()
            .any(|w| gzip.split_whitespace().any(|x| x == *w)),
        "{gzip}"
    );
    let now = line("get_current_time");
    assert!(now.contains("read_only"), "{now}");
}

/// `ethan doctor` starts each server: one that lists its tools is ok, one whose command does not
/// exist fails, naming the command.
#[tokio::test(flavor = "multi_thread")]
async fn doctor_checks_that_each_server_starts_and_lists_tools() {
    const GHOST: &str = "/nonexistent/ethan-mcp-ghost-server";
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![]).await;
    let servers = format!(
        "{}    ghost: {{ command: \"{GHOST}\", args: [] }}\n",
        everything_yaml(&s)
    );
    config(&home, &tg, &model, "sk-test", &servers, "");
    let (out, _home) = tokio::task::spawn_blocking(move || {
        let out = run_cli(&home, &["doctor"], None);
        (out, home)
    })
    .await
    .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let line = |needle: &str| -> String {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} line in:\n{text}"))
            .to_string()
    };
    let everything = line("mcp everything");
    assert!(
        everything.starts_with("ok") && everything.contains("tools"),
        "{everything}"
    );
    let ghost = line("mcp ghost");
    assert!(
        ghost.starts_with("FAIL") && ghost.contains(GHOST),
        "{ghost}"
    );
}

/// `ethan chat -m` (no daemon) starts the servers and waits for their first start: the model's
/// first call to an MCP tool is served.
#[tokio::test(flavor = "multi_thread")]
async fn a_one_shot_chat_serves_an_mcp_call() {
    let s = servers();
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "mcp__everything__echo",
            r#"{"message": "one-shot-6262"}"#,
        ),
        Step::echo_last_tool_result("chat: "),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\nmcp:\n  servers:\n{}",
        model.base_url(),
        everything_yaml(&s)
    ));
    let (out, _home) = tokio::task::spawn_blocking(move || {
        let out = run_cli(&home, &["chat", "-m", "echo it"], None);
        (out, home)
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2, "{}", model.describe());
    let got = result_for(&reqs[1], "c1");
    assert!(
        got.contains("one-shot-6262") && !got.starts_with("Error"),
        "{got}"
    );
    assert!(stdout.contains("one-shot-6262"), "{stdout}");
    model.assert_protocol_ok();
}

/// An MCP tool's description is written by its server, so it can carry instructions as a page
/// can: with one sent up front, a `memory_save` of the owner's "fact" asks the owner, showing
/// it and why; approved, the fact is kept as confirmed by the owner.
#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_tools_description_makes_a_memory_save_ask() {
    let s = servers();
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("m1", "memory_save", r#"{"content": "Likes green tea."}"#),
        Step::text("saved it"),
    ])
    .await;
    let servers = format!(
        "    time: {{ command: \"{}\", args: [] }}\n",
        s.time.display()
    );
    config(
        &home,
        &tg,
        &model,
        "sk-test",
        &servers,
        "tools:\n  fast_path: [mcp__time__get_current_time]\n",
    );
    let mut daemon = start(&home, &[]);
    wait_ready(&home, "time").await;
    tg.push_text(OWNER, OWNER, "remember that I like green tea");
    let sent = tg.wait_for_sent(1, WAIT).await;
    let ask = sent[0]["text"].as_str().unwrap_or_default();
    assert!(
        ask.contains("Likes green tea.") && ask.contains("the description of mcp__time__"),
        "{ask}"
    );
    let once = sent[0]["reply_markup"]["inline_keyboard"][0]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["callback_data"].as_str())
        .find(|d| d.starts_with("ap:o:"))
        .unwrap()
        .to_string();
    tg.push_update(FakeTelegram::callback_update(
        tg.next_update_id(),
        OWNER,
        OWNER,
        &once,
    ));
    wait_until("the answer", WAIT, || {
        tg.sent_texts().iter().any(|t| t.contains("saved it"))
    })
    .await;
    daemon.stop();
    let out = run_cli(&home, &["memory", "list"], None);
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    let line = listed
        .lines()
        .find(|l| l.contains("Likes green tea."))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains("confirmed by the owner"), "{line}");
    model.assert_protocol_ok();
}
