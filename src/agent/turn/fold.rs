//! Fold the results: each call's outcome into the turn — its result as the tool message the
//! model reads next, its end to the watcher, outside text it brought marked on the taint, its
//! card to the [`Sink`], the tools it activated (`find_tools`) added to the offer, the pictures
//! it returned for a model with vision. A turn stopped while its calls ran keeps, call by call,
//! what happened.

use super::sink::Sink;
use crate::agent::pictures;
use crate::config::Config;
use crate::memory::provenance;
use crate::tools::executor::{CallOutcome, Progress};
use crate::tools::Taint;
use ethan_core::message::{ChatMessage, ToolCall};
use std::collections::BTreeSet;

/// What the results of one step go into.
pub(super) struct Fold<'a, 's> {
    /// The turn's messages.
    pub turn: &'a mut Vec<ChatMessage>,
    pub taint: &'a Taint,
    /// The tools sent with the requests.
    pub active: &'a mut Vec<String>,
    /// The tools the turn may use.
    pub allowed: &'a BTreeSet<String>,
    pub sink: &'a mut Sink<'s>,
}

impl Fold<'_, '_> {
    /// The outcomes of calls that all ran, in order; then the pictures they returned, for the
    /// next request only (the history keeps the text).
    pub(super) async fn results(&mut self, results: Vec<CallOutcome>, cfg: &Config) {
        let mut shown = Vec::new();
        for r in results {
            self.sink.tool_end(&r);
            let name = r.tool.as_deref().unwrap_or(&r.requested);
            // find_tools lists the descriptions of the turn's tools, an MCP server's among them.
            let listed = name == crate::tools::policy::FIND_TOOLS
                && provenance::foreign_description(self.allowed).is_some();
            if provenance::brings_outside_text(name) || listed {
                self.taint.mark_untrusted(name);
            }
            if let Some(ui) = &r.result.ui {
                match serde_json::from_value::<ethan_cards::Ui>(ui.clone()) {
                    Ok(ui) => self.sink.card(ui),
                    Err(e) => tracing::warn!("a tool returned an unreadable card: {e}"),
                }
            }
            self.activate(&r.result.metadata);
            tracing::info!(
                tool = %r.requested,
                ok = r.result.ok,
                ms = r.elapsed_ms,
                "tool call {}",
                r.tool_call_id
            );
            if r.result.ok {
                let vision = cfg.model.vision;
                let pictures = pictures::of(&r.result.metadata, vision, cfg.media.max_image_bytes);
                let name = name.to_string();
                shown.extend(pictures.await.into_iter().map(|p| (name.clone(), p)));
            }
            self.turn.push(if r.result.ok {
                ChatMessage::tool(r.tool_call_id, r.model_text)
            } else {
                ChatMessage::tool_error(r.tool_call_id, r.model_text)
            });
        }
        // Pictures the tools returned (`file_read` of a saved photo, a screenshot, an MCP
        // tool's image) follow the results.
        if !shown.is_empty() {
            self.turn.push(pictures::message(shown));
        }
    }

    /// A stopped step, call by call: a call that ran keeps its result (its side effects are
    /// real), the others say they were stopped or never started.
    pub(super) fn stopped(&mut self, calls: &[ToolCall], progress: Vec<Progress>) {
        for (c, p) in calls.iter().zip(progress) {
            let (text, ok) = match p {
                Progress::Ran(r) => {
                    self.sink.tool_end(&r);
                    if provenance::brings_outside_text(&r.requested) {
                        self.taint.mark_untrusted(&r.requested);
                    }
                    (r.model_text, r.result.ok)
                }
                Progress::Stopped => (Progress::STOPPED_TEXT.to_string(), false),
                Progress::NotStarted => (Progress::NOT_STARTED_TEXT.to_string(), false),
            };
            self.turn.push(if ok {
                ChatMessage::tool(c.id.clone(), text)
            } else {
                ChatMessage::tool_error(c.id.clone(), text)
            });
        }
    }

    /// The tools a result's `activate` names (`find_tools`), offered from the next request on:
    /// only the turn's own, each once, after those already offered.
    fn activate(&mut self, metadata: &serde_json::Value) {
        let Some(names) = metadata.get("activate").and_then(|v| v.as_array()) else {
            return;
        };
        for n in names.iter().filter_map(|n| n.as_str()) {
            if self.allowed.contains(n) && !self.active.iter().any(|a| a == n) {
                self.active.push(n.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ErrorKind, ToolResult};
    use ethan_core::event::TurnEvent;
    use serde_json::json;

    fn outcome(id: &str, tool: &str, result: ToolResult) -> CallOutcome {
        CallOutcome {
            tool_call_id: id.into(),
            requested: tool.into(),
            tool: Some(tool.into()),
            model_text: result.model_text(),
            result,
            attempts: 1,
            elapsed_ms: 3,
        }
    }

    fn ended(events: &[TurnEvent]) -> Vec<(String, bool)> {
        events
            .iter()
            .filter_map(|e| match e {
                TurnEvent::ToolEnd { id, ok, .. } => Some((id.clone(), *ok)),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn results_become_tool_messages_in_order_with_their_marks_cards_and_tools() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut sink = Sink::new(Some(&tx));
        let (mut turn, taint) = (Vec::new(), Taint::default());
        let mut active = vec!["find_tools".to_string()];
        let allowed: BTreeSet<String> = ["find_tools", "shell", "web_fetch"]
            .map(String::from)
            .into();
        let card = json!({"card": {"type": "stats", "metrics": [{"label": "a", "value": "1"}]}});
        let mut shown = ToolResult::ok("shown");
        shown.ui = Some(card.clone());
        let results = vec![
            // find_tools is the daemon's own state: no outside text; it activates two of the
            // turn's tools, one twice, and one the turn may not use.
            outcome(
                "c1",
                "find_tools",
                ToolResult::ok("found").with_metadata(json!({
                    "activate": ["shell", "shell", "lark_messages", "find_tools"]
                })),
            ),
            outcome("c2", "ui_card", shown),
            outcome(
                "c3",
                "web_fetch",
                ToolResult::err(ErrorKind::Timeout, "slow"),
            ),
        ];
        let mut fold = Fold {
            turn: &mut turn,
            taint: &taint,
            active: &mut active,
            allowed: &allowed,
            sink: &mut sink,
        };
        fold.results(results, &Config::default()).await;
        assert_eq!(active, ["find_tools", "shell"]);
        let ids: Vec<_> = turn
            .iter()
            .map(|m| m.tool_call_id.clone().unwrap())
            .collect();
        assert_eq!(ids, ["c1", "c2", "c3"]);
        assert_eq!(turn[0].content.as_deref(), Some("found"));
        assert_eq!(
            turn.iter().map(|m| m.is_error).collect::<Vec<_>>(),
            [false, false, true]
        );
        // The failed fetch still brought outside text in; the first such tool is named.
        assert_eq!(taint.untrusted().as_deref(), Some("web_fetch"));
        assert_eq!(taint.source(), None);
        let events: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        let ends = ended(&events);
        assert_eq!(
            ends,
            [
                ("c1".into(), true),
                ("c2".into(), true),
                ("c3".into(), false)
            ]
        );
        assert!(events.iter().any(|e| matches!(e, TurnEvent::Ui(_))));
        let cards = sink.into_cards();
        assert_eq!(cards, [ethan_cards::Ui::from_tool_args(&card).unwrap()]);
    }

    #[tokio::test]
    async fn find_tools_listing_an_mcp_servers_description_is_outside_text() {
        let mut sink = Sink::new(None);
        let (mut turn, taint) = (Vec::new(), Taint::default());
        let allowed: BTreeSet<String> =
            ["find_tools", "mcp__docs__search"].map(String::from).into();
        let mut fold = Fold {
            turn: &mut turn,
            taint: &taint,
            active: &mut Vec::new(),
            allowed: &allowed,
            sink: &mut sink,
        };
        let found = outcome("c1", "find_tools", ToolResult::ok("mcp__docs__search: …"));
        fold.results(vec![found], &Config::default()).await;
        assert_eq!(taint.untrusted().as_deref(), Some("find_tools"));
    }

    #[test]
    fn a_stopped_step_keeps_what_ran_and_says_what_did_not() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut sink = Sink::new(Some(&tx));
        let (mut turn, taint) = (Vec::new(), Taint::default());
        let calls: Vec<ToolCall> = ["c1", "c2", "c3"]
            .map(|id| ToolCall {
                id: id.into(),
                name: "shell".into(),
                arguments: "{}".into(),
            })
            .into();
        let progress = vec![
            Progress::Ran(Box::new(outcome("c1", "shell", ToolResult::ok("done")))),
            Progress::Stopped,
            Progress::NotStarted,
        ];
        let mut fold = Fold {
            turn: &mut turn,
            taint: &taint,
            active: &mut Vec::new(),
            allowed: &BTreeSet::new(),
            sink: &mut sink,
        };
        fold.stopped(&calls, progress);
        let texts: Vec<_> = turn.iter().map(|m| m.content.clone().unwrap()).collect();
        assert_eq!(
            texts,
            ["done", Progress::STOPPED_TEXT, Progress::NOT_STARTED_TEXT]
        );
        assert_eq!(
            turn.iter().map(|m| m.is_error).collect::<Vec<_>>(),
            [false, true, true]
        );
        let events: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(ended(&events), [("c1".into(), true)]);
        assert_eq!(taint.untrusted().as_deref(), Some("shell"));
    }
}
