//! The text of a streamed answer that may still turn out to be a tool call written as text
//! ([`super::tolerant`]: `<tool_call>{…}</tool_call>`, or a fenced JSON block holding one call),
//! kept back from the person until it is known not to be one. A call is never shown raw as it
//! streams; ordinary text is shown as it comes.
//!
//! What is kept back, when the request offered tools:
//! - from a `<tool_call>` tag to the end of the answer, and a last piece that could be the
//!   start of the tag (`<tool_`);
//! - a line that could be the opening of a fenced block (` ``` `, ` ```json `, or only
//!   spaces so far), and a fenced block from its opening line until it closes: a block that
//!   holds a call keeps everything after it back to the end; one that holds anything else is
//!   shown, and then no later block can be a call (the parser takes fenced calls only when
//!   every fenced block is one), so blocks are no longer kept back.
//!
//! At the end of the answer ([`HeldText::finish`]) the rest is shown when the answer (read by
//! the one parser) has no tool calls, and dropped when it has: the text is then the call's, or
//! a preamble the turn withdraws anyway.

use super::tolerant::{is_call_fence, is_fence_end, parse_call, CALL_TAG};

/// The text of one streamed answer, and how much of it was shown.
#[derive(Debug)]
pub struct HeldText {
    /// Off: the request offered no tools, so nothing can be a call.
    on: bool,
    text: String,
    /// Bytes of `text` shown.
    shown: usize,
    /// Where the next search for [`CALL_TAG`] starts.
    tag_from: usize,
    /// The start of the line not yet ended.
    line_start: usize,
    /// An open fenced block: the start of its opening line.
    fence: Option<usize>,
    /// Whether a fenced block can still be a call.
    fences_matter: bool,
    /// Everything from here on stays back until the end.
    held_from: Option<usize>,
}

impl HeldText {
    /// For an answer to a request that offered tools (`offered_tools`), or not.
    pub fn new(offered_tools: bool) -> Self {
        Self {
            on: offered_tools,
            text: String::new(),
            shown: 0,
            tag_from: 0,
            line_start: 0,
            fence: None,
            fences_matter: true,
            held_from: None,
        }
    }

    /// Takes the next piece of text; returns what may be shown now, if anything.
    pub fn push(&mut self, piece: &str) -> Option<String> {
        if !self.on {
            return (!piece.is_empty()).then(|| piece.to_string());
        }
        self.text.push_str(piece);
        if self.held_from.is_some() {
            return None;
        }
        if let Some(at) = self.text[self.tag_from..].find(CALL_TAG) {
            let at = self.tag_from + at;
            let from = self.fence.map_or(at, |f| f.min(at));
            return self.hold_from(from);
        }
        self.tag_from = floor_boundary(
            &self.text,
            self.text.len().saturating_sub(CALL_TAG.len() - 1),
        )
        .max(self.shown);
        while let Some(end) = self.text[self.line_start..].find('\n') {
            let start = self.line_start;
            let end = start + end + 1;
            self.line_start = end;
            if let Some(held) = self.end_line(start, end) {
                return self.hold_from(held);
            }
        }
        let mut safe = self.fence.unwrap_or(self.text.len());
        if self.fence.is_none() {
            let tail = self.text[self.line_start..].trim();
            if self.fences_matter && (tail.is_empty() || "```json".starts_with(tail)) {
                safe = self.line_start;
            }
            if let Some(k) = (1..CALL_TAG.len())
                .rev()
                .find(|&k| self.text.ends_with(&CALL_TAG[..k]))
            {
                safe = safe.min(self.text.len() - k);
            }
        }
        self.show_to(safe)
    }

    /// The line `start..end` (ended by `\n`) has been read: opens or closes a fenced block.
    /// Returns where to keep everything back from, when a block turned out to hold a call.
    fn end_line(&mut self, start: usize, end: usize) -> Option<usize> {
        let line = &self.text[start..end];
        match self.fence {
            None if self.fences_matter && is_call_fence(line) => self.fence = Some(start),
            Some(open) if is_fence_end(line) => {
                let body_start = open + self.text[open..].find('\n').map_or(0, |i| i + 1);
                let body = self.text[body_start..start].trim();
                self.fence = None;
                if parse_call(body).is_some() {
                    return Some(open);
                }
                // Another block: shown, and no block can be a call any more.
                self.fences_matter = false;
            }
            _ => {}
        }
        None
    }

    /// Keep everything from `at` back to the end; show what comes before it.
    fn hold_from(&mut self, at: usize) -> Option<String> {
        self.held_from = Some(at);
        self.show_to(at)
    }

    fn show_to(&mut self, to: usize) -> Option<String> {
        if to <= self.shown {
            return None;
        }
        let out = self.text[self.shown..to].to_string();
        self.shown = to;
        Some(out)
    }

    /// The answer ended: what is left to show when it has no tool calls (`has_calls` false),
    /// nothing when it has.
    pub fn finish(&mut self, has_calls: bool) -> Option<String> {
        if has_calls {
            return None;
        }
        self.show_to(self.text.len())
    }
}

/// The largest char boundary of `s` at or below `i`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::types::ChatMessage;

    /// Feeds `text` in pieces of `step` characters; what was shown while streaming, and at the
    /// end (when the one parser finds no call).
    fn stream(text: &str, step: usize) -> (String, String) {
        let mut h = HeldText::new(true);
        let chars: Vec<char> = text.chars().collect();
        let mut during = String::new();
        for piece in chars.chunks(step) {
            during.extend(h.push(&piece.iter().collect::<String>()));
        }
        let mut m = ChatMessage::assistant(text);
        crate::provider::tolerant::finish_message(&mut m, true);
        let rest = h.finish(!m.tool_calls.is_empty()).unwrap_or_default();
        (during, rest)
    }

    #[test]
    fn plain_text_is_shown_as_it_comes() {
        for step in [1, 3, 8, 1000] {
            let text = "Hello, wörld! Here is `code` and <b>html</b>.\nA second line.";
            let (during, rest) = stream(text, step);
            assert_eq!((during.as_str(), rest.as_str()), (text, ""), "step {step}");
        }
    }

    #[test]
    fn a_call_in_tags_is_never_shown() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>";
        for step in [1, 2, 5, 8, 1000] {
            let (during, rest) = stream(text, step);
            assert_eq!(during, "Let me look.\n", "step {step}");
            assert_eq!(rest, "", "step {step}");
        }
        // A tag that is not a call after all is shown at the end, whole and in order.
        let text = "Use <tool_call> tags like this: <tool_call>{broken</tool_call> ok";
        let (during, rest) = stream(text, 3);
        assert_eq!(format!("{during}{rest}"), text);
        assert_eq!(during, "Use ");
        // A `<` that does not become the tag is shown once the next piece says so.
        let mut h = HeldText::new(true);
        assert_eq!(h.push("a <to").as_deref(), Some("a "));
        assert_eq!(h.push("p").as_deref(), Some("<top"));
    }

    #[test]
    fn a_fenced_call_is_kept_back_and_other_blocks_are_shown() {
        let call = "```json\n{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}\n```\n";
        for step in [1, 4, 1000] {
            let (during, rest) = stream(call, step);
            assert_eq!((during.as_str(), rest.as_str()), ("", ""), "step {step}");
        }
        let data = "Here:\n```json\n{\"a\": 1}\n```\nand then more text\n";
        let (during, rest) = stream(data, 2);
        assert!(
            during.starts_with("Here:\n```json\n{\"a\": 1}\n```\nand then"),
            "{during:?}"
        );
        assert_eq!(format!("{during}{rest}"), data);
        // After a block that is not a call, none can be one: the next block streams.
        let two = format!("{data}```\n{{\"name\": \"x\", \"arguments\": {{}}}}\n```\nend");
        let (during, rest) = stream(&two, 1);
        assert_eq!((during.as_str(), rest.as_str()), (two.as_str(), ""));
        // A call block followed by another block: not calls after all, shown in order.
        let mixed = format!("{call}{data}");
        let (during, rest) = stream(&mixed, 3);
        assert_eq!(during, "");
        assert_eq!(rest, mixed);
        // Code in another language is never kept back.
        let (during, _) = stream("```python\nprint(1)\n", 1);
        assert_eq!(during, "```python\nprint(1)\n");
    }

    #[test]
    fn without_tools_nothing_is_kept_back() {
        let mut h = HeldText::new(false);
        assert_eq!(h.push("<tool_call>{").as_deref(), Some("<tool_call>{"));
        assert_eq!(h.finish(false), None);
    }
}
