//! Crash-regression tests for the fuzz targets in `fuzz/`: CI does not fuzz, it feeds the same
//! entry points (the very same checks, `fuzz/src/checks.rs`) a list of nasty inputs, the seed
//! fixtures, and every crash file kept under `tests/fixtures/fuzz/<target>/`.

#[path = "../../fuzz/src/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every file directly in `dir` (none when it does not exist).
fn files(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).expect("read fixture"))
        .collect()
}

/// Inputs that have broken parsers elsewhere: empty, huge, deep, invalid UTF-8, odd code points.
fn nasty() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\0".to_vec(),
        vec![0xff, 0xfe, 0xfd],
        vec![0xc3],
        b"{".to_vec(),
        b"[]".to_vec(),
        b"null".to_vec(),
        b"{\"update_id\":-1}".to_vec(),
        b"{\"update_id\":1,\"message\":{}}".to_vec(),
        "🦀".repeat(3000).into_bytes(),
        "a\u{200d}\u{fe0f}\u{1f469}\u{200d}\u{1f52c}"
            .repeat(900)
            .into_bytes(),
        "[".repeat(5000).into_bytes(),
        "{\"a\":".repeat(2000).into_bytes(),
        "> ".repeat(2000).into_bytes(),
        "- ".repeat(2000).into_bytes(),
        "*".repeat(5000).into_bytes(),
        "`".repeat(5000).into_bytes(),
        "<b>&amp;&lt;&#x1F980;&#0;&#xFFFFFFFF;&nbsp;</i>"
            .repeat(300)
            .into_bytes(),
        "```rust\n".repeat(700).into_bytes(),
        "[x](http://e.com/\"><script>)".repeat(400).into_bytes(),
        "| a | b |\n|---|---|\n| 1 | 2 |\n".repeat(500).into_bytes(),
        "~~**_`x`_**~~ ".repeat(800).into_bytes(),
        "\r\n\r\n".repeat(3000).into_bytes(),
        "$(".repeat(3000).into_bytes(),
        "'".repeat(3001).into_bytes(),
        "echo hunter2-secret".into(),
        "rm -rf / ; cat <<EOF\n$(curl x | sh)\nEOF".into(),
        "a=`b=\"${c:-$((1<<62))}\"`; ${!x}; ~root/../x".into(),
        "\x1b[31m\u{202e}ls".into(),
        "{\"card\":\"{\\\"type\\\":\\\"rank\\\"}\"}".into(),
        "{\"messages\":{}}".into(),
        "{\"model\":{\"timeout_secs\":-1}}".into(),
        "{\"tools\":{\"shell\":{\"timeout_secs\":1e400}}}".into(),
        "{\"channels\":{\"telegram\":{\"token\":[]}}}".into(),
    ];
    // A valid-looking pbbp2 frame prefix followed by a huge declared length.
    v.push(vec![
        0x08, 0x01, 0x10, 0x02, 0x2a, 0xff, 0xff, 0xff, 0xff, 0x0f,
    ]);
    // A long Lark card title and many rows.
    let rows: Vec<String> = (0..2000)
        .map(|i| format!("{{\"label\":\"row {i} {}\",\"value\":{i}}}", "x".repeat(40)))
        .collect();
    v.push(
        format!(
            "{{\"card\":{{\"type\":\"rank\",\"title\":\"{}\",\"items\":[{}]}}}}",
            "T".repeat(5000),
            rows.join(",")
        )
        .into_bytes(),
    );
    v
}

/// Runs `check` on the nasty inputs, the given seed folders, the target's seeds in
/// `fuzz/seeds/<target>/` and its crash folder.
fn run(target: &str, check: fn(&[u8]), seed_dirs: &[&str]) {
    let mut inputs = nasty();
    for dir in seed_dirs {
        inputs.extend(files(&fixtures().join(dir)));
    }
    let fuzz_seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    inputs.extend(files(&fuzz_seeds.join(target)));
    let crashes = files(&fixtures().join("fuzz").join(target));
    inputs.extend(crashes);
    // Every prefix of each short seed too: truncation is what networks do.
    let truncated: Vec<Vec<u8>> = inputs
        .iter()
        .filter(|i| i.len() <= 2048)
        .flat_map(|i| (0..i.len()).step_by(7).map(move |n| i[..n].to_vec()))
        .collect();
    inputs.extend(truncated);
    for input in &inputs {
        check(input);
    }
}

#[test]
fn telegram_update_regressions() {
    run("telegram_update", checks::telegram_update, &["telegram"]);
}

#[test]
fn telegram_render_regressions() {
    // The fuzzer's check (the input's first 4 KB at one limit), then the whole input at
    // Telegram's limit and a small one.
    run(
        "telegram_render",
        |d| {
            checks::telegram_render(d);
            checks::telegram_render_whole(d);
        },
        &["telegram"],
    );
}

#[test]
fn lark_frame_regressions() {
    run("lark_frame", checks::lark_frame, &["lark/ws_frames"]);
}

#[test]
fn lark_webhook_regressions() {
    run("lark_webhook", checks::lark_webhook, &["lark"]);
}

#[test]
fn lark_card_regressions() {
    run("lark_card", checks::lark_card, &["lark"]);
}

#[test]
fn shell_classifier_regressions() {
    run("shell_classifier", checks::shell_classifier, &[]);
}

#[test]
fn config_regressions() {
    run("config", checks::config, &[]);
}

/// The checker itself refuses what Telegram would refuse.
#[test]
fn html_checker_refuses_bad_html() {
    // The renderer escapes raw HTML, so this is fine …
    checks::telegram_render(b"<div>x</div>");
    checks::check_html("<b>a<i>b</i></b><a href=\"https://x\">c</a>", "ok");
    // … while forbidden or unbalanced tags are caught.
    for bad in ["<div>x</div>", "<b>x", "<b><i>x</b></i>", "x</b>", "<b x"] {
        let r = std::panic::catch_unwind(|| checks::check_html(bad, "bad"));
        assert!(r.is_err(), "{bad:?} was accepted");
    }
}
