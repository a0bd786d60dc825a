//! The fuzzed entry points and the invariants each must keep.
//!
//! Shared by the `cargo fuzz` targets (through the `ethan_fuzz` library) and by the ordinary
//! crash-regression tests in `tests/suite/fuzz_regressions.rs` (through `#[path]`), so CI checks exactly
//! what the fuzzer checks. Every function takes arbitrary bytes and panics only when an invariant
//! is broken. Only crates that both the fuzz crate and the main package depend on are used here.

use axum::http::{HeaderMap, HeaderValue};
use ethan_channels::lark::fragments::{
    Fragments, FRAGMENT_TTL, MAX_FRAGMENTS, MAX_PENDING_BYTES, MAX_PENDING_MESSAGES,
};
use ethan_channels::lark::frame::{self, Frame};
use ethan_channels::lark::webhook;
use ethan_channels::telegram::chunk::{chunk_html, utf16_len, TELEGRAM_TEXT_LIMIT};
use ethan_channels::telegram::normalize::normalize_update;
use ethan_channels::telegram::render::{html_to_display_text, markdown_to_html};
use ethan_channels::telegram::wire::Update;
use ethan_channels::telegram::BotIdentity;
use std::time::{Duration, Instant};

/// Tags the Bot API accepts with `parse_mode = "HTML"`.
pub const TELEGRAM_TAGS: &[&str] = &[
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "tg-emoji",
    "code",
    "pre",
    "blockquote",
];

/// A Bot API `Update` (JSON) → the unified inbound event: no panic.
pub fn telegram_update(data: &[u8]) {
    let me = BotIdentity {
        id: 7_000_000_001,
        username: "ethan_test_bot".into(),
    };
    if let Ok(update) = Update::from_slice(data) {
        let _ = normalize_update(&update, &me);
    }
}

/// The longest input [`telegram_render`] renders: the chunker's work grows with the text at a
/// small limit, and a longer input teaches the fuzzer nothing a shorter one does not.
pub const RENDER_INPUT_MAX: usize = 1024;

/// Markdown → Telegram HTML → chunks at one limit drawn from the input ([`render_limit`]): every
/// chunk within it (so within 4096 UTF-16 units), only accepted tags, balanced, display text
/// preserved. Only the first [`RENDER_INPUT_MAX`] bytes are rendered.
pub fn telegram_render(data: &[u8]) {
    let limit = render_limit(data);
    let md = String::from_utf8_lossy(&data[..data.len().min(RENDER_INPUT_MAX)]);
    let html = markdown_to_html(&md);
    check_html(&html, "markdown_to_html output");
    check_chunks(&html, limit);
}

/// The chunk limit an input is checked at, from its first byte: one input in eight at
/// Telegram's own 4096 UTF-16 units, the others at a small limit from 5 to 68 (so short inputs
/// split too; the chunker promises its guarantees for limits of 5 and more).
pub fn render_limit(data: &[u8]) -> usize {
    match data.first() {
        Some(b) if b % 8 != 0 => 5 + usize::from(*b >> 2),
        _ => TELEGRAM_TEXT_LIMIT,
    }
}

/// [`telegram_render`]'s checks on the whole input at both Telegram's limit and the small
/// one: for the crash-regression tests, whose inputs are few and may be long.
pub fn telegram_render_whole(data: &[u8]) {
    let md = String::from_utf8_lossy(data);
    let html = markdown_to_html(&md);
    check_html(&html, "markdown_to_html output");
    check_chunks(&html, TELEGRAM_TEXT_LIMIT);
    let small = 5 + data.first().map_or(0, |b| *b as usize % 64);
    check_chunks(&html, small);
}

fn check_chunks(html: &str, limit: usize) {
    let chunks = chunk_html(html, limit);
    let mut shown = String::new();
    for chunk in &chunks {
        let len = utf16_len(chunk);
        assert!(
            len <= limit,
            "chunk of {len} UTF-16 units over the limit {limit}: {chunk:?}"
        );
        check_html(chunk, "chunk");
        shown.push_str(&html_to_display_text(chunk));
    }
    assert_eq!(
        shown,
        html_to_display_text(html),
        "chunks (limit {limit}) changed the display text of {html:?}: {chunks:?}"
    );
}

/// Every `<…>` in `html` is an accepted tag and they are balanced.
pub fn check_html(html: &str, what: &str) {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        let after = &rest[lt + 1..];
        let Some(gt) = after.find('>') else {
            panic!("{what}: unterminated tag in {html:?}");
        };
        let inner = &after[..gt];
        let (closing, body) = match inner.strip_prefix('/') {
            Some(b) => (true, b),
            None => (false, inner),
        };
        let name = body
            .split(|c: char| c.is_ascii_whitespace())
            .next()
            .unwrap_or("");
        assert!(
            TELEGRAM_TAGS.contains(&name),
            "{what}: tag <{inner}> not accepted by Telegram in {html:?}"
        );
        if closing {
            assert_eq!(
                stack.pop(),
                Some(name),
                "{what}: unbalanced </{name}> in {html:?}"
            );
        } else {
            stack.push(name);
        }
        rest = &after[gt + 1..];
    }
    assert!(stack.is_empty(), "{what}: unclosed {stack:?} in {html:?}");
}

/// A pbbp2 frame and fragment reassembly.
///
/// The whole input as one frame: decoding never panics, a decoded frame re-encodes to an equal
/// frame, the accessors and the ACK payload parser never panic. Then the input as a stream of
/// frames (each record a length byte and that many bytes) fed through [`Fragments`] as the long
/// connection does, with a clock that the records advance (so fragments expire): no panic, the
/// buffered messages and bytes stay within their bounds, an unsplit frame comes back as its own
/// payload. Last, the first frame's payload (or the input) split into fragments delivered out of
/// order between those frames: the completed message is exactly the concatenation of its parts,
/// and nothing completes early.
pub fn lark_frame(data: &[u8]) {
    let _ = frame::parse_ack_payload(data);
    if let Ok(f) = Frame::decode_bytes(data) {
        check_frame(&f);
    }

    let frames: Vec<(u8, Frame)> = records(data)
        .filter_map(|r| {
            Some((
                r.first().copied().unwrap_or(0),
                Frame::decode_bytes(r).ok()?,
            ))
        })
        .collect();
    let mut frags = Fragments::default();
    let mut now = Instant::now();
    for (tick, f) in &frames {
        check_frame(f);
        // Up to 2.55 s per frame: a few frames let pending fragments expire.
        now += Duration::from_millis(u64::from(*tick) * 10);
        let unsplit = f
            .header(frame::HEADER_SUM)
            .map(|s| s.trim().parse::<usize>());
        match frags.add(f, now) {
            Ok(Some(p)) if matches!(unsplit, None | Some(Ok(0 | 1))) => {
                assert_eq!(p, f.payload_bytes(), "an unsplit frame changed")
            }
            _ => {}
        }
        check_bounds(&frags);
    }

    // A message of our own, split and shuffled between the same frames.
    let whole: Vec<u8> = frames
        .first()
        .map_or(data, |(_, f)| f.payload_bytes())
        .to_vec();
    let parts_n = 2 + data.last().map_or(0, |b| *b as usize) % (MAX_FRAGMENTS - 1);
    let step = whole.len().div_ceil(parts_n).max(1);
    let mut parts: Vec<(usize, &[u8])> = (0..parts_n)
        .map(|i| {
            let a = (i * step).min(whole.len());
            let b = ((i + 1) * step).min(whole.len());
            (i, &whole[a..b])
        })
        .collect();
    // A deterministic shuffle driven by the input.
    for i in (1..parts.len()).rev() {
        let j = data.get(i % data.len().max(1)).map_or(0, |b| *b as usize) % (i + 1);
        parts.swap(i, j);
    }
    let id = "fuzz-own-message";
    // Fragments of that id among the frames above expire first.
    now += FRAGMENT_TTL + Duration::from_millis(1);
    let mut others = frames
        .iter()
        .filter(|(_, f)| f.header(frame::HEADER_MESSAGE_ID) != Some(id));
    // Eviction (by count) could legitimately drop our message when the other frames fill the
    // buffer; the input is far too short for that, but say so rather than assume it.
    let can_evict = frames.len() + 1 >= MAX_PENDING_MESSAGES || 2 * data.len() >= MAX_PENDING_BYTES;
    let mut completed = None;
    for (n, (seq, part)) in parts.iter().enumerate() {
        if let Some((_, other)) = others.next() {
            let _ = frags.add(other, now);
            check_bounds(&frags);
        }
        let f = fragment(id, parts_n, *seq, part);
        let got = frags.add(&f, now).expect("well-formed fragment refused");
        check_bounds(&frags);
        if n + 1 < parts.len() {
            assert_eq!(got, None, "a message completed before its last fragment");
        } else {
            completed = got;
        }
    }
    if !can_evict {
        assert_eq!(
            completed.as_deref(),
            Some(whole.as_slice()),
            "the reassembled message is not the concatenation of its parts"
        );
    }
    // Long after, everything incomplete is forgotten.
    let _ = frags.add(&fragment("late", 2, 0, b""), now + FRAGMENT_TTL * 2);
    assert!(frags.pending_messages() <= 1 && frags.pending_bytes() == 0);
}

/// Checks on one decoded frame.
fn check_frame(f: &Frame) {
    let again = Frame::decode_bytes(&f.to_bytes()).expect("a re-encoded frame decodes");
    assert_eq!(&again, f, "frame changed on re-encoding");
    let _ = f.frame_type();
    let _ = f.payload_bytes();
    for key in [
        frame::HEADER_MESSAGE_ID,
        frame::HEADER_SUM,
        frame::HEADER_SEQ,
        frame::HEADER_TYPE,
    ] {
        let _ = f.header(key);
    }
    let _ = f
        .ack(1, frame::ack_payload(200, Some(f.payload_bytes())))
        .to_bytes();
}

fn check_bounds(frags: &Fragments) {
    assert!(
        frags.pending_messages() <= MAX_PENDING_MESSAGES,
        "{} incomplete messages kept",
        frags.pending_messages()
    );
    assert!(
        frags.pending_bytes() <= MAX_PENDING_BYTES,
        "{} bytes of fragments kept",
        frags.pending_bytes()
    );
}

/// `data` as records: a length byte, then that many bytes (the last may be shorter).
fn records(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (&len, rest) = data.split_first()?;
        let (r, tail) = rest.split_at((len as usize).min(rest.len()));
        data = tail;
        Some(r)
    })
}

/// A data frame carrying fragment `seq` of `sum` of message `id`.
fn fragment(id: &str, sum: usize, seq: usize, payload: &[u8]) -> Frame {
    Frame {
        seq_id: seq as u64,
        log_id: 0,
        service: 1,
        method: frame::METHOD_DATA,
        headers: vec![
            frame::header(frame::HEADER_TYPE, "event"),
            frame::header(frame::HEADER_MESSAGE_ID, id),
            frame::header(frame::HEADER_SUM, &sum.to_string()),
            frame::header(frame::HEADER_SEQ, &seq.to_string()),
        ],
        payload_encoding: None,
        payload_type: None,
        payload: Some(payload.to_vec()),
        log_id_new: None,
    }
}

/// Webhook decryption and signature check: no panic on any key or ciphertext; encrypt → decrypt
/// round-trips JSON-shaped plaintexts; a correct signature is accepted and a wrong one refused.
pub fn lark_webhook(data: &[u8]) {
    let split = data.first().map_or(0, |b| *b as usize).min(data.len());
    let (key_bytes, rest) = data.split_at(split);
    let key = String::from_utf8_lossy(key_bytes.get(1..).unwrap_or_default());
    let text = String::from_utf8_lossy(rest);
    let _ = webhook::decrypt(&key, &text);

    let mut iv = [0u8; 16];
    for (d, s) in iv.iter_mut().zip(rest.iter()) {
        *d = *s;
    }
    let plain = format!("{{\"x\":{}}}", serde_json::Value::String(text.to_string()));
    let sealed = webhook::encrypt(&key, plain.as_bytes(), iv);
    assert_eq!(
        webhook::decrypt(&key, &sealed).as_deref(),
        Ok(plain.as_str()),
        "encrypt/decrypt round trip"
    );

    let (ts, nonce) = text.split_at(text.char_indices().nth(4).map_or(text.len(), |(i, _)| i));
    let sig = webhook::signature(ts, nonce, &key, rest);
    let mut headers = HeaderMap::new();
    let (Ok(t), Ok(n), Ok(s)) = (
        HeaderValue::from_str(ts),
        HeaderValue::from_str(nonce),
        HeaderValue::from_str(&sig),
    ) else {
        return;
    };
    headers.insert(webhook::TIMESTAMP_HEADER, t);
    headers.insert(webhook::NONCE_HEADER, n);
    headers.insert(webhook::SIGNATURE_HEADER, s);
    // Header values are trimmed by the HTTP layer's view; only check exact values.
    if headers
        .get(webhook::TIMESTAMP_HEADER)
        .and_then(|v| v.to_str().ok())
        != Some(ts)
        || headers
            .get(webhook::NONCE_HEADER)
            .and_then(|v| v.to_str().ok())
            != Some(nonce)
    {
        return;
    }
    assert!(
        webhook::signature_valid(&headers, &key, rest),
        "a correct signature was refused"
    );
    let mut tampered = rest.to_vec();
    tampered.push(b'!');
    assert!(
        !webhook::signature_valid(&headers, &key, &tampered),
        "a signature for another body was accepted"
    );
}

/// `ui_card` arguments → Lark card: either an error or valid JSON of at most 30 KB; the other
/// renderers never panic.
pub fn lark_card(data: &[u8]) {
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(ui) = ethan_cards::Ui::from_tool_args(&args) else {
        return;
    };
    if let Ok(card) = ethan_cards::render_lark(&ui) {
        let json = serde_json::to_string(&card).expect("card serialises");
        assert!(
            json.len() <= ethan_cards::LARK_CARD_LIMIT,
            "Lark card of {} bytes",
            json.len()
        );
        serde_json::from_str::<serde_json::Value>(&json).expect("card JSON parses");
    }
    let _ = ethan_cards::render_telegram(&ui);
    let _ = ethan_cards::render_text(&ui);
    let _ = ethan_cards::render_a2ui(&ui);
}

/// The shell classifier: no panic (not even one it catches itself and reports as "classifier
/// error"); a command containing a configured secret always asks.
pub fn shell_classifier(data: &[u8]) {
    let command = String::from_utf8_lossy(data);
    let secrets = vec!["hunter2-secret".to_string()];
    let c = ethan_shell_classifier::classify(&command, &secrets);
    assert!(
        !c.reasons.iter().any(|r| r == "classifier error"),
        "the classifier panicked on {command:?}"
    );
    if command.contains("hunter2-secret") {
        assert_eq!(
            c.class,
            ethan_shell_classifier::ShellClass::Always,
            "a command with a secret in it: {command:?} → {c:?}"
        );
    }
}

/// Configuration from arbitrary JSON: an error or a config, never a panic.
pub fn config(data: &[u8]) {
    if let Ok(raw) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = ethan::config::from_value(raw);
    }
}
