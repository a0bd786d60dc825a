//! `ethan`: the command line. `run` starts the daemon; `chat` is a terminal session; `doctor`
//! checks the setup; `tools list` shows the tools. See README.md.
//!
//! In the library rather than in `src/main.rs`, which only calls [`main`]: the futures the
//! commands run (a chat's turn among them) are built once, here, and not a second time in the
//! binary's own crate (BENCHMARKS.md, "Binary size, round three's last cut").

use crate::{cli, config, daemon, logging};

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ethan",
    version,
    about = "An LLM agent in your chats, with governed tools"
)]
struct Cli {
    /// Config file (default: $ETHAN_CONFIG, else $ETHAN_HOME/config.yaml, ETHAN_HOME defaulting to ~/.ethan)
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// More log detail (debug for Ethan's own lines)
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Log filter, e.g. debug or ethan=trace,warn (wins over -v and RUST_LOG)
    #[arg(long, global = true, value_name = "FILTER")]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a first config file: asks for the model endpoint, chat channels and owner, and
    /// tests each (flags and --yes for scripts)
    Init(cli::init::InitArgs),
    /// Run the daemon: every configured channel. Stops on SIGINT/SIGTERM.
    Run,
    /// A terminal session with the agent (or one message with -m)
    Chat {
        /// Send one message, print the answer on stdout, and exit
        #[arg(short = 'm', long = "message", value_name = "TEXT")]
        message: Option<String>,
        /// Continue (or create) the named session instead of starting a new one
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
    },
    /// Whether a daemon runs (pid, uptime, version), its channels, turns in flight, approvals
    /// waiting, and the next scheduled runs
    Status,
    /// Check the config, the database, the model endpoint and the channel credentials
    Doctor,
    /// The HTTP gateway's API token
    Gateway {
        #[command(subcommand)]
        command: GatewayCommand,
    },
    /// Who owns the bot: claim, list, add, remove
    Owner {
        #[command(subcommand)]
        command: cli::owner::OwnerCommand,
    },
    /// The configured agents and which chats they answer
    Agents {
        #[command(subcommand)]
        command: ListCommand,
    },
    /// The skills: built-in and in $ETHAN_HOME/skills
    Skills {
        #[command(subcommand)]
        command: ListCommand,
    },
    /// What Ethan remembers (long-term memory): list, forget
    Memory {
        #[command(subcommand)]
        command: cli::memory::MemoryCommand,
    },
    /// The store: copy the SQLite store into PostgreSQL
    Store {
        #[command(subcommand)]
        command: cli::store::StoreCommand,
    },
    /// Show the newest tool-call audit entries (arguments redacted)
    Audit {
        /// How many entries
        #[arg(short = 'n', default_value_t = 20)]
        n: usize,
        /// Only this session key (e.g. telegram:123456)
        #[arg(long)]
        session: Option<String>,
    },
    /// Tokens used by model calls: per model, day or chat, over the last days
    Usage {
        /// How many local days, today included (1 to 36500)
        #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=36_500))]
        days: u32,
        /// What each row is
        #[arg(long, value_enum, default_value_t = cli::usage::By::Model)]
        by: cli::usage::By,
    },
    /// Scheduled jobs: list, remove, run now
    Jobs {
        #[command(subcommand)]
        command: cli::jobs::JobsCommand,
    },
    /// Inspect the tools
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// MCP servers: list each server's state and tools (starts and stops them; no daemon needed)
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

#[derive(Subcommand)]
enum ListCommand {
    /// List them
    List,
}

#[derive(Subcommand)]
enum McpCommand {
    /// Start each enabled server, list its tools with their risk, stop it
    List,
}

#[derive(Subcommand)]
enum GatewayCommand {
    /// Print the bearer token for /api/* and the web page (created and stored on first use)
    Token {
        /// Replace it with a new one (the old one stops working at once) and sign every web
        /// page out
        #[arg(long)]
        rotate: bool,
    },
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// List the registered tools (and skipped ones, with the reason)
    List {
        /// Only the tools exposed on this channel (terminal, telegram)
        #[arg(long)]
        channel: Option<String>,
    },
}

/// A file-size limit (`ulimit -f`, `RLIMIT_FSIZE`) must make a write fail with `EFBIG`, which
/// the code reports, instead of killing the daemon with `SIGXFSZ`.
fn ignore_sigxfsz() {
    // SAFETY: `signal` with `SIG_IGN` installs no handler code; it runs before any other thread.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

fn init(
    config: Option<PathBuf>,
    args: cli::init::InitArgs,
    redactor: &logging::Redactor,
) -> ExitCode {
    let result = cli::init::target(config).and_then(|path| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(cli::init::run(path, args))
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ethan: {}", redactor.redact(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// Whether stdin and stderr are both a terminal (a person is typing and reading).
fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The `ethan` binary's `main`.
pub fn main() -> ExitCode {
    // The sandbox helper (the same binary started again for one command or one file).
    crate::helper::main_if_helper();
    ignore_sigxfsz();
    let cli = Cli::parse();
    let default_filter = match cli.command {
        Command::Run => "ethan=info,ethan_channels=info,warn",
        _ => "ethan=warn,ethan_channels=warn,error",
    };
    let level = cli.log_level.clone().or_else(|| {
        cli.verbose
            .then(|| "ethan=debug,ethan_channels=debug,warn".to_string())
    });
    // An interactive chat keeps log lines out of the conversation: they go to daily files; so
    // does `chat -m`, whose stderr is for its one sentence, unless -v or --log-level asks for
    // them there.
    let log_dir = match &cli.command {
        Command::Chat { message: None, .. } if interactive() => {
            config::home_dir().ok().map(|h| h.join("logs"))
        }
        Command::Chat {
            message: Some(_), ..
        } if level.is_none() => config::home_dir().ok().map(|h| h.join("logs")),
        _ => None,
    };
    let to = log_dir
        .clone()
        .map_or(logging::LogTo::Stderr, logging::LogTo::Files);
    let redactor = match logging::init(default_filter, level.as_deref(), to) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ethan: {e}");
            return ExitCode::from(2);
        }
    };
    if let Command::Init(args) = cli.command {
        // Before any config is loaded: there may be none yet, or a broken one to replace.
        return init(cli.config, args, &redactor);
    }
    // The tool names are checked against the tools' catalog, which the config module does not
    // know.
    let loaded = match config::load_checked(
        &config::LoadOptions {
            config_path: cli.config.clone(),
        },
        crate::daemon::tool_setup::name_problems,
    ) {
        Ok(l) => l,
        Err(e) => {
            if matches!(cli.command, Command::Doctor) {
                for line in e.lines() {
                    println!("FAIL  config: {line}");
                }
            } else {
                eprintln!("ethan: {e}");
            }
            return ExitCode::from(2);
        }
    };
    redactor.set(loaded.secret_values());
    if let Some(dir) = &log_dir {
        logging::prune(dir, loaded.config.retention.log_days);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ethan: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let loaded = std::sync::Arc::new(loaded);
    let result = rt.block_on(async {
        match cli.command {
            Command::Run => daemon::run(loaded).await.map(|_| ExitCode::SUCCESS),
            // Handled before the config is loaded.
            Command::Init(_) => Ok(ExitCode::FAILURE),
            Command::Chat { message, session } => cli::chat::run(loaded, message, session).await,
            Command::Doctor => cli::doctor::run(loaded).await,
            Command::Status => cli::status::run(&loaded).await,
            Command::Gateway {
                command: GatewayCommand::Token { rotate },
            } => cli::gateway_token(&loaded, rotate).await,
            Command::Owner { command } => cli::owner::run(&loaded, command).await,
            Command::Store { command } => cli::store::run(&loaded, command).await,
            Command::Memory { command } => cli::memory::run(&loaded, command).await,
            Command::Agents {
                command: ListCommand::List,
            } => Ok(cli::agents::list_agents(&loaded)),
            Command::Skills {
                command: ListCommand::List,
            } => Ok(cli::agents::list_skills(&loaded)),
            Command::Audit { n, session } => {
                cli::audit::print(&loaded, n, session.as_deref()).await
            }
            Command::Jobs { command } => cli::jobs::run(loaded, command).await,
            Command::Usage { days, by } => cli::usage::print(&loaded, days, by).await,
            Command::Tools {
                command: ToolsCommand::List { channel },
            } => cli::tools::list(&loaded, channel.as_deref()).await,
            Command::Mcp {
                command: McpCommand::List,
            } => cli::mcp::list(&loaded).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ethan: {}", redactor.redact(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}
