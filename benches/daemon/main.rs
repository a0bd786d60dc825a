//! Whole-process figures of the release `ethan run` against loopback fakes: a Telegram Bot API
//! and an instant model ([`fake`]) and a Lark Open Platform with its long connection
//! (`tests/support/lark.rs`, the integration tests' fake, real pbbp2 frames).
//!
//! Figures (issue numbering): (1) idle RSS with Telegram and Lark connected, (2) startup from
//! exec to ready (first `getUpdates` at the fake and the Lark websocket connected), (3)
//! per-message overhead legs (answers streamed, as by default: Telegram drafts in private chats),
//! (4) throughput with every chat its own session and full persistence, (8) streaming: the
//! model's first chunk → the first draft at Telegram, (9) throughput of PostgreSQL replicas,
//! (10) RSS after many distinct chats and after their idle workers exited, (11) the model
//! request of a plain DM turn (OpenAI and Anthropic), and the release binary's size; (3L), (4L)
//! and (8L) are (3), (4) and (8) for @mentions in Lark groups ([`lark_path`]: a group sees only
//! the final answer, an ordinary reply card, or a CardKit card once a tool line shows). Governance overhead and history load are in-process figures (`cargo bench --bench
//! governance`, `--bench pipeline`); `benches/daemon.sh` runs all three.
//!
//! Needs `target/release/ethan` (or `$BENCH_BIN`): `cargo build --release` first.
//! Knobs: `BENCH_MESSAGES` (10000), `BENCH_CHATS` (1000) × `BENCH_PER_CHAT` (1), `BENCH_STARTS`
//! (20), `BENCH_IDLE_SECS` (30), `BENCH_STREAMED` (500 messages for (8)), `BENCH_REPLICAS`
//! ("1,2,3"), `BENCH_MANY_CHATS` (10000) and `BENCH_WORKER_WAIT` (320 s) for (10),
//! `BENCH_PG_BIN` (the binary of the replica runs, built with `--features postgres`; default:
//! the one under test), `BENCH_LARK_MESSAGES` (2000) and `BENCH_LARK_CHATS` (`BENCH_CHATS`) for
//! the Lark path, `BENCH_ANTHROPIC` (1; 0 skips the Anthropic run, for a binary without that
//! provider), `BENCH_HISTORY` (unset; `model.history_messages` of the daemon under test),
//! `BENCH_RATIO_TURNS` (300 turns in a long chat and 300 in fresh ones for the CPU ratio of (3)).
//! A count of 0 skips its run (`BENCH_STARTS`, `BENCH_IDLE_SECS`, `BENCH_MESSAGES`,
//! `BENCH_RATIO_TURNS`, `BENCH_STREAMED`, `BENCH_LARK_MESSAGES`, `BENCH_CHATS`,
//! `BENCH_LARK_CHATS`, `BENCH_MANY_CHATS`, `BENCH_WORKER_WAIT`), as do `BENCH_ANTHROPIC=0` and
//! an empty `BENCH_REPLICAS`: e.g. the window figures alone with all the others at 0.
//! Lines starting `FIGURE|` are for the summary of `daemon.sh`.

mod fake;
mod lark_path;
mod process;

#[path = "../../tests/support/lark.rs"]
#[allow(dead_code, clippy::all)]
mod lark;

use process::Daemon;
use std::path::Path;
use std::time::{Duration, Instant};

/// Seconds since the epoch (the Lark fake stamps its events with it).
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[idx]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// The value of a run, or a panic with its error and the daemon's log (`what`: which run).
fn or_log<T>(run: Result<T, String>, what: &str, log: &Path) -> T {
    run.unwrap_or_else(|e| {
        panic!(
            "{what}{e}; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        )
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// `p50 … ms, p99 … ms` of sorted microsecond samples.
fn p50_p99_ms(sorted_us: &[f64]) -> String {
    format!(
        "p50 {:.2} ms, p99 {:.2} ms",
        pct(sorted_us, 0.5) / 1e3,
        pct(sorted_us, 0.99) / 1e3
    )
}

/// One line of the summary: figure number, what, value, budget, and whether the budget was met
/// (`None`: a figure that is only reported).
fn figure(n: &str, what: &str, value: &str, budget: &str, met: Option<bool>) {
    let verdict = match met {
        Some(true) => "met",
        Some(false) => "missed",
        None => "reported",
    };
    println!("FIGURE|{n}|{what}|{value}|{budget}|{verdict}");
}

/// Daemon CPU per turn in a chat whose history fills the window (`BENCH_HISTORY`, else the
/// default 400 messages) and in fresh chats: `n` sequential turns each, all in private chats of
/// their own (not the owner's, so both see the same tools and prompt). Returns (long, fresh).
async fn cpu_long_vs_fresh(
    d: &Daemon,
    fakes: &fake::Fakes,
    n: usize,
    log: &Path,
) -> (Duration, Duration) {
    let window = std::env::var("BENCH_HISTORY")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(400);
    if n == 0 {
        return (Duration::ZERO, Duration::ZERO); // BENCH_RATIO_TURNS=0: skipped
    }
    let timeout = Duration::from_secs(10);
    let long_chat = fake::CHAT_BASE + 2_000_000;
    // Two stored messages a plain turn (the user's and the answer): fill the window first.
    let fill = fakes.sequential_in(|_| long_chat, window.div_ceil(2), timeout);
    or_log(fill.await, "filling the long chat: ", log);
    let cpu0 = d.cpu();
    let long = fakes.sequential_in(|_| long_chat, n, timeout);
    or_log(long.await, "the long chat: ", log);
    let long = d.cpu().saturating_sub(cpu0);
    let cpu0 = d.cpu();
    let fresh = fakes.sequential_in(|i| fake::CHAT_BASE + 3_000_000 + i as i64, n, timeout);
    or_log(fresh.await, "fresh chats: ", log);
    let fresh = d.cpu().saturating_sub(cpu0);
    let turns = n.max(1) as u32;
    (long / turns, fresh / turns)
}

/// `n` sequential tool turns in the owner's DM (one `file_read` of a 1 KB file each), after
/// whatever the chat already holds: their times from the update to the reply, in µs, sorted,
/// the daemon's CPU per turn, how many results showed the file's text, and the daemon's RSS
/// and anonymous memory (KiB) after them (the chat's window kept by its worker).
async fn tool_turns_in(
    d: &Daemon,
    home: &Path,
    fakes: &fake::Fakes,
    n: usize,
    log: &Path,
) -> (Vec<f64>, Duration, usize, (u64, u64)) {
    if n == 0 {
        return (Vec::new(), Duration::ZERO, 0, (0, 0));
    }
    let workspace = home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let text = format!("{}\n", fake::FILE_TEXT).repeat(40);
    std::fs::write(workspace.join(fake::FILE_READ_PATH), text).unwrap();
    let cpu0 = d.cpu();
    let legs = fakes.sequential_tool_turns(n, Duration::from_secs(10));
    let legs = or_log(legs.await, "tool turns: ", log);
    let cpu = d.cpu().saturating_sub(cpu0) / n as u32;
    let (rss, anon, _) = d.rss_kib();
    (sorted(legs.total), cpu, fakes.files_read(), (rss, anon))
}

/// `ethan run` with `provider: anthropic` against the same fakes on a fresh home: the size in
/// bytes of the Anthropic request of the owner's first DM turn (one element).
async fn anthropic_request_bytes(bin: &Path, work: &Path, fakes: &fake::Fakes) -> Vec<usize> {
    let home = work.join("anthropic");
    std::fs::create_dir_all(&home).unwrap();
    let yaml = format!(
        "model:\n  provider: anthropic\n  base_url: http://{}\n  api_key: sk-ant-bench\n  \
         name: bench-model\nowners: [\"telegram:{}\"]\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: http://{}\n    dm_policy: open\n\
         gateway:\n  listen: 127.0.0.1:0\n",
        fakes.model,
        fake::OWNER_CHAT,
        fake::TOKEN,
        fakes.telegram,
    );
    std::fs::write(home.join("config.yaml"), yaml).unwrap();
    let log = work.join("anthropic.log");
    fakes.reset_polls();
    let mut d = Daemon::spawn(bin, &home, &log);
    let deadline = Instant::now() + Duration::from_secs(30);
    while fakes.first_poll().is_none() {
        if let Some(status) = d.exited() {
            panic!(
                "ethan run (anthropic) exited ({status}); log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "ethan run (anthropic) did not poll in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let legs = fakes.sequential(1, Duration::from_secs(30)).await;
    d.stop();
    or_log(legs, "anthropic: ", &log).request_bytes
}

fn write_config(home: &Path, fakes: &fake::Fakes, lark: &lark::FakeLark) {
    std::fs::create_dir_all(home).unwrap();
    // `BENCH_HISTORY`: the history window (`model.history_messages`); unset, the default.
    let history = std::env::var("BENCH_HISTORY")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map(|n| format!("  history_messages: {n}\n"))
        .unwrap_or_default();
    let yaml = format!(
        "model:\n  base_url: http://{}/v1\n  api_key: sk-bench\n  name: bench-model\n{history}\
         owners: [\"telegram:{}\", \"lark:{}\"]\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: http://{}\n    dm_policy: open\n\
         {}gateway:\n  listen: 127.0.0.1:0\n",
        fakes.model,
        fake::OWNER_CHAT,
        lark_path::OWNER,
        fake::TOKEN,
        fakes.telegram,
        lark.channel_yaml("    dm_policy: open\n"),
    );
    std::fs::write(home.join("config.yaml"), yaml).unwrap();
}

/// A replica's config: Telegram only, the shared PostgreSQL store `url`.
fn write_replica_config(home: &Path, fakes: &fake::Fakes, url: &str) {
    std::fs::create_dir_all(home).unwrap();
    let yaml = format!(
        "model:\n  base_url: http://{}/v1\n  api_key: sk-bench\n  name: bench-model\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: http://{}\n    dm_policy: open\n\
         gateway:\n  listen: 127.0.0.1:0\nstore:\n  url: \"{url}\"\n",
        fakes.model,
        fake::TOKEN,
        fakes.telegram,
    );
    std::fs::write(home.join("config.yaml"), yaml).unwrap();
}

/// (9) `replicas` × `ethan run` on one fresh PostgreSQL database (the throwaway cluster of
/// `ethan::store::pg::cluster`), `chats` × `per_chat` messages queued at once through the one
/// Telegram poller: (replied, seconds, CPU of all replicas).
async fn replica_throughput(
    bin: &Path,
    work: &Path,
    fakes: &fake::Fakes,
    replicas: usize,
    chats: usize,
    per_chat: usize,
) -> (usize, f64, Duration) {
    let url = ethan::store::pg::cluster::fresh_database()
        .await
        .unwrap_or_else(|e| panic!("the PostgreSQL benchmark needs PostgreSQL: {e}"));
    fakes.reset_polls();
    let mut daemons = Vec::new();
    let first_log = work.join(format!("replicas-{replicas}-0.log"));
    for i in 0..replicas {
        let home = work.join(format!("replicas-{replicas}-{i}"));
        write_replica_config(&home, fakes, &url);
        let log = work.join(format!("replicas-{replicas}-{i}.log"));
        daemons.push(Daemon::spawn(bin, &home, &log));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while fakes.first_poll().is_none() {
        assert!(
            Instant::now() < deadline,
            "no replica polled Telegram in 60 s ({}); the first one's log:\n{}",
            bin.display(),
            std::fs::read_to_string(&first_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The other replicas are up too (they sweep for work from their start).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu0: Duration = daemons.iter().map(|d| d.cpu()).sum();
    let (replied, secs) = fakes.burst(chats, per_chat, Duration::from_secs(600)).await;
    let cpu1: Duration = daemons.iter().map(|d| d.cpu()).sum();
    for d in daemons {
        d.stop();
    }
    (replied, secs, cpu1.saturating_sub(cpu0))
}

/// Wait until Telegram polled and a new Lark connection is up; the later of the two instants.
async fn wait_ready(
    d: &mut Daemon,
    fakes: &fake::Fakes,
    lark: &lark::FakeLark,
    lark_before: usize,
    log: &Path,
) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lark_at = None;
    loop {
        if lark_at.is_none() && lark.connections() > lark_before {
            lark_at = Some(Instant::now());
        }
        if let (Some(tg), Some(lk)) = (fakes.first_poll(), lark_at) {
            return tg.max(lk);
        }
        if let Some(status) = d.exited() {
            panic!(
                "ethan run exited ({status}) before it was ready; log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "ethan run not ready in 30 s (telegram polled: {}, lark connected: {}); log:\n{}",
            fakes.first_poll().is_some(),
            lark_at.is_some(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_micros(250)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let messages = knob("BENCH_MESSAGES", 10_000);
    let chats = knob("BENCH_CHATS", 1_000);
    let per_chat = knob("BENCH_PER_CHAT", 1);
    let starts = knob("BENCH_STARTS", 20);
    let idle_secs = knob("BENCH_IDLE_SECS", 30) as u64;
    let streamed = knob("BENCH_STREAMED", 500);
    let many_chats = knob("BENCH_MANY_CHATS", 10_000);
    let worker_wait = knob("BENCH_WORKER_WAIT", 320) as u64;
    let lark_messages = knob("BENCH_LARK_MESSAGES", 2_000);
    let lark_chats = knob("BENCH_LARK_CHATS", chats);
    let bin = process::binary();
    // The replica runs need the PostgreSQL store: a binary built with `--features postgres`.
    let pg_bin = std::env::var_os("BENCH_PG_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| bin.clone());
    assert!(
        bin.exists(),
        "{} not found: run `cargo build --release` first (or set BENCH_BIN)",
        bin.display()
    );

    let fakes = fake::Fakes::start().await;
    let lark = lark::FakeLark::start().await;
    // Lark's own defaults (ping every 120 s), not the tests' fast ones.
    lark.set_client_config(serde_json::json!({
        "ReconnectCount": -1, "ReconnectInterval": 120, "ReconnectNonce": 30, "PingInterval": 120
    }));
    let work = tempfile::tempdir().expect("tempdir");
    let home = work.path().join("home");
    let log = work.path().join("daemon.log");
    write_config(&home, &fakes, &lark);

    // (2) startup
    eprintln!("[bench] startup: first run on a fresh home, then {starts} restarts");
    let mut startup_ms = Vec::new();
    let mut first_ms = 0.0;
    for i in 0..=starts {
        fakes.reset_polls();
        let before = lark.connections();
        let mut d = Daemon::spawn(&bin, &home, &log);
        let ready = wait_ready(&mut d, &fakes, &lark, before, &log).await;
        let ms = ready.duration_since(d.started).as_secs_f64() * 1e3;
        if i == 0 {
            first_ms = ms;
        } else {
            startup_ms.push(ms);
        }
        d.stop();
    }
    let startup_ms = sorted(startup_ms);

    // (1) idle memory
    eprintln!("[bench] idle: {idle_secs} s with Telegram and Lark connected, no traffic");
    fakes.reset_polls();
    let before = lark.connections();
    let mut d = Daemon::spawn(&bin, &home, &log);
    wait_ready(&mut d, &fakes, &lark, before, &log).await;
    tokio::time::sleep(Duration::from_secs(idle_secs)).await;
    let (idle_rss, idle_anon, idle_file) = d.rss_kib();
    let idle_cpu = d.cpu();

    // (3) per-message overhead
    eprintln!("[bench] per-message overhead: {messages} sequential messages, instant model");
    let seq_cpu0 = d.cpu();
    let legs = or_log(
        fakes.sequential(messages, Duration::from_secs(10)).await,
        "",
        &log,
    );
    let (rss_after_seq, _, _) = d.rss_kib();
    let seq_cpu = d.cpu().saturating_sub(seq_cpu0);

    // A turn with one tool call: `file_read` of a small file in the workspace, then the answer.
    let tool_turns = knob("BENCH_TOOL_TURNS", 300);
    eprintln!("[bench] tool turns: {tool_turns} sequential messages, one file_read each");
    let tool_legs = tool_turns_in(&d, &home, &fakes, tool_turns, &log).await;

    // CPU per turn: a long chat against fresh ones.
    let ratio_turns = knob("BENCH_RATIO_TURNS", 300);
    eprintln!(
        "[bench] CPU per turn: {ratio_turns} turns in a chat with a full window, \
         {ratio_turns} in fresh chats"
    );
    let (long_cpu, fresh_cpu) = cpu_long_vs_fresh(&d, &fakes, ratio_turns, &log).await;
    eprintln!(
        "[bench] CPU per turn: {:.3} ms in the long chat, {:.3} ms in fresh chats",
        long_cpu.as_secs_f64() * 1e3,
        fresh_cpu.as_secs_f64() * 1e3
    );

    // (8) streaming: the rest of the answer comes 50 ms after its first chunk, so the first
    // draft can only be the daemon's reaction to that chunk.
    eprintln!("[bench] streaming: {streamed} sequential messages, 50 ms between the chunks");
    fakes.set_chunk_gap(Duration::from_millis(50));
    let stream_legs = or_log(
        fakes.sequential(streamed, Duration::from_secs(10)).await,
        "",
        &log,
    );
    fakes.set_chunk_gap(Duration::ZERO);
    let first_update = sorted(stream_legs.first_update);

    // The Lark path: (3) and (8) for @mentions in groups, every answer a CardKit streaming card.
    eprintln!("[bench] Lark groups: {lark_messages} sequential @mentions, instant model");
    let mut groups = lark_path::Groups::new();
    let lark_legs = or_log(
        lark_path::sequential(
            &fakes,
            &lark,
            &mut groups,
            lark_messages,
            Duration::from_secs(10),
        )
        .await,
        "",
        &log,
    );
    eprintln!("[bench] Lark groups: {streamed} sequential @mentions, 50 ms between the chunks");
    fakes.set_chunk_gap(Duration::from_millis(50));
    let lark_stream = or_log(
        lark_path::sequential(
            &fakes,
            &lark,
            &mut groups,
            streamed,
            Duration::from_secs(10),
        )
        .await,
        "",
        &log,
    );
    fakes.set_chunk_gap(Duration::ZERO);

    // (4) throughput
    eprintln!("[bench] throughput: {chats} chats x {per_chat} messages queued at once");
    let (cpu0, own0) = (d.cpu(), process::own_cpu());
    let (replied, secs) = fakes.burst(chats, per_chat, Duration::from_secs(600)).await;
    let (cpu1, own1) = (d.cpu(), process::own_cpu());
    let (rss_after_burst, _, _) = d.rss_kib();
    let turns = chats * per_chat;
    eprintln!("[bench] Lark throughput: {lark_chats} groups x 1 @mention pushed at once");
    let lark_cpu0 = d.cpu();
    let (lark_replied, lark_secs) =
        lark_path::burst(&fakes, &lark, lark_chats, Duration::from_secs(600)).await;
    let lark_cpu = d.cpu().saturating_sub(lark_cpu0);
    // A plain DM turn's request: the owner's first message (system prompt, the tools sent up
    // front, one user message), default config; and the largest, with the history window full.
    let openai_bytes: Vec<usize> = legs.request_bytes.first().copied().into_iter().collect();
    let largest_request = legs.request_bytes.iter().max().copied().unwrap_or(0);

    // (10) memory after many distinct chats, and after their idle workers exited
    eprintln!("[bench] {many_chats} distinct chats x 1 message, then {worker_wait} s idle");
    let (many_replied, many_secs) = fakes
        .burst_at(
            fake::CHAT_BASE + 1_000_000,
            many_chats,
            1,
            Duration::from_secs(900),
        )
        .await;
    let (rss_many, anon_many, _) = d.rss_kib();
    tokio::time::sleep(Duration::from_secs(worker_wait)).await;
    let (rss_rested, anon_rested, _) = d.rss_kib();
    d.stop();

    // (11) request size with the Anthropic provider
    eprintln!("[bench] request size with provider: anthropic");
    let anthropic_bytes = if knob("BENCH_ANTHROPIC", 1) == 1 {
        anthropic_request_bytes(&bin, work.path(), &fakes).await
    } else {
        Vec::new()
    };

    // (9) replicas on PostgreSQL
    let counts: Vec<usize> = std::env::var("BENCH_REPLICAS")
        .unwrap_or_else(|_| "1,2,3".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let mut replica_runs = Vec::new();
    for &n in &counts {
        eprintln!("[bench] throughput on PostgreSQL, {n} replica(s): {chats} chats x {per_chat}");
        replica_runs.push((
            n,
            replica_throughput(&pg_bin, work.path(), &fakes, n, chats, per_chat).await,
        ));
    }

    let inbound = sorted(legs.inbound);
    let outbound = sorted(legs.outbound);
    let total = sorted(legs.total);
    let both = sorted(legs.both);
    let bin_bytes = std::fs::metadata(&bin).map(|m| m.len()).unwrap_or(0);
    let per_turn_ms = |cpu: Duration| cpu.as_secs_f64() * 1e3 / replied.max(1) as f64;

    println!();
    println!(
        "Ethan daemon benchmarks: {} cores, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bin.display()
    );
    println!(
        "(1) idle RSS after {idle_secs} s, Telegram + Lark connected: {:.1} MiB \
         (anon {:.1}, file-backed {:.1}); CPU used since exec {} ms",
        mib(idle_rss),
        mib(idle_anon),
        mib(idle_file),
        idle_cpu.as_millis()
    );
    println!(
        "(2) startup exec -> ready, median of {}: {:.1} ms (min {:.1}, max {:.1}); \
         first start on a fresh home {:.1} ms",
        startup_ms.len(),
        pct(&startup_ms, 0.5),
        startup_ms.first().copied().unwrap_or(f64::NAN),
        startup_ms.last().copied().unwrap_or(f64::NAN),
        first_ms
    );
    println!(
        "(3) n={messages}: update handed out -> model request p50 {:.0} µs p99 {:.0} µs; \
         model answer -> sendMessage p50 {:.0} µs p99 {:.0} µs; whole turn p50 {:.0} µs p99 {:.0} µs; \
         RSS after {:.1} MiB",
        pct(&inbound, 0.5),
        pct(&inbound, 0.99),
        pct(&outbound, 0.5),
        pct(&outbound, 0.99),
        pct(&total, 0.5),
        pct(&total, 0.99),
        mib(rss_after_seq)
    );
    println!(
        "(4) {chats} chats x {per_chat}: {replied}/{turns} replied in {secs:.2} s = {:.0} turns/s; \
         CPU per turn: daemon {:.3} ms, fakes {:.3} ms; RSS after {:.1} MiB",
        replied as f64 / secs.max(1e-9),
        per_turn_ms(cpu1 - cpu0),
        per_turn_ms(own1 - own0),
        mib(rss_after_burst)
    );
    println!(
        "(8) n={streamed}: model's first chunk -> first sendMessageDraft p50 {:.0} µs p99 {:.0} µs \
         ({} of {streamed} turns showed a draft)",
        pct(&first_update, 0.5),
        pct(&first_update, 0.99),
        first_update.len()
    );
    println!(
        "    release binary: {:.1} MiB ({bin_bytes} bytes)",
        bin_bytes as f64 / 1048576.0
    );

    figure(
        "1",
        "idle RSS, Telegram + Lark connected, after 30 s",
        &format!(
            "{:.1} MiB (anon {:.1}, file {:.1})",
            mib(idle_rss),
            mib(idle_anon),
            mib(idle_file)
        ),
        "<= 12 MiB, anon <= 4 MiB",
        Some(mib(idle_rss) <= 12.0 && mib(idle_anon) <= 4.0),
    );
    figure(
        "2",
        "startup, exec -> first getUpdates + Lark connected (median)",
        &format!(
            "{:.1} ms (min {:.1}; fresh home {:.1})",
            pct(&startup_ms, 0.5),
            startup_ms.first().copied().unwrap_or(f64::NAN),
            first_ms
        ),
        "<= 15 ms median",
        Some(pct(&startup_ms, 0.5) <= 15.0),
    );
    figure(
        "3",
        &format!("per-message overhead, n={messages}, streamed: update -> model request"),
        &p50_p99_ms(&inbound),
        "",
        None,
    );
    figure(
        "3",
        "model answer -> sendMessage",
        &p50_p99_ms(&outbound),
        "",
        None,
    );
    figure(
        "3",
        "both legs of the same message",
        &p50_p99_ms(&both),
        "p99 <= 2 ms",
        Some(pct(&both, 0.99) <= 2000.0),
    );
    figure(
        "3",
        &format!("daemon CPU per turn, {messages} turns in one chat (history growing)"),
        &format!(
            "{:.3} ms",
            seq_cpu.as_secs_f64() * 1e3 / messages.max(1) as f64
        ),
        "",
        None,
    );
    let long_ms = long_cpu.as_secs_f64() * 1e3;
    let fresh_ms = fresh_cpu.as_secs_f64() * 1e3;
    let ratio = long_ms / fresh_ms.max(1e-9);
    figure(
        "3",
        &format!(
            "daemon CPU per turn, a chat with a full history window (400 messages by default) \
             vs fresh chats, {ratio_turns} sequential turns each"
        ),
        &format!("{long_ms:.3} ms vs {fresh_ms:.3} ms: {ratio:.2}x"),
        "<= 1.2x",
        Some(fresh_ms > 0.0 && ratio <= 1.2),
    );
    let (tool_total, tool_cpu, files_read, (tool_rss, tool_anon)) = &tool_legs;
    figure(
        "3T",
        &format!(
            "a turn with one file_read, owner's DM, n={} ({files_read} read the file): \
             update -> reply (two model requests)",
            tool_total.len()
        ),
        &format!(
            "{}; daemon CPU {:.3} ms/turn; RSS after {:.1} MiB (anon {:.1})",
            p50_p99_ms(tool_total),
            tool_cpu.as_secs_f64() * 1e3,
            mib(*tool_rss),
            mib(*tool_anon)
        ),
        "",
        None,
    );
    figure(
        "4",
        &format!("throughput, {chats} sessions x {per_chat}, persisted"),
        &format!(
            "{:.0} turns/s ({replied}/{turns}); daemon CPU {:.3} ms/turn",
            replied as f64 / secs.max(1e-9),
            per_turn_ms(cpu1 - cpu0)
        ),
        ">= 2500 turns/s",
        Some(replied as f64 / secs.max(1e-9) >= 2500.0),
    );
    figure(
        "4",
        "daemon CPU per plain turn (DM -> reply, a fresh chat each)",
        &format!("{:.3} ms", per_turn_ms(cpu1 - cpu0)),
        "<= 1.0 ms",
        Some(per_turn_ms(cpu1 - cpu0) <= 1.0),
    );
    let one = replica_runs
        .iter()
        .find(|(n, _)| *n == 1)
        .map(|(_, (r, s, _))| *r as f64 / s.max(1e-9));
    for (n, (r, s, cpu)) in &replica_runs {
        let rate = *r as f64 / s.max(1e-9);
        let ratio = one.filter(|_| *n > 1).map(|one| rate / one);
        let vs = match ratio {
            Some(x) => format!(", {x:.2}x one replica"),
            None => String::new(),
        };
        figure(
            "9",
            &format!("throughput, {chats} sessions x {per_chat}, PostgreSQL, {n} replica(s)"),
            &format!(
                "{rate:.0} turns/s ({r}/{turns}){vs}; CPU of all replicas {:.3} ms/turn",
                cpu.as_secs_f64() * 1e3 / (*r).max(1) as f64
            ),
            if *n == 2 { ">= 1.5x one replica" } else { "" },
            if *n == 2 {
                ratio.map(|x| x >= 1.5)
            } else {
                None
            },
        );
    }
    figure(
        "8",
        &format!("streaming, n={streamed}: model's first chunk -> first draft (Telegram DM)"),
        &format!(
            "{} ({} of {streamed} drafts)",
            p50_p99_ms(&first_update),
            first_update.len()
        ),
        "p99 <= 25 ms",
        Some(!first_update.is_empty() && pct(&first_update, 0.99) <= 25_000.0),
    );
    let lark_both = sorted(lark_legs.both);
    figure(
        "3L",
        &format!("Lark groups, n={lark_messages}: event pushed -> model request"),
        &p50_p99_ms(&sorted(lark_legs.inbound)),
        "",
        None,
    );
    figure(
        "3L",
        "Lark: model answer complete -> final answer shown (reply, or card closed)",
        &p50_p99_ms(&sorted(lark_legs.outbound)),
        "",
        None,
    );
    figure(
        "3L",
        "Lark: both legs of the same message",
        &format!(
            "{} ({} of {lark_messages})",
            p50_p99_ms(&lark_both),
            lark_both.len()
        ),
        "p99 <= 2 ms",
        Some(lark_both.len() == lark_messages && pct(&lark_both, 0.99) <= 2000.0),
    );
    let lark_first = sorted(lark_stream.first_update);
    figure(
        "8L",
        &format!(
            "Lark groups, n={streamed}, 50 ms between the chunks: model's first chunk -> \
             first message shown (a group sees only the final answer)"
        ),
        &format!(
            "{} ({} of {streamed} answers)",
            p50_p99_ms(&lark_first),
            lark_first.len()
        ),
        "",
        None,
    );
    let lark_rate = lark_replied as f64 / lark_secs.max(1e-9);
    figure(
        "4L",
        &format!("Lark throughput, {lark_chats} groups x 1 @mention, persisted"),
        &format!(
            "{lark_rate:.0} turns/s ({lark_replied}/{lark_chats}); daemon CPU {:.3} ms/turn",
            lark_cpu.as_secs_f64() * 1e3 / lark_replied.max(1) as f64
        ),
        ">= 2500 turns/s",
        Some(lark_replied == lark_chats && lark_rate >= 2500.0),
    );
    figure(
        "10",
        &format!("RSS after {many_chats} distinct chats x 1 message"),
        &format!(
            "{:.1} MiB (anon {:.1}; {many_replied}/{many_chats} in {many_secs:.1} s)",
            mib(rss_many),
            mib(anon_many)
        ),
        "<= 64 MiB",
        Some(mib(rss_many) <= 64.0),
    );
    figure(
        "10",
        &format!("RSS {worker_wait} s later (idle session workers exited)"),
        &format!("{:.1} MiB (anon {:.1})", mib(rss_rested), mib(anon_rested)),
        "< 20 MiB",
        Some(mib(rss_rested) < 20.0),
    );
    for (provider, sizes) in [("openai", &openai_bytes), ("anthropic", &anthropic_bytes)] {
        let bytes = sizes.first().copied().unwrap_or(0);
        figure(
            "11",
            &format!("model request of the owner's first DM turn, default config, {provider}"),
            &format!("{:.2} KB ({bytes} bytes)", bytes as f64 / 1000.0),
            "<= 6 KB",
            Some(bytes > 0 && bytes <= 6000),
        );
    }
    figure(
        "11",
        &format!("largest model request of the {messages} turns in one chat (history window)"),
        &format!("{:.1} KB", largest_request as f64 / 1000.0),
        "",
        None,
    );
    figure(
        "7",
        "release binary size (stripped)",
        &format!(
            "{:.1} MiB ({bin_bytes} bytes)",
            bin_bytes as f64 / 1048576.0
        ),
        "<= 16 MiB",
        Some(bin_bytes as f64 / 1048576.0 <= 16.0),
    );
    assert_eq!(replied, turns, "some turns got no reply");
    assert_eq!(
        many_replied, many_chats,
        "some of the many chats got no reply"
    );
    for (n, (r, _, _)) in &replica_runs {
        assert_eq!(*r, turns, "{n} replica(s): some turns got no reply");
    }
}
