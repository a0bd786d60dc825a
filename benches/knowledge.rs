//! Knowledge-base keyword search latency over 10,000 generated notes (`cargo bench --bench
//! knowledge`).
//!
//! Notes are written as real Markdown files (English and Chinese text with a Zipf-like word
//! distribution, 1–3 tags), indexed from scratch by `Knowledge::sync` into a real SQLite file,
//! then searched with several kinds of query. Prints the time to index and, per query kind, p50,
//! p99 and mean latency of `keyword_search(query, 5)`. The target is p50 under 5 ms.
//!
//! `KNOWLEDGE_BENCH_NOTES` overrides the note count; `KNOWLEDGE_BENCH_QUERIES` the queries per
//! kind.

use ethan::knowledge::notes::{slug, Note};
use ethan::knowledge::Knowledge;
use ethan::store::Store;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::time::{Duration, Instant};

const CONSONANTS: &[char] = &[
    'b', 'c', 'd', 'f', 'g', 'h', 'j', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'w', 'z',
];
const VOWELS: &[char] = &['a', 'e', 'i', 'o', 'u'];
const CODAS: &[char] = &['n', 'r', 's', 't', 'l'];
const CHINESE: &[&str] = &[
    "部署",
    "服务器",
    "数据库",
    "备份",
    "监控",
    "日志",
    "网络",
    "配置",
    "安全",
    "性能",
    "缓存",
    "队列",
    "容器",
    "集群",
    "测试",
    "发布",
    "回滚",
    "告警",
    "权限",
    "证书",
    "域名",
    "负载",
    "均衡",
    "存储",
    "索引",
    "查询",
    "事务",
    "迁移",
    "版本",
    "依赖",
    "构建",
    "编译",
    "脚本",
    "任务",
    "调度",
    "会议",
    "日程",
    "报告",
    "文档",
    "需求",
    "设计",
    "评审",
    "客户",
    "合同",
    "预算",
    "采购",
    "招聘",
    "培训",
    "流程",
    "审批",
    "周报",
    "复盘",
    "目标",
    "指标",
    "用户",
    "产品",
    "市场",
    "销售",
    "运营",
    "财务",
];

/// `n` distinct pseudo-words of one to three syllables from 400 syllables, so that their
/// trigrams are about as varied as those of real English words.
fn vocabulary(rng: &mut StdRng, n: usize) -> Vec<String> {
    let mut syllables = std::collections::BTreeSet::new();
    while syllables.len() < 400 {
        let mut s = String::new();
        s.push(CONSONANTS[rng.random_range(0..CONSONANTS.len())]);
        s.push(VOWELS[rng.random_range(0..VOWELS.len())]);
        match rng.random_range(0..3) {
            0 => {}
            1 => s.push(CONSONANTS[rng.random_range(0..CONSONANTS.len())]),
            _ => s.push(CODAS[rng.random_range(0..CODAS.len())]),
        }
        syllables.insert(s);
    }
    let syllables: Vec<String> = syllables.into_iter().collect();
    let mut words = std::collections::BTreeSet::new();
    while words.len() < n {
        let k = [1, 2, 2, 3][rng.random_range(0..4)];
        let w: String = (0..k)
            .map(|_| syllables[rng.random_range(0..syllables.len())].as_str())
            .collect();
        words.insert(w);
    }
    let mut v: Vec<String> = words.into_iter().collect();
    // Shuffle so the Zipf rank is unrelated to alphabetical order.
    for i in (1..v.len()).rev() {
        v.swap(i, rng.random_range(0..=i));
    }
    v
}

/// A Zipf-like pick: rank r with weight ~1/r.
fn zipf(rng: &mut StdRng, n: usize) -> usize {
    let x: f64 = rng.random_range(0.0..1.0);
    ((n as f64).powf(x) as usize).saturating_sub(1).min(n - 1)
}

fn text(rng: &mut StdRng, vocab: &[String], words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if rng.random_bool(0.2) {
            s.push_str(CHINESE[zipf(rng, CHINESE.len())]);
            if rng.random_bool(0.5) {
                s.push_str(CHINESE[zipf(rng, CHINESE.len())]);
            }
        } else {
            s.push_str(&vocab[zipf(rng, vocab.len())]);
        }
        s.push(if i % 12 == 11 { '\n' } else { ' ' });
    }
    s
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn main() {
    let notes: usize = std::env::var("KNOWLEDGE_BENCH_NOTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let per_kind: usize = std::env::var("KNOWLEDGE_BENCH_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let home = tempfile::tempdir().expect("temp dir");
    let root = home.path().join("knowledge");
    let mut rng = StdRng::seed_from_u64(42);
    let vocab = vocabulary(&mut rng, 8_000);
    let tags: Vec<String> = (0..30).map(|i| format!("topic{i}")).collect();

    let t = Instant::now();
    let mut bytes = 0usize;
    for i in 0..notes {
        let title_words = rng.random_range(3..=6);
        let title = text(&mut rng, &vocab, title_words)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let ntags = rng.random_range(1..=3);
        let note_tags: Vec<String> = (0..ntags)
            .map(|_| tags[rng.random_range(0..tags.len())].clone())
            .collect();
        let body_words = rng.random_range(60..=300);
        let note = Note {
            source: String::new(),
            title: title.clone(),
            tags: note_tags.clone(),
            created: "2026-01-01T00:00:00Z".into(),
            updated: "2026-01-01T00:00:00Z".into(),
            body: text(&mut rng, &vocab, body_words),
        };
        let dir = root.join(&note_tags[0]);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let rendered = ethan::knowledge::notes::render(&note);
        bytes += rendered.len();
        std::fs::write(dir.join(format!("{}-{i}.md", slug(&title))), rendered).expect("write");
    }
    let written = t.elapsed();

    let store = Store::open(&home.path().join("ethan.db")).expect("store");
    let k = Knowledge::open(&root, store, None).expect("knowledge");
    let t = Instant::now();
    let report = k.sync().expect("sync");
    let indexed = t.elapsed();
    assert_eq!(report.indexed, notes);
    let t = Instant::now();
    let again = k.sync().expect("sync");
    let rescan = t.elapsed();
    assert_eq!(again.indexed, 0);

    println!(
        "knowledge: {notes} notes ({:.1} MB) written in {:.2} s; indexed from scratch in {:.2} s; \
         unchanged start-up scan {} ms",
        bytes as f64 / 1e6,
        written.as_secs_f64(),
        indexed.as_secs_f64(),
        ms(rescan)
    );

    type Gen = Box<dyn Fn(&mut StdRng) -> String>;
    let word = {
        let v = vocab.clone();
        move |r: &mut StdRng| v[r.random_range(0..v.len())].clone()
    };
    let (w1, w2, w3) = (word.clone(), word.clone(), word.clone());
    let top = vocab.clone();
    let zh = |r: &mut StdRng| CHINESE[r.random_range(0..CHINESE.len())];
    let kinds: Vec<(&str, Gen)> = vec![
        ("english, 1 word", Box::new(move |r| w1(r))),
        (
            "english, 2 words",
            Box::new(move |r| format!("{} {}", w2(r), w2(r))),
        ),
        (
            "english, top-20 word (worst)",
            Box::new(move |r| top[r.random_range(0..20)].clone()),
        ),
        (
            "chinese, 2 chars",
            Box::new(move |r| loop {
                let w = zh(r);
                if w.chars().count() == 2 {
                    break w.to_string();
                }
            }),
        ),
        (
            "chinese, 3-4 chars",
            Box::new(move |r| {
                let w = zh(r);
                if w.chars().count() >= 3 {
                    w.to_string()
                } else {
                    format!("{w}{}", zh(r))
                }
            }),
        ),
        (
            "chinese sentence",
            Box::new(move |r| format!("如何{}{}的{}", zh(r), zh(r), zh(r))),
        ),
        (
            "english + chinese",
            Box::new(move |r| format!("{} {}", w3(r), zh(r))),
        ),
        (
            "no match",
            Box::new(|r| format!("xyzzy{}", r.random_range(0..1000))),
        ),
    ];

    println!();
    println!(
        "{:<32} {:>7} {:>9} {:>9} {:>9} {:>9}",
        "keyword query (limit 5)", "queries", "p50 ms", "p99 ms", "mean ms", "hits/q"
    );
    let mut all = Vec::new();
    for (name, gen) in &kinds {
        let mut times = Vec::with_capacity(per_kind);
        let mut hits = 0usize;
        // Warm up the statement cache and the page cache.
        for _ in 0..5 {
            let _ = k.keyword_search(&gen(&mut rng), 5);
        }
        for _ in 0..per_kind {
            let q = gen(&mut rng);
            let t = Instant::now();
            let r = k.keyword_search(&q, 5).expect("search");
            times.push(t.elapsed());
            hits += r.len();
        }
        all.extend(times.iter().copied());
        times.sort();
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        println!(
            "{:<32} {:>7} {:>9} {:>9} {:>9} {:>9.1}",
            name,
            times.len(),
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99)),
            ms(mean),
            hits as f64 / times.len() as f64
        );
    }
    all.sort();
    let mean = all.iter().sum::<Duration>() / all.len() as u32;
    println!(
        "{:<32} {:>7} {:>9} {:>9} {:>9}",
        "all",
        all.len(),
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.99)),
        ms(mean)
    );
    let p50 = percentile(&all, 0.5);
    println!(
        "\ntarget p50 < 5 ms: {}",
        if p50 < Duration::from_millis(5) {
            "met"
        } else {
            "NOT met"
        }
    );
}
