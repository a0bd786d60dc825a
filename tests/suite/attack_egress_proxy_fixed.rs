//! An attack on the egress guard that once got through, kept as a regression: with loopback in
//! `tools.web_fetch.allow_private` (the owner fetches a service of their own), `web_fetch` could
//! reach one of the daemon's own browser proxies, which the browser's connections refused but
//! the HTTP clients judged by the address rule alone; a request there would act through a
//! session's browser. The attacker is the model (or a page that told it what to do), guessing
//! loopback ports; the daemon's parts are built as its wiring step builds them: one `Egress`,
//! the browser proxy started from one of its guards, `web_fetch` given another.

use crate::support::search_fakes::{tool_ctx, FakeSite};
use ethan::config::WebFetchConfig;
use ethan::egress::proxy::BrowserProxy;
use ethan::egress::{Egress, SystemLookup};
use ethan::metrics::Metrics;
use ethan::tools::web_fetch::WebFetch;
use ethan::tools::{ErrorKind, Tool, ToolResult};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

async fn fetch(tool: &WebFetch, url: &str) -> ToolResult {
    let dir = std::env::temp_dir();
    tokio::time::timeout(
        Duration::from_secs(20),
        tool.run(json!({ "url": url }), &tool_ctx(&dir)),
    )
    .await
    .expect("web_fetch finished in time")
    .into()
}

/// With `127.0.0.1` and `localhost` in `allow_private`, `web_fetch` to a running browser
/// proxy's address (by IP and by a listed name) is refused with a text the model can act on,
/// and counted as refused; `web_fetch` to another loopback port still works.
#[tokio::test(flavor = "multi_thread")]
async fn web_fetch_never_reaches_a_browser_proxy_whatever_allow_private_lists() {
    let metrics = Arc::new(Metrics::new());
    let egress = Egress::new(metrics.clone());
    let proxy = BrowserProxy::start(egress.guard(&[], Arc::new(SystemLookup)), "telegram:victim")
        .await
        .expect("the browser proxy starts");
    let port = proxy.url().rsplit(':').next().unwrap().to_string();
    let cfg = WebFetchConfig {
        allow_private: vec!["127.0.0.1".into(), "localhost".into()],
        ..Default::default()
    };
    let tool = WebFetch::guarded(
        &cfg,
        egress.guard(&cfg.allow_private, Arc::new(SystemLookup)),
    )
    .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://127.0.0.1:{port}/http://example.com/"),
        format!("http://localhost:{port}/"),
    ] {
        let r = fetch(&tool, &url).await;
        assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{url}: {r:?}");
        let e = r.error.clone().unwrap_or_default();
        assert!(
            e.contains("one of Ethan's own browser proxies"),
            "{url}: {e}"
        );
        assert!(
            e.contains("whatever tools.web_fetch.allow_private lists"),
            "{e}"
        );
        assert!(e.contains("Reach a site by its own address"), "{e}");
    }
    let text = metrics.render();
    assert!(
        text.contains("ethan_egress_total{path=\"web_fetch\",verdict=\"refused\"} 3"),
        "{text}"
    );

    let site = FakeSite::start().await;
    let r = fetch(&tool, &site.url("/article.html")).await;
    assert!(r.error.is_none(), "another loopback port: {r:?}");
    assert_eq!(site.requested(), vec!["/article.html".to_string()]);
}
