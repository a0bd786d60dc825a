//! The fallback chain: the primary model (`model.*`) and the `model.fallback` entries, tried in
//! order, each behind a circuit breaker.
//!
//! - A call goes to the first entry whose breaker is closed. When it fails in a way another
//!   endpoint could fix ([`ProviderError::may_fall_back`]: connection, timeout, stall, 408, 429,
//!   5xx, 401/403/404, an unreadable answer) the same request goes to the next entry. A request
//!   refused as invalid (400, 422, context length) is not moved, and neither is a streamed
//!   answer that broke off after text was shown ([`ProviderError::Interrupted`]): the person
//!   keeps what they saw.
//! - Breaker: an entry whose requests failed [`TRIP_AFTER`] times in a row opens and is skipped
//!   for `model.fallback_cooldown_secs` (60 by default). A call's failure counts the retries the
//!   client made inside it (a transient error was tried `1 +` [`super::MAX_RETRIES`] times).
//!   After the cool-down, one call probes it (half-open): an answer closes the breaker, a
//!   failure opens it again. When every entry is open the calls go to the first entry anyway.
//! - The state lives in the process: a restart (or each `ethan chat`) starts with every breaker
//!   closed.
//!
//! Every answer's [`Completion::model`] names the entry that gave it; an answer from any entry
//! but the first is logged (`answered by fallback model …`).

use super::{Completion, ModelProvider, ProviderError, MAX_RETRIES};
use crate::config::{ModelConfig, ModelEndpoint};
use ethan_core::event::EventSink;
use ethan_core::message::{ChatMessage, ToolSpec};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Failed requests in a row that open an entry's breaker.
pub const TRIP_AFTER: u32 = 3;

/// The models of `model.*` and `model.fallback`, tried in order (see the module doc). Cheap to
/// clone; clones share the breakers.
#[derive(Clone)]
pub struct Chain {
    links: Arc<[Link]>,
    /// Indexes into `links`, in the order this view tries them.
    order: Arc<[usize]>,
    cooldown: Duration,
}

struct Link {
    name: String,
    provider: Arc<dyn ModelProvider>,
    breaker: Mutex<Breaker>,
}

#[derive(Debug, Default)]
struct Breaker {
    /// Failed requests in a row.
    failures: u32,
    /// Open until then; `None` = closed.
    open_until: Option<Instant>,
    /// A probe call is in flight (half-open): other calls skip the entry.
    probing: bool,
}

/// Whether an entry may be called now, and whether the call is its probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    Closed,
    Probe,
    Skip,
}

impl Breaker {
    fn admit(&mut self, now: Instant) -> Admission {
        match self.open_until {
            None => Admission::Closed,
            Some(_) if self.probing => Admission::Skip,
            Some(until) if now < until => Admission::Skip,
            Some(_) => {
                self.probing = true;
                Admission::Probe
            }
        }
    }

    fn succeeded(&mut self) {
        *self = Breaker::default();
    }

    /// `requests`: how many requests the failed call made. Whether the breaker (re)opened.
    fn failed(&mut self, requests: u32, now: Instant, cooldown: Duration) -> bool {
        let was_probe = std::mem::take(&mut self.probing);
        self.failures = self.failures.saturating_add(requests);
        if was_probe || self.failures >= TRIP_AFTER {
            self.open_until = Some(now + cooldown);
            return true;
        }
        false
    }

    /// A call that ended without a verdict on the endpoint (a refused request, a cancelled
    /// call): a probe slot is given back.
    fn released(&mut self) {
        self.probing = false;
    }
}

impl Chain {
    /// The chain of `cfg`: its primary endpoint, then `cfg.fallback`, each connected with
    /// `connect` (which picks the wire protocol).
    ///
    /// # Errors
    /// The first endpoint whose client cannot be built.
    pub fn from_config(
        cfg: &ModelConfig,
        connect: impl Fn(&ModelEndpoint) -> Result<Arc<dyn ModelProvider>, ProviderError>,
    ) -> Result<Chain, ProviderError> {
        let links = cfg
            .endpoints()
            .iter()
            .map(|ep| {
                Ok(Link {
                    name: ep.name.clone(),
                    provider: connect(ep)?,
                    breaker: Mutex::new(Breaker::default()),
                })
            })
            .collect::<Result<Vec<_>, ProviderError>>()?;
        Ok(Self::new(
            links,
            Duration::from_secs(cfg.fallback_cooldown_secs),
        ))
    }

    /// A chain of named providers, tried in the order given.
    pub fn from_providers(
        providers: Vec<(String, Arc<dyn ModelProvider>)>,
        cooldown: Duration,
    ) -> Chain {
        let links = providers
            .into_iter()
            .map(|(name, provider)| Link {
                name,
                provider,
                breaker: Mutex::new(Breaker::default()),
            })
            .collect();
        Self::new(links, cooldown)
    }

    fn new(links: Vec<Link>, cooldown: Duration) -> Chain {
        let order: Arc<[usize]> = (0..links.len()).collect();
        Chain {
            links: links.into(),
            order,
            cooldown,
        }
    }

    /// The names of the entries, primary first.
    pub fn names(&self) -> Vec<&str> {
        self.links.iter().map(|l| l.name.as_str()).collect()
    }

    /// The same chain tried from the entry named `name` (the primary's `model.name` or a
    /// fallback entry's `name`), then the others in their order; `None` when no entry has that
    /// name. Breakers are shared with `self`.
    pub fn starting_at(&self, name: &str) -> Option<Chain> {
        let first = self.links.iter().position(|l| l.name == name)?;
        let order: Arc<[usize]> = std::iter::once(first)
            .chain((0..self.links.len()).filter(|&i| i != first))
            .collect();
        Some(Chain {
            links: self.links.clone(),
            order,
            cooldown: self.cooldown,
        })
    }

    /// Each entry's name and provider, primary first (for `ethan doctor`).
    pub fn providers(&self) -> Vec<(&str, &Arc<dyn ModelProvider>)> {
        self.links
            .iter()
            .map(|l| (l.name.as_str(), &l.provider))
            .collect()
    }

    /// The entries to try now, in order, each with whether its call is a probe. When every
    /// breaker is open, the first entry of the order (without a probe slot).
    fn admitted(&self) -> Vec<(usize, Admission)> {
        let now = Instant::now();
        let mut out: Vec<(usize, Admission)> = self
            .order
            .iter()
            .filter_map(|&i| {
                let a = lock(&self.links[i].breaker).admit(now);
                (a != Admission::Skip).then_some((i, a))
            })
            .collect();
        if out.is_empty() {
            out.push((self.order[0], Admission::Closed));
        }
        out
    }

    async fn call(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        deltas: Option<&EventSink>,
    ) -> Result<Completion, ProviderError> {
        let admitted = self.admitted();
        let mut guards: Vec<ProbeGuard> = admitted
            .iter()
            .filter(|(_, a)| *a == Admission::Probe)
            .map(|&(i, _)| ProbeGuard {
                link: &self.links[i],
                armed: true,
            })
            .collect();
        let last = admitted.len() - 1;
        let mut last_error = None;
        for (n, &(i, admission)) in admitted.iter().enumerate() {
            let link = &self.links[i];
            if admission == Admission::Probe {
                tracing::info!("probing model {} after its cool-down", link.name);
            }
            let result = match deltas {
                Some(d) => link.provider.complete_streaming(messages, tools, d).await,
                None => link.provider.complete(messages, tools).await,
            };
            // The verdict is in: the probe slot is settled below, not given back.
            if let Some(g) = guards.iter_mut().find(|g| std::ptr::eq(g.link, link)) {
                g.armed = false;
            }
            match result {
                Ok(mut c) => {
                    lock(&link.breaker).succeeded();
                    if c.model.is_empty() {
                        c.model = link.name.clone();
                    }
                    if i != 0 {
                        tracing::info!("answered by fallback model {}", link.name);
                    }
                    return Ok(c);
                }
                Err(e) if e.may_fall_back() => {
                    let requests = if e.is_transient() { 1 + MAX_RETRIES } else { 1 };
                    if lock(&link.breaker).failed(requests, Instant::now(), self.cooldown) {
                        tracing::warn!(
                            "model {} failed {TRIP_AFTER}+ requests in a row ({e}); skipping it \
                             for {} s",
                            link.name,
                            self.cooldown.as_secs()
                        );
                    }
                    if n < last {
                        let next = &self.links[admitted[n + 1].0].name;
                        tracing::warn!("model {} failed ({e}); trying {next}", link.name);
                    }
                    last_error = Some(e);
                }
                Err(e) => {
                    // The request itself was refused, or text was shown: not the endpoint's
                    // fault, and nothing to move elsewhere.
                    lock(&link.breaker).released();
                    return Err(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| ProviderError::BadResponse("no model configured".into())))
    }
}

/// Gives a probe slot back when a call is dropped before its verdict (the turn was stopped).
struct ProbeGuard<'a> {
    link: &'a Link,
    armed: bool,
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(&self.link.breaker).released();
        }
    }
}

fn lock(m: &Mutex<Breaker>) -> std::sync::MutexGuard<'_, Breaker> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait::async_trait]
impl ModelProvider for Chain {
    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        self.call(messages, tools, None).await
    }

    async fn complete_streaming(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        self.call(messages, tools, Some(deltas)).await
    }

    /// The primary's check.
    async fn check(&self) -> Result<String, ProviderError> {
        self.links[self.order[0]].provider.check().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_core::message::Role;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Answers from a script of results; counts calls.
    struct Scripted {
        name: &'static str,
        script: Mutex<Vec<Result<&'static str, ProviderError>>>,
        calls: AtomicU32,
    }

    impl Scripted {
        fn new(name: &'static str, script: Vec<Result<&'static str, ProviderError>>) -> Arc<Self> {
            Arc::new(Self {
                name,
                script: Mutex::new(script.into_iter().rev().collect()),
                calls: AtomicU32::new(0),
            })
        }
        fn calls(&self) -> u32 {
            self.calls.load(Ordering::SeqCst)
        }
    }

    #[async_trait::async_trait]
    impl ModelProvider for Scripted {
        async fn complete(
            &self,
            _: &[ChatMessage],
            _: &[ToolSpec],
        ) -> Result<Completion, ProviderError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let next = self.script.lock().unwrap().pop();
            let text = next.unwrap_or(Ok("(script exhausted)"))?;
            Ok(Completion {
                message: ChatMessage::assistant(format!("{} says {text}", self.name)),
                finish_reason: None,
                usage: None,
                model: String::new(),
            })
        }
    }

    fn http(status: u16) -> ProviderError {
        ProviderError::Http {
            status,
            message: "x".into(),
        }
    }

    fn chain(links: &[&Arc<Scripted>], cooldown: Duration) -> Chain {
        Chain::from_providers(
            links
                .iter()
                .map(|s| (s.name.to_string(), (*s).clone() as Arc<dyn ModelProvider>))
                .collect(),
            cooldown,
        )
    }

    async fn ask(c: &Chain) -> Result<Completion, ProviderError> {
        c.complete(&[ChatMessage::user("hi")], &[]).await
    }

    #[tokio::test]
    async fn a_server_error_moves_to_the_next_model_and_opens_the_breaker() {
        let a = Scripted::new("a", vec![Err(http(500)), Ok("back")]);
        let b = Scripted::new("b", vec![Ok("one"), Ok("two")]);
        let c = chain(&[&a, &b], Duration::from_millis(200));
        let first = ask(&c).await.unwrap();
        assert_eq!(first.message.content.as_deref(), Some("b says one"));
        assert_eq!(first.model, "b");
        assert_eq!(first.message.role, Role::Assistant);
        // A 500 was retried inside the client: the breaker is open; `a` is skipped.
        let second = ask(&c).await.unwrap();
        assert_eq!(second.message.content.as_deref(), Some("b says two"));
        assert_eq!(a.calls(), 1);
        tokio::time::sleep(Duration::from_millis(250)).await;
        // After the cool-down one call probes `a`, which answers: closed again.
        let third = ask(&c).await.unwrap();
        assert_eq!(third.message.content.as_deref(), Some("a says back"));
        assert_eq!(a.calls(), 2);
        assert!(lock(&c.links[0].breaker).open_until.is_none());
    }

    #[tokio::test]
    async fn a_refused_request_or_a_broken_stream_is_not_moved() {
        let a = Scripted::new(
            "a",
            vec![
                Err(http(400)),
                Err(ProviderError::Interrupted {
                    shown: "half".into(),
                    cause: Box::new(http(502)),
                }),
                Err(ProviderError::ContextLength("long".into())),
            ],
        );
        let b = Scripted::new("b", vec![]);
        let c = chain(&[&a, &b], Duration::from_secs(60));
        assert!(matches!(
            ask(&c).await,
            Err(ProviderError::Http { status: 400, .. })
        ));
        assert!(matches!(
            ask(&c).await,
            Err(ProviderError::Interrupted { .. })
        ));
        assert!(matches!(
            ask(&c).await,
            Err(ProviderError::ContextLength(_))
        ));
        assert_eq!(b.calls(), 0);
        assert!(lock(&c.links[0].breaker).open_until.is_none());
    }

    #[tokio::test]
    async fn a_failed_probe_reopens_and_single_failures_add_up() {
        // A 404 is not retried: each counts one request.
        let a = Scripted::new(
            "a",
            vec![
                Err(http(404)),
                Err(http(404)),
                Err(http(404)),
                Err(http(503)),
            ],
        );
        let b = Scripted::new("b", vec![]);
        let c = chain(&[&a, &b], Duration::from_millis(100));
        for _ in 0..3 {
            ask(&c).await.unwrap();
        }
        assert_eq!(
            a.calls(),
            3,
            "two single failures do not open it; the third does"
        );
        ask(&c).await.unwrap();
        assert_eq!(a.calls(), 3, "open: skipped");
        tokio::time::sleep(Duration::from_millis(150)).await;
        ask(&c).await.unwrap();
        assert_eq!(a.calls(), 4, "the probe");
        ask(&c).await.unwrap();
        assert_eq!(a.calls(), 4, "the probe failed: open again");
    }

    #[tokio::test]
    async fn every_model_failing_gives_the_last_error_and_all_open_still_tries_the_first() {
        let a = Scripted::new("a", vec![Err(http(502)), Err(http(502))]);
        let b = Scripted::new("b", vec![Err(ProviderError::Timeout(5)), Ok("late")]);
        let c = chain(&[&a, &b], Duration::from_secs(60));
        assert!(matches!(ask(&c).await, Err(ProviderError::Timeout(5))));
        // Both open: the first is called anyway rather than failing without a try.
        assert!(matches!(
            ask(&c).await,
            Err(ProviderError::Http { status: 502, .. })
        ));
        assert_eq!((a.calls(), b.calls()), (2, 1));
    }

    #[tokio::test]
    async fn starting_at_a_named_entry_tries_it_first_then_the_rest() {
        let a = Scripted::new("a", vec![Ok("x")]);
        let b = Scripted::new("b", vec![Err(http(503))]);
        let c = chain(&[&a, &b], Duration::from_secs(60));
        let from_b = c.starting_at("b").unwrap();
        let answer = ask(&from_b).await.unwrap();
        assert_eq!(answer.message.content.as_deref(), Some("a says x"));
        assert_eq!(answer.model, "a");
        assert!(c.starting_at("nope").is_none());
        // The breaker is shared: `b` is open for the whole chain too.
        assert!(lock(&c.links[1].breaker).open_until.is_some());
    }
}
