//! The event long connection ("长连接"): Lark pushes events over a websocket the daemon opens,
//! so no public URL is needed.
//!
//! Protocol (PROTOCOLS §1; larksuite/oapi-sdk-go `ws/client.go` and its split successors
//! `ws/client_transport.go`, `ws/client_session.go`, `ws/client_message.go`; oapi-sdk-python
//! `lark_oapi/ws/client.py`; node-sdk `ws-client/index.ts`):
//!
//! 1. `POST {base}/callback/ws/endpoint` → a one-time `wss://` URL (with `service_id` and
//!    `device_id` in its query) and a `ClientConfig`. A fresh URL is fetched for every
//!    connection.
//! 2. Dial it. A failed handshake with `Handshake-Status: 514` and `Handshake-Autherrcode:
//!    1000040350` (too many connections) or status 403 is fatal; other failures are retried.
//! 3. Send a ping frame at once and then every `PingInterval`; a pong may carry a new
//!    `ClientConfig`, which is applied. Any received message (frame, websocket ping/pong) counts
//!    as liveness; with nothing for three ping intervals the connection is considered dead.
//! 4. Data frames (`type: event` or `card`) are reassembled when split (`sum`/`seq`, by
//!    `message_id`, fragments kept 5 s: [`Fragments`]), handed to [`Inbound`], and ACKed: the
//!    same frame with a `biz_rt` header and payload `{"code":200}` (a card callback's ACK
//!    carries its answer as base64 `data`, at least `e30=` = `{}`) — always within
//!    [`ACK_DEADLINE`], before the agent runs.
//! 5. When the connection ends: wait a random time up to `ReconnectNonce`, then try to connect
//!    (from step 1), every `ReconnectInterval` until it works (at most `ReconnectCount` tries
//!    when that is not negative). Malformed frames are logged and skipped; they never end the
//!    connection.

use super::api::endpoint_retryable;
use super::codes;
use super::fragments::Fragments;
pub use super::fragments::FRAGMENT_TTL;
use super::frame::{ack_payload, ClientConfig, Frame, METHOD_CONTROL, METHOD_DATA};
use super::inbound::{Inbound, Reply, CARD_ACTION};
use super::normalize::Envelope;
use super::{LarkChannel, PLATFORM};
use crate::channel::{ChannelError, InboundSink, StateStore};
use futures_util::{SinkExt, StreamExt};
use rand::RngExt;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// The platform wants an ACK within 3 s; the handler gets at most this long.
pub const ACK_DEADLINE: Duration = Duration::from_secs(2);
/// Bound of the websocket handshake.
const DIAL_TIMEOUT: Duration = Duration::from_secs(15);

const TARGET: &str = "ethan_channels::lark";

/// Why a connection attempt failed.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    /// Worth another try later.
    #[error("{0}")]
    Retry(String),
    /// Bad credentials, too many connections, forbidden: retrying will not help.
    #[error("{0}")]
    Fatal(String),
}

/// How a connection ended.
enum End {
    Shutdown,
    Lost(String),
}

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Connection {
    ws: WsStream,
    service_id: i32,
    device_id: String,
}

/// Run the long connection until `shutdown` fires (see the module docs).
pub(super) async fn run(
    chan: Arc<LarkChannel>,
    sink: Arc<dyn InboundSink>,
    state: Arc<dyn StateStore>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ChannelError> {
    // The bot's open_id is needed for mention detection; without it mentions are recognised by
    // type, and the message worker tries again later. Only rejected credentials stop here.
    match chan.fetch_bot_info().await {
        Ok(b) => {
            tracing::info!(target: TARGET, "lark bot {:?} (open_id {})", b.app_name, b.open_id)
        }
        Err(e @ ChannelError::Unauthorized { .. }) => return Err(e),
        Err(e) => tracing::warn!(target: TARGET, "lark bot info failed: {e}; connecting anyway"),
    }
    let inbound = Inbound::start(Arc::clone(&chan), sink, state);
    let mut cfg = ClientConfig::default();
    let mut reconnecting = false;
    loop {
        if reconnecting {
            let nonce_ms = cfg.reconnect_nonce.saturating_mul(1000);
            let jitter = Duration::from_millis(rand::rng().random_range(0..=nonce_ms));
            tracing::info!(
                target: TARGET,
                "lark long connection: reconnecting in {:.1}s",
                jitter.as_secs_f64()
            );
            if !pause(jitter, &mut shutdown).await {
                return Ok(());
            }
        }
        let mut attempts: i64 = 0;
        let conn = loop {
            if *shutdown.borrow() {
                return Ok(());
            }
            match connect(&chan, &mut cfg).await {
                Ok(c) => break c,
                Err(ConnectError::Fatal(m)) => {
                    tracing::error!(target: TARGET, "lark long connection refused: {m}");
                    return Err(ChannelError::Unauthorized {
                        platform: PLATFORM,
                        message: m,
                    });
                }
                Err(ConnectError::Retry(m)) => {
                    attempts += 1;
                    if cfg.reconnect_count >= 0 && attempts > cfg.reconnect_count.max(1) {
                        return Err(ChannelError::Transport {
                            platform: PLATFORM,
                            message: format!("gave up after {attempts} attempts: {m}"),
                        });
                    }
                    let wait = Duration::from_secs(cfg.reconnect_interval.max(1));
                    tracing::warn!(
                        target: TARGET,
                        "lark long connection failed: {m}; next try in {}s",
                        wait.as_secs()
                    );
                    if !pause(wait, &mut shutdown).await {
                        return Ok(());
                    }
                }
            }
        };
        tracing::info!(
            target: TARGET,
            "lark long connection established (device_id {}, service_id {})",
            conn.device_id,
            conn.service_id
        );
        chan.set_connected(true);
        let end = session(conn, &inbound, &mut cfg, &mut shutdown).await;
        chan.set_connected(false);
        match end {
            End::Shutdown => return Ok(()),
            End::Lost(why) => {
                tracing::warn!(target: TARGET, "lark long connection lost: {why}");
                reconnecting = true;
            }
        }
    }
}

/// Sleep `d` unless shutdown fires first; false on shutdown.
async fn pause(d: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = shutdown.changed() => false,
    }
}

/// Fetch a fresh endpoint and dial it.
async fn connect(chan: &LarkChannel, cfg: &mut ClientConfig) -> Result<Connection, ConnectError> {
    let ep = chan.api().ws_endpoint().await.map_err(|e| {
        if endpoint_retryable(&e) {
            ConnectError::Retry(e.to_string())
        } else {
            ConnectError::Fatal(e.to_string())
        }
    })?;
    if let Some(c) = ep.client_config {
        *cfg = c;
    }
    let url = url::Url::parse(&ep.url)
        .map_err(|e| ConnectError::Retry(format!("the endpoint URL is not a URL: {e}")))?;
    let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
    let service_id = query
        .get("service_id")
        .and_then(|s| s.parse::<i32>().ok())
        .unwrap_or(0);
    let device_id = query.get("device_id").cloned().unwrap_or_default();
    let dial = tokio::time::timeout(
        DIAL_TIMEOUT,
        tokio_tungstenite::connect_async(ep.url.as_str()),
    );
    match dial.await {
        Err(_) => Err(ConnectError::Retry(
            "the websocket handshake timed out".into(),
        )),
        Ok(Ok((ws, _))) => Ok(Connection {
            ws,
            service_id,
            device_id,
        }),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(resp))) => {
            let h = |name: &str| {
                resp.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string()
            };
            let status = h("Handshake-Status");
            let auth = h("Handshake-Autherrcode");
            let msg = h("Handshake-Msg");
            let what = format!(
                "handshake refused: HTTP {}, Handshake-Status {status:?}, Handshake-Msg {msg:?}, Handshake-Autherrcode {auth:?}",
                resp.status().as_u16()
            );
            let exceed = auth == codes::WS_EXCEED_CONN_LIMIT.to_string();
            if (status == "514" && exceed) || status == "403" || resp.status().as_u16() == 403 {
                let hint = if exceed {
                    codes::meaning(codes::WS_EXCEED_CONN_LIMIT)
                } else {
                    "forbidden"
                };
                Err(ConnectError::Fatal(format!("{what} ({hint})")))
            } else {
                Err(ConnectError::Retry(what))
            }
        }
        Ok(Err(e)) => Err(ConnectError::Retry(format!("websocket dial failed: {e}"))),
    }
}

/// Serve one connection until it ends.
async fn session(
    conn: Connection,
    inbound: &Arc<Inbound>,
    cfg: &mut ClientConfig,
    shutdown: &mut watch::Receiver<bool>,
) -> End {
    let (mut write, mut read) = conn.ws.split();
    let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
    let writer = ethan_core::task::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            let closing = matches!(m, Message::Close(_));
            if let Err(e) = write.send(m).await {
                tracing::debug!(target: TARGET, "lark websocket write failed: {e}");
                break;
            }
            if closing {
                break;
            }
        }
        let _ = write.close().await;
    });
    let mut fragments = Fragments::default();
    let mut next_ping = Instant::now();
    let mut last_seen = Instant::now();
    let end = loop {
        let ping_every = Duration::from_secs(cfg.ping_interval.max(1));
        let dead_after = last_seen + ping_every * 3;
        tokio::select! {
            _ = shutdown.changed() => {
                let _ = out.send(Message::Close(None));
                break End::Shutdown;
            }
            _ = tokio::time::sleep_until(next_ping) => {
                let ping = Frame::ping(conn.service_id).to_bytes();
                if out.send(Message::Binary(ping.into())).is_err() {
                    break End::Lost("the writer stopped".into());
                }
                next_ping = Instant::now() + ping_every;
            }
            _ = tokio::time::sleep_until(dead_after) => {
                break End::Lost(format!("nothing received for {}s", (ping_every * 3).as_secs()));
            }
            msg = read.next() => {
                last_seen = Instant::now();
                match msg {
                    None => break End::Lost("closed by the server".into()),
                    Some(Err(e)) => break End::Lost(format!("read error: {e}")),
                    Some(Ok(Message::Binary(b))) => {
                        if let Some(new_cfg) = on_frame(&b, &mut fragments, inbound, &out) {
                            if new_cfg.ping_interval != cfg.ping_interval {
                                next_ping = Instant::now() + Duration::from_secs(new_cfg.ping_interval.max(1));
                            }
                            tracing::debug!(target: TARGET, "lark ClientConfig from pong: {new_cfg:?}");
                            *cfg = new_cfg;
                        }
                    }
                    Some(Ok(Message::Close(frame))) => {
                        break End::Lost(format!("the server closed the connection ({frame:?})"));
                    }
                    // Text frames are not part of the protocol; websocket pings are answered
                    // by tungstenite itself.
                    Some(Ok(_)) => {}
                }
            }
        }
    };
    drop(out);
    // Let the writer send a pending close; do not wait for a stuck peer.
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    end
}

/// Handle one binary message. Returns a new ClientConfig when a pong carried one.
fn on_frame(
    bytes: &[u8],
    fragments: &mut Fragments,
    inbound: &Arc<Inbound>,
    out: &mpsc::UnboundedSender<Message>,
) -> Option<ClientConfig> {
    let received = Instant::now();
    let frame = match Frame::decode_bytes(bytes) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(target: TARGET, "skipping a lark frame: {e}");
            return None;
        }
    };
    match frame.method {
        METHOD_CONTROL => {
            match frame.frame_type() {
                "pong" if !frame.payload_bytes().is_empty() => {
                    match serde_json::from_slice::<ClientConfig>(frame.payload_bytes()) {
                        Ok(c) => return Some(c),
                        Err(e) => {
                            tracing::debug!(target: TARGET, "unreadable ClientConfig in a pong: {e}")
                        }
                    }
                }
                "pong" | "ping" => {}
                other => tracing::debug!(target: TARGET, "ignoring lark control frame {other:?}"),
            }
            None
        }
        METHOD_DATA => {
            let kind = frame.frame_type().to_string();
            let payload = match fragments.add(&frame, received.into_std()) {
                Ok(Some(p)) => p,
                Ok(None) => return None, // waiting for the other fragments
                Err(why) => {
                    tracing::warn!(target: TARGET, "lark frame with bad fragment headers ({why}); acknowledged and skipped");
                    send_ack(out, &frame, received, 200, None);
                    return None;
                }
            };
            if kind != "event" && kind != "card" {
                tracing::debug!(target: TARGET, "acknowledging a lark data frame of type {kind:?} unhandled");
                send_ack(out, &frame, received, 200, None);
                return None;
            }
            let Some(env) = Envelope::parse(&payload) else {
                tracing::warn!(
                    target: TARGET,
                    "lark event payload is not a JSON object ({} bytes); acknowledged and skipped",
                    payload.len()
                );
                send_ack(out, &frame, received, 200, None);
                return None;
            };
            let is_callback = env.event_type() == CARD_ACTION || kind == "card";
            let inbound = Arc::clone(inbound);
            let out = out.clone();
            ethan_core::task::spawn(async move {
                let reply = tokio::time::timeout(ACK_DEADLINE, inbound.handle(env)).await;
                let (code, data) = match reply {
                    Ok(Reply::Ack) => (200, None),
                    Ok(Reply::Failed) => (500, None),
                    Ok(Reply::Callback(r)) => (200, Some(r.to_bytes())),
                    Err(_) => {
                        tracing::warn!(target: TARGET, "lark event handling passed {}s; acknowledging anyway", ACK_DEADLINE.as_secs());
                        (200, None)
                    }
                };
                // A card callback's ACK always carries data; `{}` means "no UI change".
                let data = match (data, is_callback) {
                    (None, true) => Some(b"{}".to_vec()),
                    (d, _) => d,
                };
                send_ack(&out, &frame, received, code, data.as_deref());
            });
            None
        }
        other => {
            tracing::debug!(target: TARGET, "ignoring a lark frame with method {other}");
            None
        }
    }
}

fn send_ack(
    out: &mpsc::UnboundedSender<Message>,
    frame: &Frame,
    received: Instant,
    code: u16,
    data: Option<&[u8]>,
) {
    let biz_rt = received.elapsed().as_millis() as u64;
    let ack = frame.ack(biz_rt, ack_payload(code, data));
    if out.send(Message::Binary(ack.to_bytes().into())).is_err() {
        tracing::warn!(target: TARGET, "could not ACK lark frame {}: the connection is gone", frame.seq_id);
    }
}
