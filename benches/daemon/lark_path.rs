//! The Lark path: the figures of the Telegram runs for a Lark group. A group is a public room
//! (`src/daemon/group_view.rs`): no text is shown before the final answer, so an answer without
//! tool lines is one ordinary reply card sent when the turn ends; a turn that shows tool lines
//! is a CardKit streaming card (PROTOCOLS §5.2), created with the first line, sent as the reply
//! to the @mention, and closed (`PATCH …/settings`, `streaming_mode: false`) with the answer.
//! An answer is *final on screen* at whichever of the two arrives: the ordinary reply carrying
//! its `bench-<tag>`, or the settings patch closing the card that shows it.
//!
//! The user's message goes out as an `im.message.receive_v1` event on the fake's websocket (real
//! pbbp2 frames); the instant model of [`crate::fake`] answers it, and the Lark fake records when
//! each card, reply and settings patch arrived. Legs per message, in µs:
//! - *inbound*: the event frame pushed → the model request arrived;
//! - *outbound*: the model's answer complete → the answer final on screen;
//! - *first update*: the model's first chunk written → the first message of the answer arrived
//!   (the first thing the group sees: the card's reply, or the ordinary reply).

use crate::fake::{self, Fakes};
use crate::lark::{self, FakeLark};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The sequential runs take turns over this many groups (`oc_bench_group_<n>`), and send to a
/// group again only [`SPACING`] after its last answer: Lark accepts at most 5 messages a second
/// to one chat, and the daemon spaces its messages to a chat by 200 ms (`Pacer`), which one
/// group answered at machine speed would measure instead of the daemon.
const GROUPS: usize = 50;
/// The least time between a group's answer and the next message to that group.
const SPACING: Duration = Duration::from_millis(205);
/// The bot owner's `open_id` (in the bench's `owners`): the sequential runs' sender.
pub const OWNER: &str = "ou_bench_owner_0001";
/// Groups of the throughput run are `oc_bench_burst_<n>`; their sender is not the owner.
const BURST_SENDER: &str = "ou_bench_member_0001";

/// The turn-taking of the sequential runs over [`GROUPS`] groups: the next group, and when each
/// was last answered. One for all the runs of a daemon, so a run does not write to a group the
/// previous run answered less than [`SPACING`] ago.
pub struct Groups {
    next: usize,
    answered: Vec<Option<Instant>>,
}

impl Groups {
    pub fn new() -> Groups {
        Groups {
            next: 0,
            answered: vec![None; GROUPS],
        }
    }
}

/// Per-message legs of one Lark run, in microseconds.
#[derive(Default)]
pub struct LarkLegs {
    pub inbound: Vec<f64>,
    pub outbound: Vec<f64>,
    pub both: Vec<f64>,
    pub first_update: Vec<f64>,
}

fn us(a: Option<Instant>, b: Option<Instant>) -> Option<f64> {
    Some(b?.saturating_duration_since(a?).as_secs_f64() * 1e6)
}

/// Answers final on screen since a starting point: cards closed, counted by the fake, and
/// ordinary replies (no card entity) carrying a `bench-<tag>`, read as they arrive.
struct Answers {
    cards_before: usize,
    cursor: usize,
    replies: HashMap<u64, Instant>,
}

impl Answers {
    fn start(lark: &FakeLark) -> Answers {
        let mut cursor = 0;
        lark.messages_since(&mut cursor);
        Answers {
            cards_before: lark.finished_cards(),
            cursor,
            replies: HashMap::new(),
        }
    }

    /// Read the replies that arrived since the last call.
    fn poll(&mut self, lark: &FakeLark) {
        for m in lark.messages_since(&mut self.cursor) {
            if m.card_entity.is_some() {
                continue; // a streaming card: final when closed
            }
            if let Some(tag) = fake::tag_of(&m.content.to_string()) {
                self.replies.entry(tag).or_insert(m.at.into_std());
            }
        }
    }

    fn count(&self, lark: &FakeLark) -> usize {
        lark.finished_cards().saturating_sub(self.cards_before) + self.replies.len()
    }

    /// Wait until `n` answers are final; `false` after `timeout`.
    async fn wait(&mut self, lark: &FakeLark, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll(lark);
            if self.count(lark) >= n {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }
}

/// Push `@bot <text> bench-<tag>` into `chat` from `sender`; returns the tag.
fn push(fakes: &Fakes, lark: &FakeLark, chat: &str, sender: &str, text: &str) -> u64 {
    let tag = fakes.new_tag();
    let envelope = lark::group_mention(chat, sender, &format!("{text} bench-{tag}"));
    let at = Instant::now();
    lark.push_event(&envelope);
    fakes.set_handed(tag, at);
    tag
}

/// `n` @mentions of the bot by its owner, one in flight at a time, taking turns over `groups`.
pub async fn sequential(
    fakes: &Fakes,
    lark: &FakeLark,
    groups: &mut Groups,
    n: usize,
    timeout: Duration,
) -> Result<LarkLegs, String> {
    let mut tags = Vec::with_capacity(n);
    let mut answers = Answers::start(lark);
    for i in 0..n {
        let g = groups.next;
        groups.next = (g + 1) % GROUPS;
        if let Some(at) = groups.answered[g] {
            tokio::time::sleep_until((at + SPACING).into()).await;
        }
        let tag = push(
            fakes,
            lark,
            &format!("oc_bench_group_{g:04}"),
            OWNER,
            "hello",
        );
        if !answers.wait(lark, i + 1, timeout).await {
            return Err(format!(
                "Lark message {i} (bench-{tag}) got no final answer (a reply or a closed card) \
                 in {timeout:?}"
            ));
        }
        groups.answered[g] = Some(Instant::now());
        tags.push(tag);
    }
    Ok(legs(fakes, lark, &tags, &answers.replies))
}

/// `chats` groups, one @mention each, pushed at once: (answers final on screen, seconds from the
/// first push to the last of them).
pub async fn burst(
    fakes: &Fakes,
    lark: &FakeLark,
    chats: usize,
    timeout: Duration,
) -> (usize, f64) {
    let mut answers = Answers::start(lark);
    let t0 = Instant::now();
    for c in 0..chats {
        push(
            fakes,
            lark,
            &format!("oc_bench_burst_{c:05}"),
            BURST_SENDER,
            "msg",
        );
    }
    answers.wait(lark, chats, timeout).await;
    let settings = lark.card_settings();
    let closed: Vec<Instant> = settings
        .iter()
        .filter(|s| s.closes_streaming())
        .map(|s| s.at.into_std())
        .chain(answers.replies.values().copied())
        .filter(|at| *at >= t0)
        .collect();
    let last = closed.iter().max().copied().unwrap_or(t0);
    (closed.len(), last.duration_since(t0).as_secs_f64())
}

/// The legs of `tags`, from the fakes' records: each card or ordinary reply (`replies`, when it
/// arrived) is matched to its message by the `bench-<tag>` its answer shows.
fn legs(fakes: &Fakes, lark: &FakeLark, tags: &[u64], replies: &HashMap<u64, Instant>) -> LarkLegs {
    let mut card_of: HashMap<u64, String> = HashMap::new();
    for card in lark.cards() {
        if let Some(tag) = fake::tag_of(&card.current().to_string()) {
            card_of.entry(tag).or_insert(card.card_id);
        }
    }
    let mut closed_at: HashMap<String, Instant> = HashMap::new();
    for s in lark.card_settings() {
        if s.closes_streaming() {
            closed_at.entry(s.card_id).or_insert(s.at.into_std());
        }
    }
    let mut shown_at: HashMap<String, Instant> = HashMap::new();
    for m in lark.messages() {
        if let Some(card) = m.card_entity {
            shown_at.entry(card).or_insert(m.at.into_std());
        }
    }
    let mut out = LarkLegs::default();
    for tag in tags {
        let [handed, model_in, first_token, model_out] = fakes.model_times(*tag);
        let card = card_of.get(tag);
        let reply = replies.get(tag).copied();
        let closed = card.and_then(|c| closed_at.get(c)).copied().or(reply);
        let shown = card.and_then(|c| shown_at.get(c)).copied().or(reply);
        let inbound = us(handed, model_in);
        let outbound = us(model_out, closed);
        out.inbound.extend(inbound);
        out.outbound.extend(outbound);
        if let (Some(a), Some(b)) = (inbound, outbound) {
            out.both.push(a + b);
        }
        out.first_update.extend(us(first_token, shown));
    }
    out
}
