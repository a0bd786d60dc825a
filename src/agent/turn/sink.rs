//! Where a turn's progress goes while it runs: the [`Sink`] the loop hands to each stage. A
//! turn someone watches (a chat's streamed draft, the terminal, the gateway's event stream)
//! has a watcher, and its model requests stream into it; a turn nobody watches (a scheduled
//! job, a sub-agent) asks the model for whole answers. Either way the cards its tools produce
//! are collected for the channel to show.

use crate::tools::executor::CallOutcome;
use ethan_core::event::{EventSink, TurnEvent};
use ethan_core::message::{ChatMessage, ToolSpec};
use ethan_core::provider::{Completion, ModelProvider, ProviderError};
use std::borrow::Cow;

/// A turn's progress: [`TurnEvent`]s to its watcher, if any, and its cards.
pub(crate) struct Sink<'a> {
    watcher: Option<&'a EventSink>,
    cards: Vec<ethan_cards::Ui>,
}

impl<'a> Sink<'a> {
    /// Progress for `watcher` (`None`: nobody watches).
    pub(crate) fn new(watcher: Option<&'a EventSink>) -> Self {
        Self {
            watcher,
            cards: Vec::new(),
        }
    }

    /// One event for the watcher; nothing when nobody watches or the watcher left.
    pub(crate) fn emit(&self, e: TurnEvent) {
        if let Some(tx) = self.watcher {
            let _ = tx.send(e);
        }
    }

    /// A card a tool produced: shown to the watcher now (as A2UI), kept for the channel.
    pub(crate) fn card(&mut self, ui: ethan_cards::Ui) {
        self.emit(TurnEvent::Ui(ethan_cards::render_a2ui(&ui)));
        self.cards.push(ui);
    }

    /// The [`TurnEvent::ToolEnd`] of a call that ran.
    pub(crate) fn tool_end(&self, r: &CallOutcome) {
        self.emit(TurnEvent::ToolEnd {
            id: r.tool_call_id.clone(),
            name: r.tool.clone().unwrap_or_else(|| r.requested.clone()),
            ms: r.elapsed_ms,
            ok: r.result.ok,
            denied: r.result.error_kind == Some(crate::tools::ErrorKind::Denied),
        });
    }

    /// One model request: its text streamed to the watcher piece by piece when there is one.
    pub(crate) async fn complete<M: ModelProvider + ?Sized>(
        &self,
        models: &M,
        messages: &[Cow<'_, ChatMessage>],
        specs: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        match self.watcher {
            Some(events) => models.complete_streaming(messages, specs, events).await,
            None => models.complete(messages, specs).await,
        }
    }

    /// The cards, in the order the tools produced them.
    pub(crate) fn into_cards(self) -> Vec<ethan_cards::Ui> {
        self.cards
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolResult;

    /// Answers "hello" in two pieces when streamed, whole otherwise.
    struct TwoPieces;

    #[async_trait::async_trait]
    impl ModelProvider for TwoPieces {
        async fn complete(
            &self,
            _: &[Cow<'_, ChatMessage>],
            _: &[ToolSpec],
        ) -> Result<Completion, ProviderError> {
            Ok(Completion {
                message: ChatMessage::assistant("hello"),
                finish_reason: None,
                usage: None,
                model: "m".into(),
            })
        }

        async fn complete_streaming(
            &self,
            messages: &[Cow<'_, ChatMessage>],
            tools: &[ToolSpec],
            deltas: &EventSink,
        ) -> Result<Completion, ProviderError> {
            for piece in ["hel", "lo"] {
                let _ = deltas.send(TurnEvent::Delta(piece.into()));
            }
            self.complete(messages, tools).await
        }
    }

    fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<TurnEvent>) -> Vec<TurnEvent> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[tokio::test]
    async fn a_watched_turn_streams_its_deltas_and_an_unwatched_one_asks_whole() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watched = Sink::new(Some(&tx));
        let c = watched.complete(&TwoPieces, &[], &[]).await.unwrap();
        assert_eq!(c.message.content.as_deref(), Some("hello"));
        assert_eq!(
            drain(&mut rx),
            vec![
                TurnEvent::Delta("hel".into()),
                TurnEvent::Delta("lo".into())
            ]
        );
        let unwatched = Sink::new(None);
        let c = unwatched.complete(&TwoPieces, &[], &[]).await.unwrap();
        assert_eq!(c.message.content.as_deref(), Some("hello"));
        unwatched.emit(TurnEvent::Text("nobody hears this".into()));
        assert!(drain(&mut rx).is_empty());
    }

    #[test]
    fn a_card_is_shown_to_the_watcher_and_kept_for_the_channel() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut sink = Sink::new(Some(&tx));
        let ui = ethan_cards::Ui::from_tool_args(&serde_json::json!(
            {"card": {"type": "stats", "metrics": [{"label": "build", "value": "green"}]}}
        ))
        .unwrap();
        sink.card(ui.clone());
        assert_eq!(
            drain(&mut rx),
            vec![TurnEvent::Ui(ethan_cards::render_a2ui(&ui))]
        );
        assert_eq!(sink.into_cards(), vec![ui]);
    }

    #[test]
    fn a_refused_call_ends_as_denied() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = Sink::new(Some(&tx));
        sink.tool_end(&CallOutcome {
            tool_call_id: "c1".into(),
            requested: "sh".into(),
            tool: Some("shell".into()),
            result: ToolResult::err(crate::tools::ErrorKind::Denied, "no"),
            model_text: "no".into(),
            attempts: 1,
            elapsed_ms: 7,
        });
        assert_eq!(
            drain(&mut rx),
            vec![TurnEvent::ToolEnd {
                id: "c1".into(),
                name: "shell".into(),
                ms: 7,
                ok: false,
                denied: true,
            }]
        );
    }
}
