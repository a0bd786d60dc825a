//! The kept window's resumption and the memos of its messages.

use super::*;

fn numbered(from: i64, msgs: Vec<ChatMessage>) -> Vec<(i64, ChatMessage)> {
    msgs.into_iter().zip(from..).map(|(m, i)| (i, m)).collect()
}

fn kept(history: Vec<(i64, ChatMessage)>) -> KeptWindow {
    let mut k = KeptWindow::default();
    k.keep("s".into(), 0, 4, history);
    k
}

fn delta(after: Vec<(i64, ChatMessage)>, held_now: u64) -> Option<WindowDelta> {
    Some(WindowDelta { after, held_now })
}

#[test]
fn the_delta_is_appended_and_the_front_cut_to_the_limit_and_a_user_message() {
    let held = numbered(1, vec![ChatMessage::user("a"), ChatMessage::assistant("A")]);
    let mut k = kept(held);
    let mark = k.mark().unwrap();
    assert_eq!((mark.first_id, mark.last_id, mark.len), (1, 2, 2));
    let more = numbered(
        3,
        vec![
            ChatMessage::user("b"),
            ChatMessage::tool("c", "r"),
            ChatMessage::assistant("B"),
        ],
    );
    // Five messages, a limit of four: the front is cut to "b", the next user message.
    let w = k.resume("s", 0, 4, delta(more, 2)).unwrap();
    let ids: Vec<i64> = w.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [3, 4, 5]);
    assert!(!k.is_kept(), "taken out for the turn");
}

#[test]
fn a_window_that_cannot_be_trusted_is_not_resumed() {
    let held = || numbered(1, vec![ChatMessage::user("a"), ChatMessage::assistant("A")]);
    let nothing = || delta(Vec::new(), 2);
    assert!(kept(held()).resume("s", 0, 4, nothing()).is_some());
    // Another session, compaction point, window size; no delta; a count that differs.
    assert!(kept(held()).resume("t", 0, 4, nothing()).is_none());
    assert!(kept(held()).resume("s", 7, 4, nothing()).is_none());
    assert!(kept(held()).resume("s", 0, 5, nothing()).is_none());
    assert!(kept(held()).resume("s", 0, 4, None).is_none());
    assert!(kept(held())
        .resume("s", 0, 4, delta(Vec::new(), 3))
        .is_none());
    assert!(KeptWindow::default().mark().is_none());
    let mut k = kept(held());
    k.clear();
    assert!(k.mark().is_none());
    k.keep("s".into(), 0, 4, Vec::new());
    assert!(!k.is_kept(), "an empty window is not kept");
}

mod memos {
    //! The requests of a conversation built from the messages' memos are, byte for byte, the
    //! ones built afresh from the store, turn after turn.

    use super::super::{derive, KeptWindow, Wanted};
    use crate::agent::prompt;
    use crate::provider::openai::body_bytes;
    use crate::tokens;
    use ethan_core::message::{ChatMessage, Derived, ImagePart, Role, ToolCall, ToolSpec};
    use ethan_core::store::WindowDelta;
    use std::borrow::Cow;

    const LIMIT: usize = 9;

    /// A session's stored messages, ids rising.
    struct Store {
        session: String,
        rows: Vec<(i64, ChatMessage)>,
        next: i64,
    }

    impl Store {
        /// What a whole load gives: the newest [`LIMIT`] messages after `upto`, from a user
        /// message on.
        fn load(&self, upto: i64) -> Vec<(i64, ChatMessage)> {
            let after: Vec<_> = self.rows.iter().filter(|(id, _)| *id > upto).collect();
            let newest = &after[after.len().saturating_sub(LIMIT)..];
            let first = newest.iter().position(|(_, m)| m.role == Role::User);
            newest[first.unwrap_or(newest.len())..]
                .iter()
                .map(|r| (*r).clone())
                .collect()
        }

        /// What the store tells a worker that kept `kept`: the messages after it, and how many
        /// of its range it holds.
        fn delta(&self, kept: &KeptWindow) -> Option<WindowDelta> {
            let mark = kept.mark()?;
            (mark.session_id == self.session).then(|| {
                let after: Vec<_> = (self.rows.iter())
                    .filter(|(id, _)| *id > mark.last_id)
                    .cloned()
                    .collect();
                let held = self
                    .rows
                    .iter()
                    .filter(|(id, _)| (mark.first_id..=mark.last_id).contains(id));
                WindowDelta {
                    after: after[after.len().saturating_sub(LIMIT)..].to_vec(),
                    held_now: held.count() as u64,
                }
            })
        }

        /// Stores a turn's messages as the store keeps them: without pictures.
        fn append(&mut self, turn: &[ChatMessage]) {
            for m in turn {
                let mut m = m.clone();
                m.images.clear();
                self.rows.push((self.next, m));
                self.next += 1;
            }
        }
    }

    fn picture() -> ImagePart {
        ImagePart {
            mime: "image/png".into(),
            data: std::sync::Arc::from(&b"\x89PNG\r\n\x1a\n-not-really-a-png"[..]),
            path: "/tmp/p.png".into(),
        }
    }

    /// The messages of one request: the system prompt, the summary, the history and the turn,
    /// each as shown.
    fn request<'w>(
        summary: Option<&str>,
        history: &'w [(i64, ChatMessage)],
        turn: &[ChatMessage],
        zone: chrono_tz::Tz,
    ) -> Vec<Cow<'w, ChatMessage>> {
        let mut messages = vec![Cow::Owned(ChatMessage::system("You are Ethan."))];
        messages.extend(summary.map(|s| Cow::Owned(ChatMessage::user(s))));
        messages.extend(history.iter().map(|(_, m)| prompt::shown(m, zone)));
        let turn = turn.iter().map(|m| prompt::stamped(m.clone(), zone));
        messages.extend(turn.map(Cow::Owned));
        messages
    }

    /// `messages` as nobody kept them.
    fn without_memos(messages: &[Cow<'_, ChatMessage>]) -> Vec<Cow<'static, ChatMessage>> {
        let fresh = messages.iter().map(|m| ChatMessage {
            derived: Derived::default(),
            ..(**m).clone()
        });
        ethan_core::provider::owned(fresh)
    }

    /// The turn `n`: a question (with a picture every third turn), then on odd turns a tool
    /// call (one without text, one with), its results (one an error), pictures a tool
    /// returned, and the answer.
    fn turn(n: i64) -> Vec<ChatMessage> {
        let text = format!("q{n} \"quoted\" \\ line\nbreak\ttab 你好 😀 \u{1}");
        let mut asked = if n % 3 == 0 {
            ChatMessage::user_with_images(text, vec![picture()])
        } else {
            ChatMessage::user(text)
        };
        // One question without a time: nothing stamped in front of it.
        asked.sent_at = (n != 4).then_some(1_796_433_240 + n * 3_600);
        let mut turn = vec![asked];
        if n % 2 == 1 {
            let mut call = ChatMessage::assistant(if n % 4 == 1 { "" } else { "Let me look." });
            if n % 4 == 1 {
                call.content = None;
            }
            call.tool_calls = vec![
                ToolCall::new(format!("c{n}a"), "file_read", r#"{"path": "a \"b\".txt"}"#),
                ToolCall::new(format!("c{n}b"), "shell", r#"{"cmd": "ls"}"#),
            ];
            turn.push(call);
            turn.push(ChatMessage::tool(format!("c{n}a"), "file text\n{\"k\": 1}"));
            turn.push(ChatMessage::tool_error(format!("c{n}b"), "Error: refused"));
            turn.push(ChatMessage::user_with_images(
                "[file_read returned a picture]",
                vec![picture()],
            ));
        }
        turn.push(ChatMessage::assistant(format!("answer {n} ✓ «done»")));
        turn
    }

    #[test]
    fn requests_from_memos_are_the_requests_built_afresh() {
        let tools = [ToolSpec {
            name: "file_read".into(),
            description: "Reads a file.".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        let mut store = Store {
            session: "s1".into(),
            rows: Vec::new(),
            next: 1,
        };
        let mut kept = KeptWindow::default();
        let (mut upto, mut summary): (i64, Option<String>) = (0, None);
        let mut zone = chrono_tz::Asia::Shanghai;
        let (mut resumed, mut requests, mut compactions) = (0, 0, 0);
        for n in 1..=24 {
            if n == 15 {
                // `/new`: another session, nothing stored yet, no summary.
                store = Store {
                    session: "s2".into(),
                    rows: Vec::new(),
                    next: store.next,
                };
                (upto, summary) = (0, None);
            }
            if n == 20 {
                // The configured zone changed: every stamp is another.
                zone = chrono_tz::America::New_York;
            }
            let wanted = Wanted {
                zone,
                chat_json: true,
            };
            let delta = store.delta(&kept);
            let mut history = match kept.resume(&store.session, upto, LIMIT, delta) {
                Some(h) => {
                    resumed += 1;
                    h
                }
                None => store.load(upto),
            };
            derive(&mut history, wanted);
            assert_eq!(
                history.iter().map(|(_, m)| m.clone()).collect::<Vec<_>>(),
                store
                    .load(upto)
                    .into_iter()
                    .map(|(_, m)| m)
                    .collect::<Vec<_>>(),
                "turn {n}: the window a whole load gives"
            );
            let read_after = upto;
            let own = turn(n);
            // Compaction before the second request of turn 9 and the first of turn 12: the
            // window's front is summarised.
            let compact_at = match n {
                9 => Some(1),
                12 => Some(0),
                _ => None,
            };
            // The question; then the calls, their results and the pictures.
            let steps: Vec<usize> = (1..own.len()).filter(|&i| i == 1 || i == 5).collect();
            for (s, upto_step) in steps.iter().enumerate() {
                if compact_at == Some(s) && history.len() > 2 {
                    let split = history
                        .iter()
                        .skip(1)
                        .position(|(_, m)| m.role == Role::User);
                    let split = split.map_or(history.len(), |p| p + 1);
                    let kept_part = history.split_off(split);
                    upto = history.last().map_or(upto, |(id, _)| *id);
                    summary = Some(format!("## Summary up to {upto} \"of\" it"));
                    history = kept_part;
                    compactions += 1;
                }
                let sent = request(summary.as_deref(), &history, &own[..*upto_step], zone);
                let fresh = without_memos(&sent);
                let from_memos = sent.iter().filter(|m| {
                    let len = m.content.as_ref().map_or(0, String::len);
                    m.derived.get().and_then(|d| d.chat_json(len)).is_some()
                });
                assert_eq!(from_memos.count(), history.len(), "turn {n}: copied");
                let borrowed = sent.iter().filter(|m| matches!(m, Cow::Borrowed(_)));
                assert_eq!(borrowed.count(), history.len(), "turn {n}: none copied");
                assert_eq!(
                    String::from_utf8(body_bytes(&sent, &tools)).unwrap(),
                    String::from_utf8(body_bytes(&fresh, &tools)).unwrap(),
                    "turn {n}, request {s}"
                );
                assert_eq!(tokens::chars_of(&sent), tokens::chars_of(&fresh));
                let answer = ChatMessage::assistant("a");
                assert_eq!(
                    tokens::estimate(&sent, &tools, &answer),
                    tokens::estimate(&fresh, &tools, &answer)
                );
                requests += 1;
            }
            store.append(&own);
            if upto == read_after {
                kept.keep(store.session.clone(), read_after, LIMIT, history);
            } else {
                kept.clear();
            }
        }
        assert!(resumed >= 15, "{resumed} turns resumed the kept window");
        assert!(requests >= 30);
        assert_eq!(compactions, 2);
    }

    #[test]
    fn a_memo_is_made_once_and_a_changed_text_is_written_afresh() {
        let wanted = Wanted {
            zone: chrono_tz::UTC,
            chat_json: true,
        };
        let mut asked = ChatMessage::user("hello");
        asked.sent_at = Some(1_796_433_240);
        let mut history = vec![(1, asked), (2, ChatMessage::assistant("hi"))];
        derive(&mut history, wanted);
        let memo = history[0].1.derived.get().unwrap();
        assert_eq!(&*memo.stamp, "[Sat 2026-12-05 01:14 UTC] ");
        assert_eq!(memo.chars, 5);
        let made = memo as *const _;
        derive(&mut history, wanted);
        assert!(
            std::ptr::eq(made, history[0].1.derived.get().unwrap()),
            "kept"
        );
        // Not wanted: no JSON; wanted later: made then.
        let mut plain = vec![(3, ChatMessage::assistant("x"))];
        derive(
            &mut plain,
            Wanted {
                chat_json: false,
                ..wanted
            },
        );
        assert!(plain[0].1.derived.get().unwrap().chat_json.is_none());
        derive(&mut plain, wanted);
        assert!(plain[0].1.derived.get().unwrap().chat_json.is_some());
        // A text changed after its memo was made: counted and written as it is now.
        let mut shown = prompt::stamped(history[0].1.clone(), wanted.zone);
        shown.content = Some("[Sat 2026-12-05 01:14 UTC] HELLO, more".into());
        let sent = [Cow::Borrowed(&shown)];
        let fresh = without_memos(&sent);
        assert_eq!(body_bytes(&sent, &[]), body_bytes(&fresh, &[]));
        assert_eq!(tokens::message_chars(&shown), tokens::counted_chars(&shown));
    }
}
