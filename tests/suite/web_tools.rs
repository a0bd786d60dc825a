//! The web and search tools against loopback fakes and the real `rg` / `fdfind` programs:
//! - `web_search` with DuckDuckGo (HTML), Tavily (JSON) and SearXNG (JSON) fakes, fallback,
//!   cooldown of a provider that keeps failing, and a config file edit taking effect without a
//!   restart;
//! - `web_fetch`: the SSRF guard (IP literals, a name resolving to a private address, a redirect
//!   from an allowed host to one that is not), readable text, plain text, binary refusal,
//!   charsets, redirects and the size cap;
//! - `rg_search` / `fd_find` on a generated tree (.gitignore, hidden files, a binary file,
//!   a symlink) compared with `rg` and `fdfind` (Debian packages `ripgrep`, `fd-find`, installed
//!   by `.ci/run`; without them the comparison is skipped with a notice, except under CI).

use crate::support::search_fakes::{tool_ctx, Behaviour, FakeProvider, FakeSite, Kind, TAVILY_KEY};
use ethan::config::watch::ConfigWatch;
use ethan::config::{LoadOptions, SearchProvider, Secret, WebFetchConfig, WebSearchConfig};
use ethan::egress::StaticLookup;
use ethan::tools::fd_find::FdFind;
use ethan::tools::rg_search::RgSearch;
use ethan::tools::web_fetch::WebFetch;
use ethan::tools::web_search::WebSearch;
use ethan::tools::{ErrorKind, Tool, ToolResult};
use serde_json::json;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Every tool call in these tests is bounded.
const CALL_LIMIT: Duration = Duration::from_secs(20);

async fn call(tool: &dyn Tool, args: serde_json::Value) -> ToolResult {
    let dir = std::env::temp_dir();
    tokio::time::timeout(CALL_LIMIT, tool.run(args, &tool_ctx(&dir)))
        .await
        .expect("tool call finished in time")
        .into()
}

async fn call_in(tool: &dyn Tool, dir: &Path, args: serde_json::Value) -> ToolResult {
    tokio::time::timeout(CALL_LIMIT, tool.run(args, &tool_ctx(dir)))
        .await
        .expect("tool call finished in time")
        .into()
}

fn search_cfg(provider: SearchProvider, fallback: &[SearchProvider]) -> WebSearchConfig {
    WebSearchConfig {
        provider,
        fallback: fallback.to_vec(),
        ..Default::default()
    }
}

fn search_tool(cfg: WebSearchConfig) -> WebSearch {
    WebSearch::new(cfg)
        .with_searxng_env(None)
        .with_request_timeout(Duration::from_secs(5))
}

fn error_text(r: &ToolResult) -> String {
    r.error.clone().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// web_search

#[tokio::test(flavor = "multi_thread")]
async fn duckduckgo_html_results() {
    let ddg = FakeProvider::start(Kind::DuckDuckGo).await;
    let mut cfg = search_cfg(SearchProvider::Duckduckgo, &[]);
    cfg.duckduckgo.base_url = ddg.base_url();
    let r = call(&search_tool(cfg), json!({"query": "rust async"})).await;
    assert!(r.ok, "{r:?}");
    assert!(
        r.output
            .starts_with("Results for \"rust async\" (DuckDuckGo):"),
        "{}",
        r.output
    );
    assert!(
        r.output.contains(
            "1. DuckDuckGo result 1 for rust async\n   https://example.com/duckduckgo/1\n   Snippet 1 about rust async."
        ),
        "{}",
        r.output
    );
    assert!(
        !r.output.contains("An ad"),
        "ads are left out: {}",
        r.output
    );
    assert_eq!(ddg.queries(), ["rust async"]);
    let r = call(
        &search_tool({
            let mut c = search_cfg(SearchProvider::Duckduckgo, &[]);
            c.duckduckgo.base_url = ddg.base_url();
            c
        }),
        json!({"query": "x", "max_results": 1}),
    )
    .await;
    assert_eq!(r.metadata["results"], 1, "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tavily_json_results_and_a_bad_key() {
    let tavily = FakeProvider::start(Kind::Tavily).await;
    let mut cfg = search_cfg(SearchProvider::Tavily, &[]);
    cfg.tavily.base_url = tavily.base_url();
    cfg.tavily.api_key = Secret::new(TAVILY_KEY);
    let r = call(&search_tool(cfg.clone()), json!({"query": "otters"})).await;
    assert!(r.ok, "{r:?}");
    assert!(r.output.contains("(Tavily)"), "{}", r.output);
    assert!(
        r.output.contains("Tavily result 2 for otters"),
        "{}",
        r.output
    );

    cfg.tavily.api_key = Secret::new("tvly-wrong");
    let r = call(&search_tool(cfg), json!({"query": "otters"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Dependency));
    assert!(
        error_text(&r).contains("Tavily: 401 invalid API key"),
        "{}",
        error_text(&r)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn searxng_json_results_and_the_json_format_hint() {
    let sx = FakeProvider::start(Kind::SearXng).await;
    let mut cfg = search_cfg(SearchProvider::Searxng, &[]);
    cfg.searxng.base_url = sx.base_url();
    let r = call(&search_tool(cfg.clone()), json!({"query": "kelp"})).await;
    assert!(r.ok, "{r:?}");
    assert!(
        r.output.contains("SearXNG result 1 for kelp"),
        "{}",
        r.output
    );

    sx.set(Behaviour::Fail(403));
    let r = call(&search_tool(cfg), json!({"query": "kelp"})).await;
    let e = error_text(&r);
    assert!(e.contains("SearXNG: 403"), "{e}");
    assert!(e.contains("JSON format"), "{e}");
    assert!(e.contains("settings.yml"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn falls_back_and_puts_a_failing_provider_aside() {
    let tavily = FakeProvider::start(Kind::Tavily).await;
    let ddg = FakeProvider::start(Kind::DuckDuckGo).await;
    tavily.set(Behaviour::Fail(500));
    let mut cfg = search_cfg(SearchProvider::Tavily, &[SearchProvider::Duckduckgo]);
    cfg.tavily.base_url = tavily.base_url();
    cfg.tavily.api_key = Secret::new(TAVILY_KEY);
    cfg.duckduckgo.base_url = ddg.base_url();
    let tool = search_tool(cfg).with_cooldown(2, Duration::from_secs(2));

    // Failure 1 and 2: Tavily is asked, DuckDuckGo answers.
    for n in 1..=2 {
        let r = call(&tool, json!({"query": "fallback"})).await;
        assert!(r.ok, "{r:?}");
        assert!(r.output.contains("(DuckDuckGo)"), "{}", r.output);
        assert!(r.output.starts_with("(Tavily: 500"), "{}", r.output);
        assert_eq!(tavily.hits(), n);
    }
    // Now Tavily is skipped: not asked at all.
    let r = call(&tool, json!({"query": "fallback"})).await;
    assert!(r.ok, "{r:?}");
    assert_eq!(tavily.hits(), 2, "a provider that keeps failing is skipped");
    assert_eq!(ddg.hits(), 3);
    assert_eq!(r.metadata["skipped"], json!(["Tavily"]), "{r:?}");
    assert!(!r.output.contains("Tavily"), "{}", r.output);

    // After the cooldown it is tried again, and a success clears its record.
    tavily.set(Behaviour::Answer);
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let r = call(&tool, json!({"query": "fallback"})).await;
    assert!(r.output.contains("(Tavily)"), "{}", r.output);
    assert_eq!(tavily.hits(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn captcha_and_unavailable_providers_are_reported() {
    let ddg = FakeProvider::start(Kind::DuckDuckGo).await;
    ddg.set(Behaviour::Captcha);
    // Tavily without a key and SearXNG without an instance are not available.
    let mut cfg = search_cfg(
        SearchProvider::Duckduckgo,
        &[SearchProvider::Tavily, SearchProvider::Searxng],
    );
    cfg.duckduckgo.base_url = ddg.base_url();
    let r = call(&search_tool(cfg), json!({"query": "q"})).await;
    assert!(!r.ok);
    let e = error_text(&r);
    assert!(
        e.contains("DuckDuckGo: HTTP 202, DuckDuckGo asked for a CAPTCHA"),
        "{e}"
    );
    assert!(e.contains("Tavily: no API key"), "{e}");
    assert!(e.contains("SearXNG: no instance configured"), "{e}");

    // A provider that is down is a connection error, clearly named.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cfg = search_cfg(SearchProvider::Searxng, &[]);
    cfg.searxng.base_url = format!("http://127.0.0.1:{port}");
    let r = call(&search_tool(cfg), json!({"query": "q"})).await;
    assert!(error_text(&r).contains("SearXNG: cannot connect"), "{r:?}");

    let r = call(
        &search_tool(WebSearchConfig::default()),
        json!({"query": "  "}),
    )
    .await;
    assert_eq!(r.error_kind, Some(ErrorKind::Validation));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_file_edit_takes_effect_without_a_restart() {
    let ddg = FakeProvider::start(Kind::DuckDuckGo).await;
    let sx = FakeProvider::start(Kind::SearXng).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "tools:\n  web_search:\n    provider: duckduckgo\n    duckduckgo: {{ base_url: \"{}\" }}\n",
            ddg.base_url()
        ),
    )
    .unwrap();
    let loaded = ethan::config::load(&LoadOptions {
        config_path: Some(path.clone()),
    })
    .expect("config loads");
    let tool = WebSearch::watching(Arc::new(ConfigWatch::new(&loaded))).with_searxng_env(None);

    let r = call(&tool, json!({"query": "live"})).await;
    assert!(r.output.contains("(DuckDuckGo)"), "{r:?}");

    // The owner switches to SearXNG; the same tool instance follows.
    std::fs::write(
        &path,
        format!(
            "tools:\n  web_search:\n    provider: searxng\n    fallback: []\n    searxng: {{ base_url: \"{}\" }}\n",
            sx.base_url()
        ),
    )
    .unwrap();
    let r = call(&tool, json!({"query": "live"})).await;
    assert!(r.output.contains("(SearXNG)"), "{r:?}");
    assert_eq!((ddg.hits(), sx.hits()), (1, 1));

    // A broken edit is refused; the last good settings stay in force.
    std::fs::write(&path, "tools:\n  web_search:\n    provider: altavista\n").unwrap();
    let r = call(&tool, json!({"query": "live"})).await;
    assert!(r.output.contains("(SearXNG)"), "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// web_fetch: the SSRF guard

fn fetch_cfg(allow_private: &[&str]) -> WebFetchConfig {
    WebFetchConfig {
        allow_private: allow_private.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn ssrf_ip_literals_are_refused() {
    let site = FakeSite::start().await;
    let tool = WebFetch::new(&fetch_cfg(&[]))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    for (url, why) in [
        ("http://127.0.0.1/".to_string(), "loopback"),
        (site.url("/article.html"), "loopback"),
        ("http://[::1]/".to_string(), "loopback"),
        (format!("http://[::1]:{}/", site.port()), "loopback"),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "metadata",
        ),
        ("http://[fd00:ec2::254]/".to_string(), "metadata"),
        ("http://10.0.0.1/".to_string(), "private"),
        ("http://100.100.100.200/".to_string(), "CGNAT"),
        ("http://[::ffff:127.0.0.1]/".to_string(), "loopback"),
        ("http://2130706433/".to_string(), "loopback"),
    ] {
        let r = call(&tool, json!({ "url": url })).await;
        assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{url}: {r:?}");
        let e = error_text(&r);
        assert!(e.contains(why), "{url}: {e}");
        assert!(e.contains("tools.web_fetch.allow_private"), "{e}");
    }
    assert!(site.requested().is_empty(), "{:?}", site.requested());
}

#[tokio::test(flavor = "multi_thread")]
async fn ssrf_a_name_resolving_to_a_private_address_is_refused() {
    let site = FakeSite::start().await;
    let lookup = StaticLookup::new()
        .with("intranet.test", &[ip("10.20.30.40")])
        .with("sneaky.test", &[ip("127.0.0.1")])
        .with("metadata.test", &[ip("169.254.169.254")]);
    let tool = WebFetch::with_lookup(&fetch_cfg(&[]), Arc::new(lookup))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    for (url, why) in [
        (
            "http://intranet.test/".to_string(),
            "intranet.test (10.20.30.40) is a private address",
        ),
        (
            format!("http://sneaky.test:{}/article.html", site.port()),
            "sneaky.test (127.0.0.1) is a loopback address",
        ),
        (
            "http://metadata.test/".to_string(),
            "the cloud metadata address",
        ),
    ] {
        let r = call(&tool, json!({ "url": url })).await;
        assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{url}: {r:?}");
        assert!(error_text(&r).contains(why), "{}", error_text(&r));
    }
    assert!(
        site.requested().is_empty(),
        "no connection was made: {:?}",
        site.requested()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ssrf_a_redirect_from_an_allowed_host_to_one_that_is_not_is_refused() {
    let site = FakeSite::start().await;
    let port = site.port();
    // fake.test is listed in allow_private and resolves to the loopback fake; localhost is not
    // listed, and neither is 127.0.0.1.
    let lookup = StaticLookup::new()
        .with("fake.test", &[ip("127.0.0.1")])
        .with("localhost", &[ip("127.0.0.1")]);
    let tool = WebFetch::with_lookup(&fetch_cfg(&["fake.test"]), Arc::new(lookup))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));

    // Allowed host, allowed redirect (same host): fine.
    let r = call(
        &tool,
        json!({"url": format!("http://fake.test:{port}/redirect?to=/notes.txt")}),
    )
    .await;
    assert!(r.ok, "{r:?}");

    for target in [
        format!("http://127.0.0.1:{port}/secret"),
        format!("http://localhost:{port}/secret"),
        format!("http://[::1]:{port}/secret"),
    ] {
        let r = call(
            &tool,
            json!({"url": format!("http://fake.test:{port}/redirect?to={target}")}),
        )
        .await;
        assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{target}: {r:?}");
        let e = error_text(&r);
        assert!(e.contains("redirected to"), "{e}");
        assert!(e.contains("loopback"), "{e}");
    }
    assert!(
        !site.requested().iter().any(|p| p == "/secret"),
        "the refused target was never requested: {:?}",
        site.requested()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_private_read_a_redirect_to_another_site_is_not_followed() {
    let site = FakeSite::start().await;
    let port = site.port();
    let lookup = StaticLookup::new()
        .with("fake.test", &[ip("127.0.0.1")])
        .with("other.test", &[ip("127.0.0.1")]);
    let tool = WebFetch::with_lookup(&fetch_cfg(&["fake.test", "other.test"]), Arc::new(lookup))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    let dir = tempfile::tempdir().unwrap();
    let hop =
        format!("http://fake.test:{port}/redirect?to=http://other.test:{port}/notes.txt?d=SECRET");
    // Nothing private read yet: the redirect is followed as usual…
    let fresh = tool_ctx(dir.path());
    let r: ethan::tools::ToolResult = tool.run(json!({ "url": hop }), &fresh).await.into();
    assert!(r.ok, "{r:?}");
    // …and what a host exempt from the SSRF guard returned is private for later calls.
    assert!(
        fresh
            .taint
            .source()
            .is_some_and(|s| s.contains("fake.test")),
        "{:?}",
        fresh.taint.source()
    );
    // After a private read the approval covered fake.test only: other.test is not contacted.
    let before = site.requested().len();
    let ctx = tool_ctx(dir.path());
    ctx.taint.mark("file_read");
    let r: ethan::tools::ToolResult = tool.run(json!({ "url": hop }), &ctx).await.into();
    assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{r:?}");
    let e = error_text(&r);
    assert!(
        e.contains("not followed") && e.contains("other.test"),
        "{e}"
    );
    assert_eq!(site.requested().len(), before + 1, "{:?}", site.requested());
    // The same site still redirects within itself.
    let same = format!("http://fake.test:{port}/redirect?to=/notes.txt");
    assert!(tool.run(json!({ "url": same }), &ctx).await.is_ok());
}

#[test]
fn a_look_alike_host_is_shown_as_sent() {
    let tool = WebFetch::new(&fetch_cfg(&[]))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    let ctx = tool_ctx(std::path::Path::new("/tmp"));
    let e = tool
        .describe(&json!({"url": "https://g\u{456}thub.com/x?d=1"}), &ctx)
        .egress
        .unwrap();
    assert!(e.destination.contains("xn--"), "{}", e.destination);
    assert!(e.scope.contains("xn--"), "{}", e.scope);
    let plain = tool
        .describe(&json!({"url": "https://github.com/x?d=1"}), &ctx)
        .egress
        .unwrap();
    assert_eq!(
        plain.destination,
        "GET https://github.com/x?d=1 (host: github.com)"
    );
    let userinfo = tool
        .describe(&json!({"url": "https://github.com@evil.example/x"}), &ctx)
        .egress
        .unwrap();
    assert!(
        userinfo.destination.ends_with("(host: evil.example)"),
        "{}",
        userinfo.destination
    );
}

// ---------------------------------------------------------------------------------------------
// web_fetch: content

#[tokio::test(flavor = "multi_thread")]
async fn fetches_readable_text_plain_text_and_refuses_binary() {
    let site = FakeSite::start().await;
    let tool = WebFetch::new(&fetch_cfg(&["127.0.0.1"]))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));

    let r = call(&tool, json!({"url": site.url("/article.html")})).await;
    assert!(r.ok, "{r:?}");
    assert!(
        r.output
            .starts_with("# Otters of the Northern Coast\n\nSource: http://127.0.0.1:"),
        "{}",
        r.output
    );
    assert!(
        r.output
            .contains("Sea otters spend most of their lives in the water"),
        "{}",
        r.output
    );
    assert!(
        r.output.contains("more\nthan two thousand otters")
            || r.output.contains("more than two thousand otters"),
        "{}",
        r.output
    );
    assert!(!r.output.contains("do not show this"), "{}", r.output);
    assert!(!r.output.contains("font-family"), "{}", r.output);
    assert!(!r.output.contains("<p>"), "{}", r.output);
    assert_eq!(r.metadata["title"], "Otters of the Northern Coast");

    let r = call(&tool, json!({"url": site.url("/notes.txt")})).await;
    assert_eq!(
        r.output,
        crate::support::search_fakes::PLAIN_TEXT,
        "non-HTML text as is"
    );
    let r = call(&tool, json!({"url": site.url("/data.json")})).await;
    assert_eq!(r.output, r#"{"a": [1, 2, 3]}"#);

    let r = call(&tool, json!({"url": site.url("/image.png")})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Validation), "{r:?}");
    assert!(
        error_text(&r).contains("binary content (image/png"),
        "{}",
        error_text(&r)
    );
    let r = call(&tool, json!({"url": site.url("/blob")})).await;
    assert!(
        error_text(&r).contains("binary content (application/octet-stream"),
        "{}",
        error_text(&r)
    );

    let r = call(&tool, json!({"url": site.url("/missing")})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Dependency));
    assert!(error_text(&r).contains("HTTP 404"), "{r:?}");

    let r = call(&tool, json!({"url": site.url("/loop")})).await;
    assert!(error_text(&r).contains("more than 10 redirects"), "{r:?}");

    let r = call(&tool, json!({"url": "ftp://127.0.0.1/x"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn decodes_charsets() {
    let site = FakeSite::start().await;
    let tool = WebFetch::new(&fetch_cfg(&["127.0.0.1"]))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    let r = call(&tool, json!({"url": site.url("/gbk.html")})).await;
    assert!(r.ok, "{r:?}");
    assert!(r.output.starts_with("# 中文标题"), "{}", r.output);
    assert!(
        r.output.contains("这是一个用 GBK 编码的网页"),
        "{}",
        r.output
    );
    assert_eq!(r.metadata["charset"], "GBK");

    let r = call(&tool, json!({"url": site.url("/latin1.txt")})).await;
    assert_eq!(r.output, "Crème brûlée à la française\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_download_is_capped() {
    let site = FakeSite::start().await;
    let tool = WebFetch::new(&fetch_cfg(&["127.0.0.1"]))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()))
        .with_max_bytes(1000);
    let r = call(&tool, json!({"url": site.url("/big.txt")})).await;
    assert!(r.ok, "{r:?}");
    assert!(
        r.output.starts_with(&"0123456789".repeat(100)),
        "{}",
        r.output
    );
    assert!(
        r.output.contains("[the download stopped at 1000 bytes"),
        "{}",
        r.output
    );
    assert_eq!(r.metadata["truncated"], true);
}

// ---------------------------------------------------------------------------------------------
// rg_search and fd_find against rg and fdfind

/// A tree with what the walk must get right: .gitignore (root and nested), hidden files and
/// directories, `.git`, a binary file with a match before its NUL byte, a symlink, UTF-8 text,
/// upper and lower case.
fn generate_tree(root: &Path) {
    let w = |rel: &str, contents: &[u8]| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, contents).unwrap();
    };
    w(".git/HEAD", b"ref: refs/heads/main\n");
    w(".git/config", b"[core]\n\tneedle = true\n");
    w(".gitignore", b"ignored/\n*.log\n/build\n");
    w("ignored/a.txt", b"needle in an ignored dir\n");
    w("app.log", b"needle in a log\n");
    w("build/out.rs", b"// needle in build output\n");
    w(".hidden/inside.txt", b"needle in a hidden dir\n");
    w(".hiddenfile", b"needle in a hidden file\n");
    w(
        "src/main.rs",
        b"fn main() {\n    // Needle: the first one\n    println!(\"needle\");\n}\n",
    );
    w("src/lib.rs", b"pub fn needles() -> usize { 2 }\n");
    w(
        "docs/README.md",
        b"# Docs\nA NEEDLE in upper case.\nno match here\n",
    );
    w("docs/naïve.txt", "naïve needle — ünïcödé\n".as_bytes());
    w(
        "data/blob.bin",
        b"needle before a NUL\0\x01\x02needle after\n",
    );
    w("data/image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    w("nested/.gitignore", b"*.tmp\n");
    w("nested/keep.txt", b"needle kept\n");
    w("nested/drop.tmp", b"needle dropped\n");
    w("nested/deep/er/file.py", b"# needle\nx = 'needle'\n");
    for i in 0..40 {
        let body = format!(
            "line {i}\nneedle {i}\nother\n{}\n",
            if i % 3 == 0 { "needle again" } else { "" }
        );
        w(&format!("many/f{i:02}.txt"), body.as_bytes());
    }
    std::os::unix::fs::symlink("src/main.rs", root.join("link.rs")).unwrap();
}

/// Whether `program` can be run; under CI its absence is a failure.
fn have(program: &str) -> bool {
    let ok = std::process::Command::new(program)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is required under CI (.ci/run installs it)"
        );
        eprintln!(
            "NOTE: {program} not installed; comparison skipped (apt-get install ripgrep fd-find)"
        );
    }
    ok
}

fn run_program(program: &str, args: &[&str], cwd: &Path) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(cwd)
        .env_remove("RIPGREP_CONFIG_PATH")
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    // rg exits 1 when nothing matched.
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{program} {args:?}: {out:?}"
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `path:line:text` lines of rg, as a set of (path, line, text).
fn rg_lines(out: &str) -> BTreeSet<(String, u64, String)> {
    out.lines()
        .filter_map(|l| {
            let (path, rest) = l.split_once(':')?;
            let (line, text) = rest.split_once(':')?;
            Some((
                path.trim_start_matches("./").to_string(),
                line.parse().ok()?,
                text.to_string(),
            ))
        })
        .collect()
}

/// `path:line: text` lines of rg_search (notes in brackets left out).
fn tool_lines(out: &str) -> BTreeSet<(String, u64, String)> {
    out.lines()
        .filter(|l| !l.starts_with('['))
        .filter_map(|l| {
            let (path, rest) = l.split_once(':')?;
            let (line, text) = rest.split_once(": ")?;
            Some((path.to_string(), line.parse().ok()?, text.to_string()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rg_search_matches_rg() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    generate_tree(root);
    let tool = RgSearch::new();

    let r = call_in(
        &tool,
        root,
        json!({"pattern": "needle", "max_results": 1000}),
    )
    .await;
    assert!(r.ok, "{r:?}");
    let ours = tool_lines(&r.output);
    // What must be in and out, whatever rg says.
    assert!(ours.iter().any(|(p, _, _)| p == "src/main.rs"));
    assert!(ours
        .iter()
        .any(|(p, _, t)| p == "docs/naïve.txt" && t.contains("ünïcödé")));
    for skipped in [
        "ignored/",
        "app.log",
        "build/",
        ".hidden",
        ".git/",
        "data/blob.bin",
        "nested/drop.tmp",
        "link.rs",
    ] {
        assert!(
            !ours.iter().any(|(p, _, _)| p.starts_with(skipped)),
            "{skipped} in {ours:?}"
        );
    }

    if !have("rg") {
        return;
    }
    let cases: &[(serde_json::Value, &[&str])] = &[
        (json!({"pattern": "needle"}), &["-i", "needle"]),
        (
            json!({"pattern": "needle", "case_sensitive": true}),
            &["needle"],
        ),
        (
            json!({"pattern": "Needle|NEEDLE", "case_sensitive": true}),
            &["Needle|NEEDLE"],
        ),
        (
            json!({"pattern": "needle", "file_type": "rust"}),
            &["-i", "-t", "rust", "needle"],
        ),
        (json!({"pattern": "needle \\d+$"}), &["-i", "needle \\d+$"]),
        (
            json!({"pattern": "needle", "path": "nested"}),
            &["-i", "needle", "nested"],
        ),
    ];
    for (args, rg_args) in cases {
        let mut args = args.clone();
        args["max_results"] = json!(1000);
        let r = call_in(&tool, root, args.clone()).await;
        assert!(r.ok, "{r:?}");
        let mut full = vec![
            "--no-heading",
            "--line-number",
            "--color",
            "never",
            "--no-config",
        ];
        full.extend_from_slice(rg_args);
        let theirs = rg_lines(&run_program("rg", &full, root));
        assert!(!theirs.is_empty(), "{args}");
        assert_eq!(
            tool_lines(&r.output),
            theirs,
            "rg_search {args} vs rg {rg_args:?}"
        );
    }

    // max_results cuts the list, and says so.
    let r = call_in(&tool, root, json!({"pattern": "needle", "max_results": 5})).await;
    assert_eq!(tool_lines(&r.output).len(), 5);
    assert!(
        r.output
            .contains("[showing 5 matching lines; there are more"),
        "{}",
        r.output
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn fd_find_matches_fdfind() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    generate_tree(root);
    let tool = FdFind::new();

    let paths = |out: &str| -> BTreeSet<String> {
        out.lines()
            .filter(|l| !l.starts_with('[') && !l.is_empty())
            .map(|l| l.trim_start_matches("./").trim_end_matches('/').to_string())
            .collect()
    };
    let r = call_in(&tool, root, json!({"pattern": "", "max_results": 1000})).await;
    assert!(r.ok, "{r:?}");
    let ours = paths(&r.output);
    assert!(
        ours.contains("data/blob.bin"),
        "binary files are listed: {ours:?}"
    );
    assert!(ours.contains("link.rs"), "symlinks are listed: {ours:?}");
    assert!(
        r.output.contains("\nsrc/\n"),
        "directories end in /: {}",
        r.output
    );
    for skipped in [
        "app.log",
        "ignored",
        ".hidden",
        ".git",
        "nested/drop.tmp",
        "build",
    ] {
        assert!(!ours.contains(skipped), "{skipped} in {ours:?}");
    }

    if !have("fdfind") {
        return;
    }
    let cases: &[(serde_json::Value, &[&str])] = &[
        (json!({"pattern": ""}), &[]),
        (json!({"pattern": "main|lib"}), &["main|lib"]),
        (json!({"pattern": "readme"}), &["readme"]),
        (json!({"pattern": "README"}), &["README"]),
        (json!({"pattern": "^f\\d+"}), &["^f\\d+"]),
        (json!({"pattern": "", "file_type": "f"}), &["-t", "f"]),
        (json!({"pattern": "", "file_type": "d"}), &["-t", "d"]),
        (json!({"pattern": "", "file_type": "l"}), &["-t", "l"]),
        (json!({"pattern": "", "extension": "rs"}), &["-e", "rs"]),
        (
            json!({"pattern": "e", "extension": "txt", "file_type": "f"}),
            &["-e", "txt", "-t", "f", "e"],
        ),
        (json!({"pattern": "", "path": "nested"}), &[".", "nested"]),
    ];
    for (args, fd_args) in cases {
        let mut args = args.clone();
        args["max_results"] = json!(1000);
        let r = call_in(&tool, root, args.clone()).await;
        assert!(r.ok, "{r:?}");
        let mut full = vec!["--color", "never"];
        full.extend_from_slice(fd_args);
        let theirs = paths(&run_program("fdfind", &full, root));
        assert!(!theirs.is_empty(), "{args}");
        assert_eq!(
            paths(&r.output),
            theirs,
            "fd_find {args} vs fdfind {fd_args:?}"
        );
    }

    let r = call_in(&tool, root, json!({"pattern": "", "max_results": 3})).await;
    assert_eq!(paths(&r.output).len(), 3, "{}", r.output);
    assert!(
        r.output.contains("[showing 3 paths; there are more"),
        "{}",
        r.output
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn search_tools_refuse_protected_paths() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("workspace");
    std::fs::create_dir_all(ws.join("keys")).unwrap();
    std::fs::write(home.path().join("config.yaml"), "needle: 1\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "needle\n").unwrap();
    std::fs::write(ws.join("keys/server.pem"), "needle\n").unwrap();
    std::fs::write(ws.join("credentials.json"), "needle\n").unwrap();
    let mut ctx = tool_ctx(&ws);
    ctx.ethan_home = Some(home.path().to_path_buf());

    let r: ethan::tools::ToolResult = RgSearch::new()
        .run(json!({"pattern": "needle", "path": ".."}), &ctx)
        .await
        .into();
    assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{r:?}");
    let r: ethan::tools::ToolResult = FdFind::new()
        .run(json!({"pattern": "", "path": ".."}), &ctx)
        .await
        .into();
    assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{r:?}");

    let r: ethan::tools::ToolResult = RgSearch::new()
        .run(json!({"pattern": "needle"}), &ctx)
        .await
        .into();
    assert_eq!(
        r.output,
        "notes.txt:1: needle\n[2 secret-looking or protected entries were left out]"
    );
    let r: ethan::tools::ToolResult = FdFind::new().run(json!({"pattern": ""}), &ctx).await.into();
    assert_eq!(
        r.output,
        "keys/\nnotes.txt\n[2 secret-looking or protected entries were left out]"
    );
}
