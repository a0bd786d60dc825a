//! The streamed retry loop both model clients ([`super::openai`], [`super::anthropic`]) run:
//! an attempt sent with its headers awaited ([`Core::start_stream`]), a failing status taken
//! by the wire format's error rule (or as a parameter the server refused, asked again without
//! it at once), the body read as Server-Sent Events under the idle timeout and the caps
//! ([`super::http_core::Chunks`]) or as a whole answer when the server ignored streaming, and
//! a transient failure retried with the text shown so far withdrawn
//! ([`super::http::Retries::after_stream_failure`]).
//!
//! What a wire format brings: [`StreamWire`] (its requests, its error rule, its whole answers)
//! and [`StreamReader`] (its events, put together into the answer).

use super::http::is_event_stream;
use super::http_core::Core;
use super::sse::SseDecoder;
use super::{Completion, ProviderError};
use ethan_core::event::{EventSink, TurnEvent};
use std::time::Duration;

/// The text of one attempt sent to the turn's sink, kept to know what a retry withdraws.
pub(crate) struct Shown<'a> {
    deltas: &'a EventSink,
    text: String,
}

impl Shown<'_> {
    /// Sends `piece` to the turn's sink as a [`TurnEvent::Delta`].
    pub fn send(&mut self, piece: String) {
        self.text.push_str(&piece);
        let _ = self.deltas.send(TurnEvent::Delta(piece));
    }
}

/// The reading of one streamed answer: the `data` payloads of its events, in order.
pub(crate) trait StreamReader: Send {
    /// One `data` payload; its text, once it may be shown, to `shown`. Whether it counts as
    /// progress (a keep-alive does not: the idle time goes on).
    ///
    /// # Errors
    /// The payload is not an event of the format, or is an error event.
    fn take(&mut self, data: &str, shown: &mut Shown<'_>) -> Result<bool, ProviderError>;

    /// Whether the answer's end came: the rest of the body is not read.
    fn is_done(&self) -> bool;

    /// Whether the answer is complete though its end did not come: a server that then stays
    /// silent past the idle time has ended it.
    fn is_complete(&self) -> bool {
        false
    }

    /// The completion of a stream that ended, the text still held back sent to `shown`.
    ///
    /// # Errors
    /// [`ProviderError::BadResponse`] when the stream ended before the answer did.
    fn finish(self, shown: &mut Shown<'_>) -> Result<Completion, ProviderError>;
}

/// A wire format's side of a streamed call: one value per call, asked for each attempt.
pub(crate) trait StreamWire: Send {
    type Reader: StreamReader;

    /// The model named as the one that answered.
    fn model(&self) -> &str;

    /// The request of the next attempt, made with `http` (its `Accept` header is added);
    /// `None` when the server does not stream: the answer is to be asked for whole.
    fn request(&mut self, http: &reqwest::Client) -> Option<reqwest::RequestBuilder>;

    /// The error of a failing status with its body.
    fn classify(&self, status: u16, text: &str) -> ProviderError;

    /// Whether a failing status with its body refused a parameter of the last request, which
    /// the next [`StreamWire::request`] leaves out: asked again at once, not as a retry.
    fn refused(&mut self, _status: u16, _text: &str) -> bool {
        false
    }

    /// The completion of a whole answer (a server that ignored streaming).
    ///
    /// # Errors
    /// [`ProviderError::BadResponse`] when it is not one; an error it carries.
    fn whole(&self, text: &str) -> Result<Completion, ProviderError>;

    /// A reader for the answer of one attempt.
    fn reader(&self) -> Self::Reader;
}

/// How one attempt failed.
enum Failure {
    /// A parameter was refused: the next request goes without it, at once.
    Again,
    /// Any other failure, and the server's `Retry-After`, if any.
    Error(ProviderError, Option<Duration>),
}

impl From<ProviderError> for Failure {
    fn from(e: ProviderError) -> Self {
        Failure::Error(e, None)
    }
}

/// One answer streamed through `wire`, each piece of its text sent to `deltas` as it may be
/// shown, retried on transient failures; a retry after pieces were sent first sends
/// [`TurnEvent::DeltaReset`]. `Ok(None)`: the server does not stream ([`StreamWire::request`]).
///
/// # Errors
/// The final failure; [`ProviderError::Interrupted`] (without a reset: the person keeps the
/// text) when text was sent before it.
pub(crate) async fn stream<W: StreamWire>(
    core: &Core,
    wire: &mut W,
    deltas: &EventSink,
) -> Result<Option<Completion>, ProviderError> {
    let mut attempt = 0;
    loop {
        let Some(request) = wire.request(&core.stream_http) else {
            return Ok(None);
        };
        let mut shown = Shown {
            deltas,
            text: String::new(),
        };
        match once(core, wire, request, &mut shown).await {
            Ok(mut c) => {
                c.model = wire.model().to_string();
                return Ok(Some(c));
            }
            // A refusal is a failing status: no text was sent.
            Err(Failure::Again) => {}
            Err(Failure::Error(e, retry_after)) => {
                let retries = core.retries();
                if let Some(e) = retries
                    .after_stream_failure(e, retry_after, attempt, shown.text, deltas)
                    .await
                {
                    return Err(e);
                }
                attempt += 1;
            }
        }
    }
}

/// One attempt: `request` sent, its answer read.
async fn once<W: StreamWire>(
    core: &Core,
    wire: &mut W,
    request: reqwest::RequestBuilder,
    shown: &mut Shown<'_>,
) -> Result<Completion, Failure> {
    let request = request.header(reqwest::header::ACCEPT, "text/event-stream");
    let mut resp = core.start_stream(request).await?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) {
        let (text, retry_after) = core.failure_text(&mut resp).await?;
        if wire.refused(status, &text) {
            return Err(Failure::Again);
        }
        return Err(Failure::Error(wire.classify(status, &text), retry_after));
    }
    let reader = wire.reader();
    if !is_event_stream(&resp) {
        let body = core.read_rest(&mut resp).await?;
        return Ok(unlabelled(wire, reader, &body, shown)?);
    }
    Ok(read_events(core, &mut resp, reader, shown).await?)
}

/// An answer not labelled `text/event-stream`: a whole answer (the server ignored streaming),
/// its text sent as one piece, or a stream under another content type.
fn unlabelled<W: StreamWire>(
    wire: &W,
    mut reader: W::Reader,
    body: &[u8],
    shown: &mut Shown<'_>,
) -> Result<Completion, ProviderError> {
    let text = String::from_utf8_lossy(body);
    let t = text.trim_start();
    if !(t.starts_with("event:") || t.starts_with("data:") || t.starts_with(':')) {
        let c = wire.whole(&text)?;
        if let Some(t) = c.message.content.as_deref().filter(|t| !t.is_empty()) {
            shown.send(t.to_string());
        }
        return Ok(c);
    }
    let mut decoder = SseDecoder::default();
    let mut datas = decoder.feed(body);
    datas.extend(decoder.finish());
    for data in datas {
        reader.take(&data, shown)?;
        if reader.is_done() {
            break;
        }
    }
    reader.finish(shown)
}

/// The events of a streamed body until the answer's end (or the body's).
async fn read_events<R: StreamReader>(
    core: &Core,
    resp: &mut reqwest::Response,
    mut reader: R,
    shown: &mut Shown<'_>,
) -> Result<Completion, ProviderError> {
    let mut decoder = SseDecoder::default();
    let mut chunks = core.chunks();
    'read: loop {
        let whole = reader.is_complete();
        let Some(bytes) = chunks.next(core, resp, whole).await? else {
            break;
        };
        for data in decoder.feed(&bytes) {
            if reader.take(&data, shown)? {
                chunks.progressed();
            }
            if reader.is_done() {
                break 'read;
            }
        }
    }
    if !reader.is_done() {
        for data in decoder.finish() {
            reader.take(&data, shown)?;
        }
    }
    reader.finish(shown)
}
