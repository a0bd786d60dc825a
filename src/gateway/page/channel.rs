//! The web page as a channel of the daemon ([`ChannelKind::Web`]): a message typed in the page
//! is published to the router like a chat message (recorded in the store first, deduplicated
//! by the page's message id, run in its session's queue, re-run after a crash or a restart),
//! and what the router shows in return lands in the [`Hub`], from which the page's event stream
//! reads it.
//!
//! - [`WebChannel::open_draft`]: every reply streams; the draft passes each event of the turn
//!   to the hub ([`Draft::observe`]: deltas, tool calls with their summaries, consent requests)
//!   and its finish is the answer. Its handle is not recorded: a turn re-run after a restart
//!   starts a new draft, and the page, whose stream gets `reset` from the new process, reloads
//!   the conversation and follows the re-run, so the answer is shown once.
//! - [`WebChannel::send`]: a reply without a draft (`/help`, a refusal) becomes an `answer`, a
//!   card a `card`. Approvals are not sent as messages: web consent is the `consent_request`
//!   event of the turn's own stream (`POST /web/api/consent/{id}` answers it).

use super::hub::Hub;
use async_trait::async_trait;
use ethan_channels::{
    Channel, ChannelError, ChannelKind, Draft, DraftLog, DraftTarget, DraftView, InboundSink,
    OutboundBody, OutboundMessage, SentRef, StateStore, ToolLine,
};
use ethan_core::event::TurnEvent;
use std::sync::Arc;
use std::time::Duration;

/// The web page's channel; its chat id is the page's session id (session key `web:<id>`).
pub struct WebChannel {
    hub: Arc<Hub>,
}

impl WebChannel {
    pub fn new(hub: Arc<Hub>) -> WebChannel {
        WebChannel { hub }
    }
}

#[async_trait]
impl Channel for WebChannel {
    fn kind(&self) -> ChannelKind {
        ChannelKind::Web
    }

    async fn probe(&self) -> Result<String, ChannelError> {
        Ok("the gateway's web page".into())
    }

    /// Messages come in through the gateway's routes, not from a loop: this only waits.
    async fn run(
        self: Arc<Self>,
        _sink: Arc<dyn InboundSink>,
        _state: Arc<dyn StateStore>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), ChannelError> {
        while !*shutdown.borrow() {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
        Ok(())
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SentRef, ChannelError> {
        let session = &msg.chat.id;
        match &msg.body {
            OutboundBody::Text(markdown) => self.hub.answer(session, markdown),
            OutboundBody::Ui(ui) => self.hub.card(session, &ethan_cards::render_html(ui)),
            OutboundBody::Typing
            | OutboundBody::Approval(_)
            | OutboundBody::ResolveApproval { .. } => {}
        }
        Ok(SentRef::default())
    }

    fn open_draft(&self, target: DraftTarget, _log: Arc<dyn DraftLog>) -> Option<Box<dyn Draft>> {
        self.hub.start(&target.chat.id);
        Some(Box::new(WebDraft {
            hub: self.hub.clone(),
            session: target.chat.id,
        }))
    }
}

/// A reply being written in the page: the events go to the hub as they come.
struct WebDraft {
    hub: Arc<Hub>,
    session: String,
}

#[async_trait]
impl Draft for WebDraft {
    fn interval(&self) -> Duration {
        // The view is not used (the events are); a long interval keeps the presenter idle.
        Duration::from_secs(3600)
    }

    async fn update(&mut self, _view: &DraftView) -> Result<(), ChannelError> {
        Ok(())
    }

    async fn finish(
        &mut self,
        markdown: &str,
        _tools: &[ToolLine],
    ) -> Result<SentRef, ChannelError> {
        self.hub.answer(&self.session, markdown);
        Ok(SentRef::default())
    }

    async fn abandon(&mut self) {
        self.hub.end(&self.session);
    }

    fn observe(&mut self, event: &TurnEvent) {
        self.hub.turn_event(&self.session, event);
    }
}
