//! Consent: a tool call with side effects needs a yes, and only the owner can say it in a chat
//! (docs/security.md). This is step 6 of the executor ([`ethan_core::consent::ConsentGate`]).
//!
//! For each call the tool's hooks say whether consent is needed (`consent_check`), for which
//! scope (`consent_scope`: the tool name, or a directory for file tools) and whether the call
//! must be asked every time (`consent_always`: dangerous shell commands, secret files). Then, by
//! where the turn runs (who is who, and which tools a job or a non-owner may use at all, are the
//! policy's [`crate::tools::policy::Audience`] rules, applied here to who can give a yes):
//! - **unattended** (scheduled jobs): allowed only if the job was authorised for the tool when
//!   the owner created it; a `consent_always` call never runs;
//! - **ChannelGuard** (Telegram, Lark): before any owner exists nothing runs; a non-owner is
//!   refused; the owner is asked with buttons (or `/approve <id>` / `/deny <id>`), and an
//!   unanswered request is denied after `consent.timeout_secs`. A request leaves the waiting list
//!   when its wait ends in any way: a turn cancelled while waiting (`/stop`, a closed stream)
//!   withdraws it and marks its message cancelled;
//! - **terminal**: a y/N question on stderr, answered on stdin.
//!
//! Where a chat approval is shown is [`route`]'s: in a group turn that holds private data it
//! goes to the owner's direct chat with the bot, and the group sees one line.
//!
//! A call that can carry data off the machine ([`ethan_core::tool::CallPlan::egress`]) also asks once
//! private data entered the session ([`ethan_core::tool::Taint`]), showing the full destination.
//! Which questions a call asks, and which a grant answers, is [`rule`]: the call's own question
//! and the egress question are separate, so a tainted turn never asks less than a clean one.
//! Every description is made visible by [`display`] (whitespace folded, line breaks marked,
//! invisible characters escaped) before any provider shows it; one too long to show is refused
//! back to the model, never cut.
//!
//! "Approve for this session" remembers what was approved in [`grants`], keyed by kind, tool and
//! scope (never for `consent_always`).
//! Every denial says which case happened, so the model can tell "the user said no" from "nobody
//! answered".

pub use ethan_core::consent::display;
pub mod grants;
mod input;
pub mod owners;
pub mod route;
pub mod rule;
pub mod shared;
pub mod terminal;

use crate::tools::policy::Audience;
use async_trait::async_trait;
use ethan_channels::{
    ApprovalAck, ApprovalChoice, ApprovalDecision, ApprovalRequest, Channel, ChannelKind, ChatRef,
    OutboundBody, OutboundMessage,
};
use ethan_core::consent::{ConsentGate, Consented};
use ethan_core::tool::{CallPlan, ErrorKind, Tool, ToolContext, ToolResult};
use grants::Grants;
use owners::Owners;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use terminal::{TerminalAnswer, TerminalInput};
use tokio::sync::oneshot;

pub use ethan_core::tool::{CONSENTED, PROTECTED_PATHS_APPROVED};

/// Why a press `d` on a request posted in chat `posted_in` does not count, if it does not: on
/// a chat platform it must come from that chat (web answers come from the gateway's token
/// holder, who answers for every web session), or, for a request sent privately to one owner
/// (`answerer`, see [`route`]), from that owner; and only the owner's counts. Logged.
fn press_refused(
    d: &ApprovalDecision,
    posted_in: &str,
    answerer: Option<&str>,
    owner: bool,
) -> Option<ApprovalAck> {
    let refused = |toast: &str| ApprovalAck {
        accepted: false,
        toast: toast.into(),
        outcome: None,
    };
    if let Some(who) = answerer.filter(|who| *who != d.user_id) {
        tracing::warn!(
            "{} user {} answered approval {}, which was sent to {who} in private; refused",
            d.channel,
            d.user_id,
            d.request_id
        );
        return Some(refused(
            "Not counted: only the owner this request was sent to can answer it.",
        ));
    }
    if answerer.is_none() && d.channel != ChannelKind::Web && posted_in != d.chat_id {
        tracing::warn!(
            "{} user {} answered approval {} from chat {:?}, not the chat it was posted in; \
             refused",
            d.channel,
            d.user_id,
            d.request_id,
            d.chat_id
        );
        return Some(refused(
            "Not counted: answer this request in the chat where it was asked.",
        ));
    }
    if !owner {
        tracing::info!(
            "{} user {} pressed an approval button but is not the owner",
            d.channel,
            d.user_id
        );
        return Some(refused(
            "Not allowed: only the bot's owner can answer this.",
        ));
    }
    None
}

/// The answer to a counted press: its toast and the text that replaces the buttons.
fn accepted(choice: ApprovalChoice, tool: &str) -> ApprovalAck {
    let (toast, outcome) = match choice {
        ApprovalChoice::Once => ("Approved", format!("✅ Approved once: {tool}")),
        ApprovalChoice::Session => (
            "Approved for this session",
            format!("✅ Approved for this session: {tool}"),
        ),
        ApprovalChoice::Deny => ("Denied", format!("❌ Denied: {tool}")),
    };
    ApprovalAck {
        accepted: true,
        toast: toast.into(),
        outcome: Some(outcome),
    }
}

/// Why a call was refused; each has its own text for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    RefusedByUser,
    TimedOut(u64),
    NotOwner,
    NoOwner,
    Unattended {
        always: bool,
    },
    NoProvider,
    /// The approval had to be asked in private ([`route`]) and the owner has no direct chat
    /// with the bot.
    NoDirectChat,
}

impl Denial {
    pub fn result(&self, tool: &str) -> ToolResult {
        let text = match self {
            Denial::RefusedByUser => format!(
                "the user refused this {tool} call, so it did not run. Do not retry it on your own; ask \
                 what they want instead. If they change their mind or ask for it, you may propose it \
                 again and they will be asked again."
            ),
            Denial::TimedOut(s) => format!(
                "nobody answered the approval request for this {tool} call within {s} s, so it did not run \
                 (the user did not refuse). You may ask whether to try again."
            ),
            Denial::NotOwner => format!(
                "this {tool} call needs the approval of the bot's owner, and this user is not the owner. \
                 Help with what you can do without it."
            ),
            Denial::NoOwner => format!(
                "this bot has no owner yet, so no tool that changes things ({tool} included) may run. The \
                 owner claims the bot by running `ethan owner claim` and sending /claim <code> in a DM."
            ),
            Denial::Unattended { always: true } => format!(
                "this {tool} call needs the owner's approval every time, and it never runs in an unattended job."
            ),
            Denial::Unattended { always: false } => format!(
                "{tool} is not among the tools this unattended job was authorised to use."
            ),
            Denial::NoProvider => format!(
                "{tool} needs approval, and nobody can be asked in this interface."
            ),
            Denial::NoDirectChat => format!(
                "this {tool} call needs the owner's approval, which is asked in private here (this \
                 is a group, and the conversation holds private data), but the owner has no direct \
                 chat with the bot yet, so it did not run. The group was told; the owner must open \
                 a direct chat with the bot before asking again."
            ),
        };
        ToolResult::err(ErrorKind::Denied, text)
    }
}

struct Pending {
    channel: ChannelKind,
    chat_id: String,
    /// Sent in private: only this owner may answer ([`route`]).
    answerer: Option<String>,
    tool: String,
    tx: oneshot::Sender<ApprovalChoice>,
}

/// Keeps one approval request registered while its answer is awaited. When the waiting future
/// ends in any way — answered, timed out, or dropped because the turn was cancelled (`/stop`, a
/// closed stream) — the request leaves the waiting list; if it was still there (nobody answered
/// it and nothing else removed it), its approval message, when it has one, is marked cancelled.
struct PendingGuard<'a> {
    consent: &'a Consent,
    request_id: String,
    /// Where the approval message was posted, to mark it cancelled (`None`: web, or not sent).
    message: Option<(Arc<dyn Channel>, ChatRef)>,
    tool: String,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let (Some(store), Ok(runtime)) = (
            self.consent.shared.clone(),
            tokio::runtime::Handle::try_current(),
        ) {
            let id = self.request_id.clone();
            runtime.spawn(async move { shared::forget(&*store, &id).await });
        }
        let Some(p) = self.consent.pending().remove(&self.request_id) else {
            return;
        };
        tracing::info!(
            "approval {} for {} cancelled: the turn ended before an answer",
            self.request_id,
            p.tool
        );
        let Some((channel, chat)) = self.message.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let resolve = OutboundMessage {
            chat,
            reply_to: None,
            body: OutboundBody::ResolveApproval {
                request_id: std::mem::take(&mut self.request_id),
                outcome: format!("⏹ Cancelled: {} (the turn ended)", self.tool),
            },
            idempotency_key: None,
        };
        runtime.spawn(async move {
            if let Err(e) = channel.send(&resolve).await {
                tracing::debug!("cannot mark the approval as cancelled: {e}");
            }
        });
    }
}

/// The consent service: grants, owners, and approvals waiting for an answer.
pub struct Consent {
    pub grants: Grants,
    pub owners: Owners,
    pending: Mutex<HashMap<String, Pending>>,
    /// The chat channels used to ask ([`Consent::with_channels`]).
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    terminal: Option<TerminalInput>,
    timeout: Duration,
    /// The store shared with other replicas, when there are any ([`shared`]).
    shared: Option<ethan_core::store::StorageRef>,
    /// Where decisions are counted (`ethan_consent_requests_total`).
    metrics: Arc<crate::metrics::Metrics>,
}

impl Consent {
    /// `terminal`: stdin for terminal questions (`ethan chat`); `None` in the daemon.
    pub fn new(owners: Owners, timeout: Duration, terminal: Option<TerminalInput>) -> Self {
        Self {
            grants: Grants::default(),
            owners,
            pending: Mutex::new(HashMap::new()),
            channels: HashMap::new(),
            terminal,
            timeout,
            shared: None,
            metrics: Default::default(),
        }
    }

    /// This service counting its decisions in `metrics` (the daemon's registry) instead of a
    /// registry of its own.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// This service sharing waiting approvals and session grants with other replicas through
    /// `store` (given before any grant is made: the grants kept so far are dropped).
    pub fn shared_through(mut self, store: ethan_core::store::StorageRef) -> Self {
        self.grants = Grants::shared_through(store.clone());
        self.shared = Some(store);
        self
    }

    /// This service asking through `channels` (without them, only the terminal can be asked).
    pub fn with_channels(mut self, channels: HashMap<ChannelKind, Arc<dyn Channel>>) -> Self {
        self.channels = channels;
        self
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Approval requests waiting for an answer, in every chat.
    pub fn pending_count(&self) -> usize {
        self.pending().len()
    }

    /// The ids of requests waiting in a chat (for `/approve` without an id).
    pub fn pending_in_chat(&self, channel: ChannelKind, chat_id: &str) -> Vec<String> {
        self.pending_for(channel, chat_id, None)
    }

    /// The ids of requests `/approve` without an id may mean: those waiting in the chat, and,
    /// when it is `owner`'s direct chat, those sent to `owner` in private ([`route`]).
    pub fn pending_for(
        &self,
        channel: ChannelKind,
        chat_id: &str,
        owner: Option<&str>,
    ) -> Vec<String> {
        self.pending()
            .iter()
            .filter(|(_, p)| p.channel == channel)
            .filter(|(_, p)| {
                p.chat_id == chat_id || (owner.is_some() && p.answerer.as_deref() == owner)
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// [`Self::pending_for`] and, with replicas, the requests waiting on the others (found in
    /// the shared store): what `/approve` without an id may mean wherever it is taken in.
    pub async fn waiting_for(
        &self,
        channel: ChannelKind,
        chat_id: &str,
        owner: Option<&str>,
    ) -> Vec<String> {
        let mut ids = self.pending_for(channel, chat_id, owner);
        let Some(store) = self.shared.as_ref() else {
            return ids;
        };
        let since = chrono::Utc::now().timestamp() - self.timeout.as_secs() as i64;
        match shared::waiting(&**store, channel, chat_id, owner, since).await {
            Ok(more) => {
                for id in more {
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
            Err(e) => tracing::warn!("cannot look for approvals waiting on other replicas: {e}"),
        }
        ids
    }

    /// A button press or `/approve`/`/deny`. Only the owner's answer counts, and on a chat
    /// platform only when given in the chat the request was posted in (`d.chat_id`); a press
    /// elsewhere is refused with a toast and leaves the request waiting. Web answers come from
    /// the gateway's token holder, who answers for every gateway session, so their chat is not
    /// compared.
    pub async fn decide(&self, d: &ApprovalDecision) -> ApprovalAck {
        // The owner lookup may wait for the store, so it comes first, without the lock.
        let owner = self.owners.is_owner(d.channel, &d.user_id).await;
        let local = self.pending().contains_key(&d.request_id);
        if !local {
            if let Some(store) = self.shared.as_ref() {
                return self.decide_shared(&**store, d, owner).await;
            }
        }
        let mut pending = self.pending();
        let known = pending
            .get(&d.request_id)
            .is_some_and(|p| p.channel == d.channel);
        if !known {
            return ApprovalAck {
                accepted: false,
                toast: "This request is no longer waiting (answered or expired).".into(),
                outcome: None,
            };
        }
        let (posted_in, answerer) = pending
            .get(&d.request_id)
            .map(|p| (p.chat_id.as_str(), p.answerer.as_deref()))
            .unwrap_or_default();
        if let Some(refusal) = press_refused(d, posted_in, answerer, owner) {
            return refusal;
        }
        let Some(p) = pending.remove(&d.request_id) else {
            return ApprovalAck {
                accepted: false,
                toast: "This request is no longer waiting.".into(),
                outcome: None,
            };
        };
        let _ = p.tx.send(d.choice);
        accepted(d.choice, &p.tool)
    }

    /// A press for a request this replica does not hold: answered through the shared store
    /// when another replica's request is waiting there, with the same rules as a local one.
    async fn decide_shared(
        &self,
        store: &dyn ethan_core::store::Storage,
        d: &ApprovalDecision,
        owner: bool,
    ) -> ApprovalAck {
        let refused = |toast: &str| ApprovalAck {
            accepted: false,
            toast: toast.into(),
            outcome: None,
        };
        let req = match shared::request(store, &d.request_id).await {
            Ok(Some(r)) if r.channel == d.channel => r,
            Ok(_) => return refused("This request is no longer waiting (answered or expired)."),
            Err(e) => {
                tracing::error!("cannot look up approval {}: {e}", d.request_id);
                return refused("This request could not be looked up; try again.");
            }
        };
        if let Some(refusal) = press_refused(d, &req.chat_id, req.answerer.as_deref(), owner) {
            return refusal;
        }
        match shared::answer(store, &d.request_id, d.choice).await {
            Ok(true) => {}
            Ok(false) => {
                return refused("This request is no longer waiting (answered or expired).")
            }
            Err(e) => {
                tracing::error!("cannot record the answer to approval {}: {e}", d.request_id);
                return refused("The answer could not be recorded; try again.");
            }
        }
        tracing::info!(
            "approval {} answered here for the replica that asked",
            d.request_id
        );
        accepted(d.choice, &req.tool)
    }

    /// Web consent: a `consent_request` event on the turn's stream, answered by
    /// `POST /api/consent/{request_id}` (the gateway calls [`Consent::decide`]).
    async fn ask_on_stream(
        &self,
        ctx: &ToolContext,
        tool: &str,
        description: &str,
        always: bool,
    ) -> Result<ApprovalChoice, Denial> {
        let Some(events) = &ctx.events else {
            return Err(Denial::NoProvider);
        };
        let request_id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let (tx, rx) = oneshot::channel();
        self.pending().insert(
            request_id.clone(),
            Pending {
                channel: ChannelKind::Web,
                chat_id: ctx.session_key.clone(),
                answerer: None,
                tool: tool.to_string(),
                tx,
            },
        );
        let _guard = PendingGuard {
            consent: self,
            request_id: request_id.clone(),
            message: None,
            tool: tool.to_string(),
        };
        self.publish_shared(&request_id, ChannelKind::Web, &ctx.session_key, None, tool)
            .await;
        let _ = events.send(ethan_core::event::TurnEvent::ConsentRequest {
            request_id: request_id.clone(),
            tool: tool.to_string(),
            description: description.to_string(),
            always,
        });
        match self.wait_answer(rx, &request_id).await {
            Some(choice) => Ok(choice),
            None => Err(Denial::TimedOut(self.timeout.as_secs())),
        }
    }

    /// With replicas: record request `id` in the shared store, so a press that reaches another
    /// replica answers it (a failure is logged; then only this replica can).
    async fn publish_shared(
        &self,
        id: &str,
        channel: ChannelKind,
        chat_id: &str,
        answerer: Option<&str>,
        tool: &str,
    ) {
        let Some(store) = self.shared.as_ref() else {
            return;
        };
        let req = shared::SharedRequest {
            channel,
            chat_id: chat_id.to_string(),
            answerer: answerer.map(str::to_string),
            tool: tool.to_string(),
            asked_at: chrono::Utc::now().timestamp(),
        };
        if let Err(e) = shared::publish(&**store, id, &req).await {
            tracing::warn!(
                "cannot share approval {id} with the other replicas ({e}); only a press that \
                 reaches this replica answers it"
            );
        }
    }

    /// The answer to request `id`, given here (`rx`) or, with replicas, on another replica;
    /// `None` when nobody answered within the consent timeout. Either way the request stops
    /// waiting here.
    async fn wait_answer(
        &self,
        rx: oneshot::Receiver<ApprovalChoice>,
        id: &str,
    ) -> Option<ApprovalChoice> {
        let store = self.shared.as_ref().cloned();
        let elsewhere = async {
            match &store {
                Some(store) => Some(shared::wait_answer(&**store, id).await),
                None => std::future::pending().await,
            }
        };
        let answer = tokio::time::timeout(self.timeout, async {
            tokio::select! {
                local = rx => local.ok(),
                remote = elsewhere => remote,
            }
        })
        .await
        .ok()
        .flatten();
        self.pending().remove(id);
        answer
    }

    /// Count a denial and turn it into the model's result.
    fn deny(&self, d: Denial, tool: &str) -> ToolResult {
        let outcome = match &d {
            Denial::RefusedByUser => "refused",
            Denial::TimedOut(_) => "timed_out",
            Denial::NotOwner => "not_owner",
            Denial::NoOwner => "no_owner",
            Denial::Unattended { .. } => "unattended",
            Denial::NoProvider => "no_provider",
            Denial::NoDirectChat => "no_direct_chat",
        };
        self.metrics.consent.with_label_values(&[outcome]).inc();
        d.result(tool)
    }

    /// Post the approval in `chat` and wait for the answer. `private`: it goes to one owner's
    /// direct chat ([`route`]); a send the platform refuses for lack of that chat is then
    /// [`Denial::NoDirectChat`].
    #[allow(clippy::too_many_arguments)]
    async fn ask_in_chat(
        &self,
        ctx: &ToolContext,
        channel: Arc<dyn Channel>,
        chat: ChatRef,
        private: Option<route::Private>,
        tool: &str,
        description: &str,
        always: bool,
    ) -> Result<ApprovalChoice, Denial> {
        let (answerer, waiting) = private.map(|p| (p.answerer, p.waiting)).unzip();
        let request_id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        let (tx, rx) = oneshot::channel();
        self.pending().insert(
            request_id.clone(),
            Pending {
                channel: ctx.channel,
                chat_id: chat.id.clone(),
                answerer: answerer.clone(),
                tool: tool.to_string(),
                tx,
            },
        );
        // Set before sending: a turn cancelled mid-send still gets its message marked.
        let _guard = PendingGuard {
            consent: self,
            request_id: request_id.clone(),
            message: Some((channel.clone(), chat.clone())),
            tool: tool.to_string(),
        };
        self.publish_shared(
            &request_id,
            ctx.channel,
            &chat.id,
            answerer.as_deref(),
            tool,
        )
        .await;
        let msg = OutboundMessage {
            chat: chat.clone(),
            reply_to: None,
            body: OutboundBody::Approval(ApprovalRequest {
                request_id: request_id.clone(),
                tool: tool.to_string(),
                description: description.to_string(),
                always,
            }),
            idempotency_key: None,
        };
        if let Err(e) = channel.send(&msg).await {
            self.pending().remove(&request_id);
            if waiting.is_some() && e.is_recipient_unreachable() {
                tracing::info!("cannot send the approval request in private: {e}");
                return Err(Denial::NoDirectChat);
            }
            tracing::error!("cannot send the approval request: {e}");
            return Err(Denial::NoProvider);
        }
        if let Some(waiting) = waiting {
            if let Err(e) = channel.send(&waiting).await {
                tracing::warn!("cannot tell the group an approval waits in private: {e}");
            }
        }
        match self.wait_answer(rx, &request_id).await {
            Some(choice) => Ok(choice),
            None => {
                let secs = self.timeout.as_secs();
                let resolve = OutboundMessage {
                    chat,
                    reply_to: None,
                    body: OutboundBody::ResolveApproval {
                        request_id,
                        outcome: format!("⌛ No answer within {secs} s: denied."),
                    },
                    idempotency_key: None,
                };
                if let Err(e) = channel.send(&resolve).await {
                    tracing::debug!("cannot mark the approval as timed out: {e}");
                }
                Err(Denial::TimedOut(secs))
            }
        }
    }
}

#[async_trait]
impl ConsentGate for Consent {
    async fn check(
        &self,
        tool: &dyn Tool,
        _: &Value,
        plan: &CallPlan,
        ctx: &mut ToolContext,
    ) -> Result<Consented, ToolResult> {
        let name = tool.decl().name.to_string();
        // The one rule: the call's own question and, once private data entered the session,
        // the egress question, each answered only by a grant of its own kind ([`rule`]).
        let Some(questions) = rule::Questions::of(tool, plan, ctx) else {
            return Ok(Consented::Unasked);
        };
        let always = questions.always;
        let approve = |ctx: &mut ToolContext| {
            ctx.approved_actions.push(CONSENTED.to_string());
            if always {
                ctx.approved_actions
                    .push(PROTECTED_PATHS_APPROVED.to_string());
            }
        };
        // Who may use which tool is the policy's ([`Audience`]), checked before this step; here
        // the same rules decide who can give a yes. The policy already kept a job's side-effect
        // tools to its `allowed_tools` and a non-owner's tools to the safe set, so these matter
        // for the calls of other tools that need a yes (data leaving after private data).
        let audience = Audience::of(ctx);
        if ctx.unattended {
            return if always {
                Err(self.deny(Denial::Unattended { always: true }, &name))
            } else if audience.job_authorises(&name) {
                ctx.approved_actions.push(CONSENTED.to_string());
                Ok(Consented::Unasked)
            } else {
                Err(self.deny(Denial::Unattended { always: false }, &name))
            };
        }
        let chat_platform = matches!(ctx.channel, ChannelKind::Telegram | ChannelKind::Lark);
        if chat_platform && !self.owners.has_owner(ctx.channel).await {
            return Err(self.deny(Denial::NoOwner, &name));
        }
        if audience.is_chat_non_owner() {
            return Err(self.deny(Denial::NotOwner, &name));
        }
        let questions = questions.outstanding(&self.grants, &ctx.session_key).await;
        if questions.answered() {
            ctx.approved_actions.push(CONSENTED.to_string());
            return Ok(Consented::Unasked);
        }
        let description = questions.description();
        // A sub-agent's call says so: the person sees it is not the conversation's own step.
        let description = match &ctx.sub_agent {
            Some(who) => format!("asked by a {who} working for you: {description}"),
            None => description,
        };
        // Asked in private when a group turn holds private data; it then names the group.
        let delivery = route::Delivery::of(ctx);
        let description = delivery.framed(ctx.channel, description);
        // Every provider shows the same text, made visible once (see `display`); the tool name
        // too, since it reaches the outcome line. What is too long to show is refused, not cut.
        let description = match display::for_approval(&description) {
            Ok(d) => d,
            Err(too_long) => {
                self.metrics.consent.with_label_values(&["too_long"]).inc();
                return Err(too_long.result(&name));
            }
        };
        let shown_name = display::visible(&name);
        let choice = match ctx.channel {
            ChannelKind::Terminal => match &self.terminal {
                Some(input) => {
                    match terminal::ask(input, &shown_name, &description, always).await {
                        TerminalAnswer::Once => ApprovalChoice::Once,
                        TerminalAnswer::Session => ApprovalChoice::Session,
                        TerminalAnswer::No => ApprovalChoice::Deny,
                    }
                }
                None => return Err(self.deny(Denial::NoProvider, &name)),
            },
            ChannelKind::Telegram | ChannelKind::Lark => {
                match self
                    .ask_on_platform(ctx, &delivery, &shown_name, &description, always)
                    .await
                {
                    Ok(c) => c,
                    Err(d) => return Err(self.deny(d, &name)),
                }
            }
            ChannelKind::Web => match self
                .ask_on_stream(ctx, &shown_name, &description, always)
                .await
            {
                Ok(c) => c,
                Err(d) => return Err(self.deny(d, &name)),
            },
        };
        let outcome = match choice {
            ApprovalChoice::Once => "approved_once",
            ApprovalChoice::Session => "approved_session",
            ApprovalChoice::Deny => "refused",
        };
        if choice != ApprovalChoice::Deny {
            self.metrics.consent.with_label_values(&[outcome]).inc();
        }
        match choice {
            ApprovalChoice::Once => {
                approve(ctx);
                Ok(Consented::Asked)
            }
            ApprovalChoice::Session => {
                for grant in questions.grants() {
                    self.grants.grant(&ctx.session_key, &grant).await;
                }
                approve(ctx);
                Ok(Consented::Asked)
            }
            ApprovalChoice::Deny => Err(self.deny(Denial::RefusedByUser, &name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    fn consent() -> Consent {
        let store = Store::open_in_memory().unwrap().shared();
        let cfg = crate::config::from_value(serde_json::json!({"owners": ["telegram:1"]})).unwrap();
        Consent::new(Owners::new(&cfg, store), Duration::from_secs(60), None)
    }

    /// Put a request in the waiting list, as `ask_in_chat`/`ask_on_stream` do.
    fn wait_for(
        c: &Consent,
        id: &str,
        channel: ChannelKind,
        chat_id: &str,
    ) -> oneshot::Receiver<ApprovalChoice> {
        let (tx, rx) = oneshot::channel();
        c.pending().insert(
            id.into(),
            Pending {
                channel,
                chat_id: chat_id.into(),
                answerer: None,
                tool: "shell".into(),
                tx,
            },
        );
        rx
    }

    fn press(channel: ChannelKind, id: &str, user: &str, chat: &str) -> ApprovalDecision {
        ApprovalDecision {
            channel,
            request_id: id.into(),
            choice: ApprovalChoice::Once,
            user_id: user.into(),
            chat_id: chat.into(),
        }
    }

    #[tokio::test]
    async fn a_press_counts_only_in_the_chat_of_the_request() {
        let c = consent();
        let mut rx = wait_for(&c, "req1", ChannelKind::Telegram, "-100200");
        // The owner, but from another chat (a DM, another group, no chat at all): refused,
        // and the request keeps waiting.
        for chat in ["1", "-100999", ""] {
            let ack = c
                .decide(&press(ChannelKind::Telegram, "req1", "1", chat))
                .await;
            assert!(!ack.accepted, "{chat}");
            assert!(ack.outcome.is_none());
            assert!(
                ack.toast.contains("chat where it was asked"),
                "{}",
                ack.toast
            );
            assert_eq!(
                c.pending_in_chat(ChannelKind::Telegram, "-100200"),
                vec!["req1".to_string()]
            );
            assert!(rx.try_recv().is_err(), "answered from {chat:?}");
        }
        // The owner in the request's chat: counted.
        let ack = c
            .decide(&press(ChannelKind::Telegram, "req1", "1", "-100200"))
            .await;
        assert!(ack.accepted, "{}", ack.toast);
        assert_eq!(rx.try_recv().unwrap(), ApprovalChoice::Once);
        assert!(c
            .pending_in_chat(ChannelKind::Telegram, "-100200")
            .is_empty());
    }

    #[tokio::test]
    async fn web_answers_are_not_tied_to_a_chat() {
        let c = consent();
        // Web requests wait under their session key; the gateway answers by request id.
        let mut rx = wait_for(&c, "web1", ChannelKind::Web, "web:abc");
        let ack = c
            .decide(&press(ChannelKind::Web, "web1", "gateway", ""))
            .await;
        assert!(ack.accepted, "{}", ack.toast);
        assert_eq!(rx.try_recv().unwrap(), ApprovalChoice::Once);
    }

    #[tokio::test]
    async fn a_dropped_wait_withdraws_its_request() {
        // A web turn whose stream closed: the future asking is dropped mid-wait.
        let c = consent();
        let (events, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let mut ctx = ToolContext::local(std::env::temp_dir());
        ctx.channel = ChannelKind::Web;
        ctx.session_key = "web:s1".into();
        ctx.events = Some(events);
        let ask = c.ask_on_stream(&ctx, "shell", "run it", false);
        let cut = tokio::time::timeout(Duration::from_millis(50), ask).await;
        assert!(cut.is_err(), "nobody answered, so it was still waiting");
        let Some(ethan_core::event::TurnEvent::ConsentRequest { request_id, .. }) =
            seen.recv().await
        else {
            panic!("no consent request was sent");
        };
        assert!(c.pending_in_chat(ChannelKind::Web, "web:s1").is_empty());
        let ack = c
            .decide(&press(ChannelKind::Web, &request_id, "gateway", ""))
            .await;
        assert!(!ack.accepted);
        assert!(ack.toast.contains("no longer waiting"), "{}", ack.toast);
    }

    use crate::tools::{CallPlan, ToolDecl, ToolError, ToolOutput};

    /// A read-only tool whose calls carry data off the machine.
    struct Sender(ToolDecl);

    impl Sender {
        fn new() -> Self {
            let decl = ToolDecl::new("sender", "sends", serde_json::json!({"type": "object"}));
            Self(decl.risk(ethan_core::tool::Risk::ReadOnly))
        }
    }

    #[async_trait]
    impl Tool for Sender {
        fn decl(&self) -> &ToolDecl {
            &self.0
        }
        fn describe(&self, args: &Value, _: &ToolContext) -> CallPlan {
            CallPlan {
                egress: Some(ethan_core::tool::Egress {
                    destination: "https://x.example/?q=secret".into(),
                    scope: "egress:host:x.example".into(),
                }),
                ..CallPlan::of(self.decl(), args)
            }
        }
        async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::new("sent"))
        }
    }

    /// The sender and unattended rules the policy applies to exposure also decide who can say
    /// yes to a call that needs it: a job only for its authorised tools, a non-owner never.
    #[tokio::test]
    async fn a_call_needing_a_yes_follows_the_policy_audience_rules() {
        let c = consent();
        let args = serde_json::json!({});
        let tainted = |ctx: &mut ToolContext| ctx.taint.mark("file_read");
        let plan = |ctx: &ToolContext| Sender::new().describe(&args, ctx);
        // An unattended job: runs only when the job was authorised for the tool.
        let mut job = ToolContext::local(std::env::temp_dir());
        job.channel = ChannelKind::Telegram;
        job.unattended = true;
        tainted(&mut job);
        let denied = c
            .check(&Sender::new(), &args, &plan(&job), &mut job.clone())
            .await
            .unwrap_err();
        assert!(
            denied.model_text().contains("not among the tools"),
            "{}",
            denied.model_text()
        );
        job.allowed_tools = Some(vec!["sender".into()]);
        let mut allowed = job.clone();
        assert!(c
            .check(&Sender::new(), &args, &plan(&allowed), &mut allowed)
            .await
            .is_ok());
        assert!(allowed.approved_actions.contains(&CONSENTED.to_string()));
        // A non-owner in a chat: refused, nobody is asked.
        let mut guest = ToolContext::local(std::env::temp_dir());
        guest.channel = ChannelKind::Telegram;
        guest.is_owner = false;
        tainted(&mut guest);
        let denied = c
            .check(&Sender::new(), &args, &plan(&guest), &mut guest)
            .await
            .unwrap_err();
        assert!(
            denied.model_text().contains("not the owner"),
            "{}",
            denied.model_text()
        );
        assert!(c.pending_in_chat(ChannelKind::Telegram, "local").is_empty());
    }
}
