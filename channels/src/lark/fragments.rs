//! Reassembly of Lark data frames that the long connection splits into fragments.
//!
//! This module owns the fragment rules of the pbbp2 protocol (PROTOCOLS §1; the official SDKs'
//! `combine` logic): a large event or card callback arrives as several data frames sharing a
//! `message_id` header, with `sum` (how many fragments) and `seq` (0-based index of this one).
//! Fragments may arrive in any order; the message is the concatenation of the payloads in `seq`
//! order once every index has arrived. A frame without `sum` (or with `sum` ≤ 1) is a whole
//! message. Incomplete messages are forgotten [`FRAGMENT_TTL`] after their last fragment.
//!
//! Memory is bounded whatever the peer sends: at most [`MAX_FRAGMENTS`] fragments per message,
//! [`MAX_PENDING_MESSAGES`] incomplete messages and [`MAX_PENDING_BYTES`] of buffered payload;
//! past a bound the least recently touched incomplete messages are dropped first.
//!
//! [`ws`](super::ws) feeds every data frame through one [`Fragments`] per connection; the fuzz
//! target `lark_frame` feeds it decoded arbitrary frames.

use super::frame::{Frame, HEADER_MESSAGE_ID, HEADER_SEQ, HEADER_SUM};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long fragments of an incomplete message are kept (SDKs: 5 s).
pub const FRAGMENT_TTL: Duration = Duration::from_secs(5);
/// Most fragments of one message accepted.
pub const MAX_FRAGMENTS: usize = 256;
/// Most incomplete messages kept at once.
pub const MAX_PENDING_MESSAGES: usize = 1024;
/// Most payload bytes buffered for incomplete messages at once.
pub const MAX_PENDING_BYTES: usize = 16 * 1024 * 1024;

/// Fragments of split messages, by `message_id` header.
#[derive(Default)]
pub struct Fragments {
    pending: HashMap<String, Partial>,
    /// Sum of the payload bytes held in `pending`.
    bytes: usize,
}

struct Partial {
    slots: Vec<Option<Vec<u8>>>,
    bytes: usize,
    touched: Instant,
}

impl Fragments {
    /// Add one data frame received at `now`. `Ok(Some(payload))` when the message is complete,
    /// `Ok(None)` while fragments are missing, `Err` for inconsistent headers or a message
    /// larger than [`MAX_PENDING_BYTES`].
    pub fn add(&mut self, frame: &Frame, now: Instant) -> Result<Option<Vec<u8>>, &'static str> {
        let sum = match frame.header(HEADER_SUM) {
            None => 1,
            Some(s) => s
                .trim()
                .parse::<usize>()
                .map_err(|_| "sum is not a number")?,
        };
        if sum <= 1 {
            return Ok(Some(frame.payload_bytes().to_vec()));
        }
        if sum > MAX_FRAGMENTS {
            return Err("too many fragments");
        }
        let seq = frame
            .header(HEADER_SEQ)
            .unwrap_or("0")
            .trim()
            .parse::<usize>()
            .map_err(|_| "seq is not a number")?;
        if seq >= sum {
            return Err("seq is not below sum");
        }
        let id = frame
            .header(HEADER_MESSAGE_ID)
            .filter(|m| !m.is_empty())
            .ok_or("a fragment without message_id")?
            .to_string();
        let payload = frame.payload_bytes();
        self.expire(now);
        if !self.pending.contains_key(&id) {
            while self.pending.len() >= MAX_PENDING_MESSAGES {
                self.evict_oldest(None);
            }
        }
        let partial = self.pending.entry(id.clone()).or_insert_with(|| Partial {
            slots: vec![None; sum],
            bytes: 0,
            touched: now,
        });
        if partial.slots.len() != sum {
            partial.slots = vec![None; sum];
            self.bytes -= partial.bytes;
            partial.bytes = 0;
        }
        let old = partial.slots[seq].take().map_or(0, |p| p.len());
        partial.bytes -= old;
        self.bytes -= old;
        if partial.bytes + payload.len() > MAX_PENDING_BYTES {
            self.remove(&id);
            return Err("message larger than the fragment buffer");
        }
        while self.bytes + payload.len() > MAX_PENDING_BYTES {
            self.evict_oldest(Some(&id));
        }
        let partial = self.pending.get_mut(&id).expect("still pending");
        partial.slots[seq] = Some(payload.to_vec());
        partial.bytes += payload.len();
        partial.touched = now;
        self.bytes += payload.len();
        if partial.slots.iter().all(Option::is_some) {
            let whole = self
                .remove(&id)
                .map(|p| p.slots.into_iter().flatten().flatten().collect())
                .unwrap_or_default();
            return Ok(Some(whole));
        }
        Ok(None)
    }

    /// How many messages are incomplete.
    pub fn pending_messages(&self) -> usize {
        self.pending.len()
    }

    /// Payload bytes buffered for incomplete messages.
    pub fn pending_bytes(&self) -> usize {
        self.bytes
    }

    /// Forget messages whose last fragment is older than [`FRAGMENT_TTL`].
    fn expire(&mut self, now: Instant) {
        let bytes = &mut self.bytes;
        self.pending.retain(|_, p| {
            let keep = now.saturating_duration_since(p.touched) < FRAGMENT_TTL;
            if !keep {
                *bytes -= p.bytes;
            }
            keep
        });
    }

    /// Drop the least recently touched incomplete message other than `keep`.
    fn evict_oldest(&mut self, keep: Option<&str>) {
        let oldest = self
            .pending
            .iter()
            .filter(|(id, _)| Some(id.as_str()) != keep)
            .min_by_key(|(_, p)| p.touched)
            .map(|(id, _)| id.clone());
        // With only `keep` left there is nothing to drop: it alone fits (checked by the caller).
        if let Some(id) = oldest {
            self.remove(&id);
        }
    }

    fn remove(&mut self, id: &str) -> Option<Partial> {
        let p = self.pending.remove(id)?;
        self.bytes -= p.bytes;
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lark::frame::{header, METHOD_DATA};

    fn frag(id: &str, sum: &str, seq: &str, payload: &[u8]) -> Frame {
        Frame {
            seq_id: 1,
            log_id: 2,
            service: 3,
            method: METHOD_DATA,
            headers: vec![
                header("type", "event"),
                header("message_id", id),
                header("sum", sum),
                header("seq", seq),
            ],
            payload_encoding: None,
            payload_type: None,
            payload: Some(payload.to_vec()),
            log_id_new: None,
        }
    }

    #[test]
    fn fragments_reassemble_out_of_order() {
        let mut f = Fragments::default();
        let now = Instant::now();
        assert_eq!(f.add(&frag("m", "3", "2", b"c"), now), Ok(None));
        assert_eq!(f.add(&frag("m", "3", "0", b"a"), now), Ok(None));
        assert_eq!(f.pending_bytes(), 2);
        assert_eq!(
            f.add(&frag("m", "3", "1", b"b"), now),
            Ok(Some(b"abc".to_vec()))
        );
        assert_eq!(f.pending_messages(), 0);
        assert_eq!(f.pending_bytes(), 0);
        assert_eq!(
            f.add(&frag("x", "1", "0", b"z"), now),
            Ok(Some(b"z".to_vec()))
        );
    }

    #[test]
    fn real_fragment_vectors_reassemble() {
        let read = |n: &str| {
            std::fs::read(format!(
                "{}/../tests/fixtures/lark/ws_frames/{n}.bin",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        };
        let a = Frame::decode_bytes(&read("data_event_frag0")).unwrap();
        let b = Frame::decode_bytes(&read("data_event_frag1")).unwrap();
        let whole = Frame::decode_bytes(&read("data_event")).unwrap();
        let mut f = Fragments::default();
        let now = Instant::now();
        assert_eq!(f.add(&b, now), Ok(None));
        assert_eq!(f.add(&a, now), Ok(Some(whole.payload_bytes().to_vec())));
    }

    #[test]
    fn stale_fragments_expire_and_bad_headers_are_errors() {
        let mut f = Fragments::default();
        let t0 = Instant::now();
        assert_eq!(f.add(&frag("m", "2", "0", b"a"), t0), Ok(None));
        let later = t0 + FRAGMENT_TTL + Duration::from_millis(1);
        // The first half expired: the second alone does not complete the message.
        assert_eq!(f.add(&frag("m", "2", "1", b"b"), later), Ok(None));
        assert_eq!(f.pending_bytes(), 1);
        assert!(f.add(&frag("m", "2", "2", b"b"), later).is_err());
        assert!(f.add(&frag("m", "x", "0", b"b"), later).is_err());
        assert!(f.add(&frag("", "2", "0", b"b"), later).is_err());
        assert!(f.add(&frag("m", "100000", "0", b"b"), later).is_err());
    }

    #[test]
    fn a_repeated_fragment_replaces_the_earlier_copy() {
        let mut f = Fragments::default();
        let now = Instant::now();
        assert_eq!(f.add(&frag("m", "2", "0", b"old"), now), Ok(None));
        assert_eq!(f.add(&frag("m", "2", "0", b"a"), now), Ok(None));
        assert_eq!(f.pending_bytes(), 1);
        assert_eq!(
            f.add(&frag("m", "2", "1", b"b"), now),
            Ok(Some(b"ab".to_vec()))
        );
        assert_eq!(f.pending_bytes(), 0);
    }

    #[test]
    fn pending_messages_and_bytes_are_bounded() {
        let mut f = Fragments::default();
        let t0 = Instant::now();
        for i in 0..MAX_PENDING_MESSAGES + 10 {
            let at = t0 + Duration::from_micros(i as u64);
            assert_eq!(f.add(&frag(&format!("m{i}"), "2", "0", b"x"), at), Ok(None));
        }
        assert_eq!(f.pending_messages(), MAX_PENDING_MESSAGES);
        assert_eq!(f.pending_bytes(), MAX_PENDING_MESSAGES);
        // The oldest were dropped, the newest kept.
        let at = t0 + Duration::from_millis(100);
        assert_eq!(f.add(&frag("m0", "2", "1", b"y"), at), Ok(None));
        let last = format!("m{}", MAX_PENDING_MESSAGES + 9);
        assert_eq!(
            f.add(&frag(&last, "2", "1", b"y"), at),
            Ok(Some(b"xy".to_vec()))
        );

        let mut f = Fragments::default();
        let big = vec![7u8; MAX_PENDING_BYTES / 2];
        assert_eq!(f.add(&frag("a", "3", "0", &big), t0), Ok(None));
        assert_eq!(f.add(&frag("b", "3", "0", &big), t0), Ok(None));
        // A third half pushes the oldest out.
        assert_eq!(f.add(&frag("c", "3", "0", &big), t0), Ok(None));
        assert_eq!(f.pending_messages(), 2);
        assert!(f.pending_bytes() <= MAX_PENDING_BYTES);
        // One message alone may not exceed the buffer.
        assert_eq!(f.add(&frag("c", "3", "1", &big), t0), Ok(None));
        assert!(f.add(&frag("c", "3", "2", b"!"), t0).is_err());
        assert_eq!(f.pending_messages(), 0);
        assert_eq!(f.pending_bytes(), 0);
    }
}
