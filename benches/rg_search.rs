//! `rg_search` against the `rg` program on a large generated tree.
//!
//! The tree (generated once per run in a temporary directory): 8,000 text files of 2–10 KB in
//! 200 directories (about 48 MB), plus a `.gitignore`d directory, a hidden directory and binary
//! files that must be skipped. Two searches, each finding fewer matching lines than
//! `max_results` (1000), so both sides read every file:
//! - `rare`: a literal found in about one file in twenty;
//! - `regex`: a case-insensitive regex with a character class.
//!
//! `rg` is timed as a process (`rg -i -n --no-heading PATTERN .`), so its figures include
//! process start-up (about 1–2 ms); `rg_search` is timed as the tool call, including the
//! output formatting. Run with `cargo bench --bench rg_search`; without `rg` installed only the
//! tool is measured.

use criterion::{criterion_group, criterion_main, Criterion};
use ethan::tools::rg_search::RgSearch;
use ethan::tools::{Tool, ToolContext};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const WORDS: &[&str] = &[
    "alpha", "beta", "gamma", "delta", "otter", "kelp", "coast", "survey", "river", "stone",
    "async", "await", "future", "thread", "buffer", "socket", "parser", "token", "config", "value",
    "result", "error", "option", "vector", "string", "number", "window", "signal",
];

/// A small deterministic generator (no seed file, same tree every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn generate(root: &Path) {
    let mut rng = Lcg(42);
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".gitignore"), "vendor/\n").unwrap();
    for d in 0..200usize {
        let dir = root.join(format!("pkg{:03}/src", d));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..40 {
            let mut body = String::new();
            let lines = 40 + rng.next() % 160;
            for l in 0..lines {
                let n = 4 + rng.next() % 10;
                for _ in 0..n {
                    body.push_str(WORDS[(rng.next() as usize) % WORDS.len()]);
                    body.push(' ');
                }
                if (d * 40 + f).is_multiple_of(20) && l == 7 {
                    body.push_str("needle_marker");
                }
                if rng.next().is_multiple_of(2000) {
                    body.push_str(&format!("Handler{}Error", rng.next() % 100));
                }
                body.push('\n');
            }
            std::fs::write(dir.join(format!("file{f:02}.rs")), body).unwrap();
        }
        // Binary files: skipped by both.
        std::fs::write(dir.join("blob.bin"), b"needle_marker\0\x01\x02\x03").unwrap();
    }
    // Ignored and hidden content: skipped by both.
    for i in 0..200 {
        let p = root.join(format!("vendor/v{i}.rs"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "needle_marker\n".repeat(50)).unwrap();
        let h = root.join(format!(".cache/c{i}.txt"));
        std::fs::create_dir_all(h.parent().unwrap()).unwrap();
        std::fs::write(h, "needle_marker\n".repeat(50)).unwrap();
    }
}

fn ctx(dir: &Path) -> ToolContext {
    ToolContext::local(dir.to_path_buf())
}

fn have_rg() -> bool {
    Command::new("rg")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    generate(root);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let ctx = ctx(root);
    let tool = RgSearch::new();
    let rg = have_rg();
    if !rg {
        eprintln!("NOTE: rg not installed; only rg_search is measured");
    }

    for (name, pattern) in [("rare", "needle_marker"), ("regex", r"handler\d+error")] {
        // Same matches on both sides (checked once, outside the timing).
        let out = rt.block_on(tool.run(json!({"pattern": pattern, "max_results": 1000}), &ctx));
        let out = out.unwrap_or_else(|e| panic!("{e:?}"));
        let ours = out.text.lines().filter(|l| !l.starts_with('[')).count();
        if rg {
            let o = Command::new("rg")
                .args([
                    "-i",
                    "-n",
                    "--no-heading",
                    "--no-config",
                    "--color",
                    "never",
                    pattern,
                    ".",
                ])
                .current_dir(root)
                .output()
                .unwrap();
            let theirs = String::from_utf8_lossy(&o.stdout).lines().count();
            assert_eq!(ours, theirs, "{name}: rg_search and rg disagree");
            eprintln!("{name}: {ours} matching lines");
        }

        let mut g = c.benchmark_group(format!("search_{name}"));
        g.sample_size(20)
            .warm_up_time(Duration::from_secs(2))
            .measurement_time(Duration::from_secs(8));
        g.bench_function("rg_search", |b| {
            b.iter(|| rt.block_on(tool.run(json!({"pattern": pattern, "max_results": 1000}), &ctx)))
        });
        if rg {
            g.bench_function("rg", |b| {
                b.iter(|| {
                    Command::new("rg")
                        .args([
                            "-i",
                            "-n",
                            "--no-heading",
                            "--no-config",
                            "--color",
                            "never",
                            pattern,
                            ".",
                        ])
                        .current_dir(root)
                        .output()
                        .unwrap()
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
