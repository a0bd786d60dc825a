//! Starting Chromium, and the protocol relay between it and the CDP client.
//!
//! `chromiumoxide` 0.9.1 (the newest release) types the DevTools protocol of its time; the
//! Chromium Debian ships (156) sends some messages in a newer shape, which the client cannot
//! parse and drops with a warning (`WS Invalid message: data did not match any variant of
//! untagged enum Message`) — an event lost. So the browser is started here
//! ([`chromiumoxide::BrowserConfig::launch`], the client's own command line) and the client is
//! connected to it through a relay on loopback that passes every message on unchanged, except:
//! - a message in a known newer shape is put in the shape the client reads ([`compat`]);
//! - a message the client still could not parse is logged once per method, naming it (`the
//!   browser sent a protocol message the client cannot read: <method>: <error>`), and dropped
//!   there (the client would drop it too, with no name).
//!
//! The known shapes (each found against Debian's Chromium 156 by the test
//! `tests/suite/browser_protocol.rs`, which fails on any unparsed message):
//! - `Network.requestWillBeSentExtraInfo`'s `clientSecurityState`: `privateNetworkRequestPolicy`
//!   became `localNetworkAccessRequestPolicy`; the value is copied to the old name when it is one
//!   the client knows, else the optional `clientSecurityState` is left out.
//!
//! The relay takes one connection (the client's) and then stops listening; it ends with either
//! side.

use chromiumoxide::async_process::Child;
use chromiumoxide::cdp::events::CdpEventMessage;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::{Browser, Handler};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashSet;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// The newest Chromium major version the relay and the client were checked against
/// (`tests/suite/browser_protocol.rs`, on Debian's Chromium); `ethan doctor` warns about a
/// newer one.
pub const NEWEST_CHECKED_MAJOR: u32 = 156;

/// The major version in `<exe> --version` output (`Chromium 156.0.8078.114 built on …`).
pub fn major_version(version_output: &str) -> Option<u32> {
    version_output.split_whitespace().find_map(|w| {
        w.split('.')
            .next()?
            .parse()
            .ok()
            .filter(|_| w.contains('.'))
    })
}

/// `ethan doctor`'s words on the browser at `exe`: `Ok` when its version is known and not newer
/// than [`NEWEST_CHECKED_MAJOR`], else `Err` saying why to watch the log.
pub fn version_check(exe: &std::path::Path) -> Result<String, String> {
    let out = std::process::Command::new(exe)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{}: --version failed: {e}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("").trim().to_string();
    match major_version(&line) {
        Some(m) if m <= NEWEST_CHECKED_MAJOR => Ok(format!("{line} at {}", exe.display())),
        Some(_) => Err(format!(
            "{line} at {}: newer than {NEWEST_CHECKED_MAJOR}, the newest the browser's protocol \
             client was checked against; a message it cannot read is logged as \"the browser \
             sent a protocol message the client cannot read\"",
            exe.display()
        )),
        None => Err(format!(
            "{}: its version could not be read ({line:?})",
            exe.display()
        )),
    }
}

/// The values of `privateNetworkRequestPolicy` the client knows.
const KNOWN_POLICIES: &[&str] = &[
    "Allow",
    "BlockFromInsecureToMorePrivate",
    "WarnFromInsecureToMorePrivate",
    "PermissionBlock",
    "PermissionWarn",
];
/// The values of `IPAddressSpace` the client knows.
const KNOWN_SPACES: &[&str] = &["Loopback", "Local", "Public", "Unknown"];

/// `text` in the shape the client reads (see the module docs); borrowed when unchanged.
pub fn compat(text: &str) -> Cow<'_, str> {
    if !text.contains("\"Network.requestWillBeSentExtraInfo\"")
        || !text.contains("localNetworkAccessRequestPolicy")
    {
        return Cow::Borrowed(text);
    }
    let Ok(mut v) = serde_json::from_str::<Value>(text) else {
        return Cow::Borrowed(text);
    };
    let Some(params) = v.get_mut("params").and_then(Value::as_object_mut) else {
        return Cow::Borrowed(text);
    };
    let Some(state) = params
        .get_mut("clientSecurityState")
        .and_then(Value::as_object_mut)
    else {
        return Cow::Borrowed(text);
    };
    let policy = state
        .get("localNetworkAccessRequestPolicy")
        .and_then(Value::as_str)
        .filter(|p| KNOWN_POLICIES.contains(p))
        .map(str::to_string);
    let space_known = state
        .get("initiatorIPAddressSpace")
        .and_then(Value::as_str)
        .is_some_and(|s| KNOWN_SPACES.contains(&s));
    match policy {
        Some(p) if space_known => {
            state.remove("localNetworkAccessRequestPolicy");
            state.insert("privateNetworkRequestPolicy".into(), Value::String(p));
        }
        _ => {
            params.remove("clientSecurityState");
        }
    }
    Cow::Owned(v.to_string())
}

/// What the client cannot parse in `text`: its method (or `response`) and the error.
fn unreadable(text: &str) -> Option<(String, String)> {
    let e = serde_json::from_str::<chromiumoxide::types::Message<CdpEventMessage>>(text).err()?;
    let method = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "a response".into());
    Some((method, e.to_string()))
}

/// Why the browser could not be started or reached.
#[derive(Debug)]
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A running browser: the client, its handler, the process, and the relay's task.
pub struct Launched {
    pub browser: Browser,
    pub handler: Handler,
    pub child: Child,
    pub relay: tokio::task::JoinHandle<()>,
}

/// Start the browser `config` describes and connect the client to it through the relay.
pub async fn launch(
    config: &chromiumoxide::BrowserConfig,
    handler: HandlerConfig,
    timeout: Duration,
) -> Result<Launched, Failed> {
    let mut child = config.launch().map_err(|e| Failed(e.to_string()))?;
    let started = async {
        let upstream = tokio::time::timeout(timeout, devtools_url(&mut child))
            .await
            .map_err(|_| Failed(format!("no DevTools URL within {timeout:?}")))??;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Failed(format!("the protocol relay: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Failed(format!("the protocol relay: {e}")))?;
        let relay = tokio::spawn(serve(listener, upstream));
        match Browser::connect_with_config(format!("ws://{addr}/devtools/browser"), handler).await {
            Ok((browser, handler)) => Ok((browser, handler, relay)),
            Err(e) => {
                relay.abort();
                Err(Failed(e.to_string()))
            }
        }
    }
    .await;
    match started {
        Ok((browser, handler, relay)) => Ok(Launched {
            browser,
            handler,
            child,
            relay,
        }),
        Err(e) => {
            let _ = child.kill().await;
            let _ = child.wait().await;
            Err(e)
        }
    }
}

/// The `ws://…/devtools/browser/…` URL Chromium prints on stderr.
async fn devtools_url(child: &mut Child) -> Result<String, Failed> {
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| Failed("no stderr".into()))?;
    let mut lines = tokio::io::BufReader::new(stderr.into_inner()).lines();
    let mut seen = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some((_, ws)) = line.rsplit_once("listening on ") {
            if ws.starts_with("ws") && ws.contains("devtools/browser") {
                return Ok(ws.trim().to_string());
            }
        }
        if seen.len() < 4096 {
            seen.push_str(&line);
            seen.push('\n');
        }
    }
    Err(Failed(format!(
        "the browser exited before it listened: {}",
        seen.trim()
    )))
}

/// Take the client's one connection and relay it to `upstream` until either side ends.
async fn serve(listener: tokio::net::TcpListener, upstream: String) {
    let Ok((stream, _)) = listener.accept().await else {
        return;
    };
    drop(listener);
    let client = match tokio_tungstenite::accept_async(stream).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("the browser's protocol relay: the client's handshake: {e}");
            return;
        }
    };
    let browser = match tokio_tungstenite::connect_async(upstream.as_str()).await {
        Ok((b, _)) => b,
        Err(e) => {
            tracing::warn!("the browser's protocol relay: connecting to the browser: {e}");
            return;
        }
    };
    let (mut to_client, mut from_client) = client.split();
    let (mut to_browser, mut from_browser) = browser.split();
    let down = async {
        let mut logged: HashSet<String> = HashSet::new();
        while let Some(Ok(msg)) = from_browser.next().await {
            let msg = match msg {
                WsMessage::Text(t) => {
                    let fixed = compat(t.as_str());
                    if let Some((method, e)) = unreadable(&fixed) {
                        if logged.insert(method.clone()) {
                            tracing::warn!(
                                "the browser sent a protocol message the client cannot read: \
                                 {method}: {e}"
                            );
                        }
                        continue;
                    }
                    match fixed {
                        Cow::Borrowed(_) => WsMessage::Text(t),
                        Cow::Owned(s) => WsMessage::text(s),
                    }
                }
                WsMessage::Close(_) => break,
                other => other,
            };
            if to_client.send(msg).await.is_err() {
                break;
            }
        }
        let _ = to_client.close().await;
    };
    let up = async {
        while let Some(Ok(msg)) = from_client.next().await {
            let close = matches!(msg, WsMessage::Close(_));
            if to_browser.send(msg).await.is_err() || close {
                break;
            }
        }
        let _ = to_browser.close().await;
    };
    tokio::select! {
        _ = down => {}
        _ = up => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXTRA: &str = r#"{"method":"Network.requestWillBeSentExtraInfo","params":{"requestId":"1.2","associatedCookies":[],"headers":{"Host":"127.0.0.1"},"connectTiming":{"requestTime":1.5},"clientSecurityState":{"initiatorIsSecureContext":true,"initiatorIPAddressSpace":"Loopback","localNetworkAccessRequestPolicy":"PermissionBlock"},"siteHasCookieInOtherPartition":false},"sessionId":"S"}"#;

    #[test]
    fn the_major_version_is_read_from_version_output() {
        assert_eq!(
            major_version("Chromium 156.0.8078.114 built on Debian GNU/Linux 12 (bookworm)"),
            Some(156)
        );
        assert_eq!(major_version("Google Chrome 131.0.6778.85 "), Some(131));
        assert_eq!(major_version("nothing here"), None);
    }

    #[test]
    fn chromium_156s_extra_info_is_read_once_put_in_the_old_shape() {
        assert!(unreadable(EXTRA).is_some(), "the client reads it as it is");
        let fixed = compat(EXTRA);
        assert!(unreadable(&fixed).is_none(), "{fixed}");
        assert!(fixed.contains("\"privateNetworkRequestPolicy\":\"PermissionBlock\""));
        // A value the client does not know: the optional state is left out.
        let odd = EXTRA.replace("PermissionBlock", "SomethingNew");
        let fixed = compat(&odd);
        assert!(unreadable(&fixed).is_none(), "{fixed}");
        assert!(!fixed.contains("clientSecurityState"));
        // Anything else passes unchanged.
        let other = r#"{"method":"Page.loadEventFired","params":{"timestamp":1.0}}"#;
        assert!(matches!(compat(other), Cow::Borrowed(_)));
    }
}
