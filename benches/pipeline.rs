//! In-process pipeline figures.
//!
//! Store calls are awaited on a current-thread runtime: each one is a round trip to the store's
//! connection thread, as in the daemon.
//!
//! 1. History load: `Store::load_window` for a session holding 100,000 stored messages, on a real
//!    SQLite file (WAL), with the daemon's default window (`model.history_messages` = 50) and a
//!    larger one (200). p50/p99 over 1,000 loads after 100 warm-up loads. "+ JSON" also
//!    serialises the window the way a request body carries it (`serde_json::to_vec`).
//! 2. Turn persistence: `append_messages` of one user + one assistant message (one transaction,
//!    as a turn commits), p50/p99 over 2,000 appends.
//!
//! 3. Startup pieces (why idle RSS is what it is): wall time, bytes allocated and bytes still live
//!    after `Registry::builtin` (every built-in tool: JSON Schema meta-validation and compilation
//!    of each tool's parameters), measured with a counting global allocator, first call in the
//!    process (as at daemon start).
//!
//! Run: `cargo bench --bench pipeline`. Set `PIPELINE_MESSAGES` to change the history size.

use ethan::provider::types::{ChatMessage, Role};
use ethan::store::prelude::*;
use ethan::store::Store;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

/// Counts bytes allocated (total) and live, to attribute startup heap to its causes.
struct Counting;
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(l.size(), Relaxed);
        LIVE.fetch_add(l.size(), Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new, Relaxed);
        LIVE.fetch_add(new, Relaxed);
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` once; prints wall time, bytes allocated during it and bytes it left live.
fn startup_piece<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let (a0, l0) = (ALLOCATED.load(Relaxed), LIVE.load(Relaxed));
    let t = Instant::now();
    let out = f();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let (a1, l1) = (ALLOCATED.load(Relaxed), LIVE.load(Relaxed));
    println!(
        "{:<44} {:>8.1} ms {:>8.1} MiB allocated {:>8.2} MiB live",
        name,
        ms,
        (a1 - a0) as f64 / 1048576.0,
        (l1 as f64 - l0 as f64) / 1048576.0
    );
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[idx]
}

fn msg(role: Role, text: String) -> ChatMessage {
    ChatMessage {
        role,
        content: Some(text),
        tool_calls: Vec::new(),
        tool_call_id: None,
        opaque: None,
        is_error: false,
        images: Vec::new(),
        sent_at: None,
        derived: Default::default(),
    }
}

fn report(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    println!(
        "{:<44} {:>10.1} {:>10.1} {:>10.1} {:>7}",
        name,
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        mean,
        samples.len()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing special. Ignore args.
    let total: usize = std::env::var("PIPELINE_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    println!("startup pieces (first call in this process):");
    let schema = serde_json::json!({"type": "object", "properties": {"x": {"type": "string"}}});
    let first = startup_piece("ArgsValidator::compile (first in process)", || {
        ethan::tools::schema::ArgsValidator::compile(&schema)
    });
    drop(first);
    startup_piece("jsonschema::meta::validate (first call)", || {
        jsonschema::meta::validate(&schema).is_ok()
    });
    let config = ethan::config::Config::default();
    let registry = startup_piece("Registry::builtin (all tools)", || {
        ethan::daemon::tool_setup::registry(&config)
    });
    let again = startup_piece("Registry::builtin (second time)", || {
        ethan::daemon::tool_setup::registry(&config)
    });
    drop(again);
    // Attribute the registry's heap: each tool's compiled argument validator on its own, and the
    // tool objects themselves.
    let tools: Vec<_> = registry.iter().cloned().collect();
    drop(registry);
    for tool in &tools {
        let params = tool.decl().parameters.clone();
        let v = startup_piece(
            &format!("  ArgsValidator::compile({})", tool.decl().name),
            || ethan::tools::schema::ArgsValidator::compile(&params),
        );
        std::mem::forget(v);
    }
    for tool in &tools {
        let params = tool.decl().parameters.clone();
        startup_piece(&format!("  check_parameters({})", tool.decl().name), || {
            ethan::tools::schema::check_parameters(&params).is_ok()
        });
    }
    drop(tools);
    startup_piece("  Shell::new (shell tool object)", || {
        std::mem::forget(ethan::tools::shell::Shell::new(30))
    });
    println!();

    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("ethan.db")).expect("open store");
    // Store calls go to the connection thread and are awaited, as in the daemon.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    // A neighbouring session so the index is shared, as in a real database.
    let other = rt
        .block_on(store.current_session("telegram:dm:1"))
        .expect("session");
    let session = rt
        .block_on(store.current_session("telegram:dm:2"))
        .expect("session");
    let t = Instant::now();
    let batch = 1_000;
    let mut n = 0;
    while n < total {
        let msgs: Vec<ChatMessage> = (n..(n + batch).min(total))
            .map(|i| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                msg(
                    role,
                    format!(
                        "message {i}: the quick brown fox jumps over the lazy dog, \
                         a sentence long enough to look like a real chat line."
                    ),
                )
            })
            .collect();
        rt.block_on(store.append_messages(&session, &msgs))
            .expect("append");
        if n % 10_000 == 0 {
            rt.block_on(store.append_messages(&other, &msgs[..10]))
                .expect("append other");
        }
        n += msgs.len();
    }
    rt.block_on(store.checkpoint()).expect("checkpoint");
    eprintln!(
        "pipeline: stored {total} messages in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>7}",
        "figure", "p50 µs", "p99 µs", "mean µs", "n"
    );
    for window in [50usize, 200] {
        for _ in 0..100 {
            std::hint::black_box(
                rt.block_on(store.load_window(&session, window))
                    .expect("load"),
            );
        }
        let mut load = Vec::with_capacity(1_000);
        let mut with_json = Vec::with_capacity(1_000);
        for _ in 0..1_000 {
            let t = Instant::now();
            let w = rt
                .block_on(store.load_window(&session, window))
                .expect("load");
            load.push(t.elapsed().as_secs_f64() * 1e6);
            assert!(!w.is_empty() && w.len() <= window);
            let body = serde_json::to_vec(&w).expect("json");
            with_json.push(t.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(body);
        }
        report(&format!("load_window({window}) of {total} messages"), load);
        report(&format!("load_window({window}) + JSON body"), with_json);
    }

    let turn_session = rt
        .block_on(store.current_session("telegram:dm:3"))
        .expect("session");
    let mut appends = Vec::with_capacity(2_000);
    for i in 0..2_000 {
        let turn = [
            msg(Role::User, format!("hello {i}")),
            msg(Role::Assistant, format!("answer {i}")),
        ];
        let t = Instant::now();
        rt.block_on(store.append_messages(&turn_session, &turn))
            .expect("append");
        appends.push(t.elapsed().as_secs_f64() * 1e6);
    }
    report("append_messages(user + assistant), WAL", appends);
}
