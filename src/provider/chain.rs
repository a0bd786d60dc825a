//! The fallback chain: the primary model (`model.*`) and the `model.fallback` entries, tried in
//! order, each behind a circuit breaker.
//!
//! - A call goes to the first entry whose breaker lets it through. When it fails in a way
//!   another endpoint could fix ([`ProviderError::may_fall_back`]: connection, timeout, stall,
//!   408, 429, 5xx, 401/403/404, an unreadable answer) the same request goes to the next entry.
//!   While another entry could take over, an entry gets one attempt (the next entry is the
//!   retry, so a hung endpoint costs one `timeout_secs`, not four); the last candidate keeps its
//!   client's own retries. A request refused as invalid (400, 422, context length) is not
//!   moved, and neither is a streamed answer that broke off after text was shown
//!   ([`ProviderError::Interrupted`]): the person keeps what they saw.
//! - Breaker: an entry whose requests failed [`TRIP_AFTER`] times in a row opens and is skipped
//!   for `model.fallback_cooldown_secs` (60 by default); a call counts every request it made
//!   (1, or `1 +` [`super::MAX_RETRIES`] when the client retried). After the cool-down one call
//!   probes it (half-open; the slot is taken just before that call and only that call settles
//!   it): an answer closes the breaker, a failure opens it again. A broken stream counts as a
//!   failure of its endpoint. When every entry is open the first entry is asked anyway.
//! - The state lives in the process: a restart (or each `ethan chat`) starts with every breaker
//!   closed.
//!
//! Every answer's [`Completion::model`] names the entry that gave it; an answer from any entry
//! but the first of the order is logged (`answered by fallback model …`).

use super::{Completion, ModelProvider, ProviderError, MAX_RETRIES};
use crate::config::{ModelConfig, ModelEndpoint};
use ethan_core::event::EventSink;
use ethan_core::message::{ChatMessage, ToolSpec};
use std::borrow::Cow;
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
    /// The client with its own retries: used when no other entry could take over.
    full: Arc<dyn ModelProvider>,
    /// The same endpoint with one attempt only: used while another entry can take over (the
    /// next entry is the retry) and for probes.
    quick: Arc<dyn ModelProvider>,
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
    /// Whether [`Breaker::admit`] would let a call through now (without taking a probe slot).
    fn would_admit(&self, now: Instant) -> bool {
        match self.open_until {
            None => true,
            Some(until) => !self.probing && now >= until,
        }
    }

    /// Lets a call through, taking the probe slot when the cool-down is over.
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

    /// The endpoint answered: closed.
    fn succeeded(&mut self, admission: Admission) {
        self.failures = 0;
        self.open_until = None;
        if admission == Admission::Probe {
            self.probing = false;
        }
    }

    /// The endpoint failed after `requests` requests. Whether the breaker opened (a failed
    /// probe opens it again).
    fn failed(
        &mut self,
        admission: Admission,
        requests: u32,
        now: Instant,
        cooldown: Duration,
    ) -> bool {
        self.failures = self.failures.saturating_add(requests);
        if admission == Admission::Probe {
            self.probing = false;
            self.open_until = Some(now + cooldown);
            return true;
        }
        if self.failures >= TRIP_AFTER && self.open_until.is_none() {
            self.open_until = Some(now + cooldown);
            return true;
        }
        false
    }

    /// A call that ended without a verdict on the endpoint (a refused request, a cancelled
    /// call): its probe slot, if it held one, is given back.
    fn released(&mut self, admission: Admission) {
        if admission == Admission::Probe {
            self.probing = false;
        }
    }
}

impl Chain {
    /// The chain of `cfg`: its primary endpoint, then `cfg.fallback`, each connected with
    /// `connect(endpoint, retries)` (which picks the wire protocol) twice: with
    /// [`super::MAX_RETRIES`] retries and with none.
    ///
    /// # Errors
    /// The first endpoint whose client cannot be built.
    pub fn from_config(
        cfg: &ModelConfig,
        connect: impl Fn(&ModelEndpoint, u32) -> Result<Arc<dyn ModelProvider>, ProviderError>,
    ) -> Result<Chain, ProviderError> {
        let links = cfg
            .endpoints()
            .iter()
            .map(|ep| {
                Ok(Link {
                    name: ep.name.clone(),
                    full: connect(ep, MAX_RETRIES)?,
                    quick: connect(ep, 0)?,
                    breaker: Mutex::new(Breaker::default()),
                })
            })
            .collect::<Result<Vec<_>, ProviderError>>()?;
        Ok(Self::new(
            links,
            Duration::from_secs(cfg.fallback_cooldown_secs),
        ))
    }

    /// A chain of named providers, tried in the order given; each provider serves both as the
    /// retrying and the single-attempt client.
    pub fn from_providers(
        providers: Vec<(String, Arc<dyn ModelProvider>)>,
        cooldown: Duration,
    ) -> Chain {
        let links = providers
            .into_iter()
            .map(|(name, provider)| Link {
                name,
                full: provider.clone(),
                quick: provider,
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
            .map(|l| (l.name.as_str(), &l.full))
            .collect()
    }

    /// Whether an entry after position `n` of the order could be called now.
    fn another_follows(&self, n: usize) -> bool {
        let now = Instant::now();
        self.order[n + 1..]
            .iter()
            .any(|&j| lock(&self.links[j].breaker).would_admit(now))
    }

    async fn call(
        &self,
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
        deltas: Option<&EventSink>,
    ) -> Result<Completion, ProviderError> {
        let ask = |client: &Arc<dyn ModelProvider>| {
            let client = client.clone();
            async move {
                match deltas {
                    Some(d) => client.complete_streaming(messages, tools, d).await,
                    None => client.complete(messages, tools).await,
                }
            }
        };
        let mut last_error = None;
        for (n, &i) in self.order.iter().enumerate() {
            let link = &self.links[i];
            // The probe slot is taken here, just before the call, and only by this call.
            let admission = lock(&link.breaker).admit(Instant::now());
            if admission == Admission::Skip {
                continue;
            }
            if admission == Admission::Probe {
                tracing::info!("probing model {} after its cool-down", link.name);
            }
            let single = self.another_follows(n);
            let mut guard = ProbeGuard {
                link,
                admission,
                armed: true,
            };
            let result = ask(if single { &link.quick } else { &link.full }).await;
            guard.armed = false;
            // Requests the failed call made: one, or all of the client's tries.
            let requests = |e: &ProviderError| {
                if !single && e.is_transient() {
                    1 + MAX_RETRIES
                } else {
                    1
                }
            };
            match result {
                Ok(mut c) => {
                    lock(&link.breaker).succeeded(admission);
                    if c.model.is_empty() {
                        c.model = link.name.clone();
                    }
                    if n != 0 {
                        tracing::info!("answered by fallback model {}", link.name);
                    }
                    return Ok(c);
                }
                Err(e) if e.may_fall_back() => {
                    self.note_failure(link, admission, requests(&e), &e);
                    if single {
                        tracing::warn!("model {} failed ({e}); trying the next model", link.name);
                    }
                    last_error = Some(e);
                }
                Err(e) => {
                    match &e {
                        // Text was shown: the endpoint failed, but nothing moves elsewhere.
                        ProviderError::Interrupted { cause, .. } => {
                            self.note_failure(link, admission, requests(cause), cause)
                        }
                        // The request itself was refused: no verdict on the endpoint.
                        _ => lock(&link.breaker).released(admission),
                    }
                    return Err(e);
                }
            }
        }
        if let Some(e) = last_error {
            return Err(e);
        }
        // Every breaker is open: the first entry is asked anyway, rather than no one.
        let Some(&first) = self.order.first() else {
            return Err(ProviderError::BadResponse("no model is configured".into()));
        };
        let link = &self.links[first];
        let result = ask(&link.full).await;
        if let Ok(c) = &result {
            lock(&link.breaker).succeeded(Admission::Closed);
            let mut c = c.clone();
            if c.model.is_empty() {
                c.model = link.name.clone();
            }
            return Ok(c);
        }
        result
    }

    /// Counts a failure of `link`, logging when its breaker opens.
    fn note_failure(&self, link: &Link, admission: Admission, requests: u32, e: &ProviderError) {
        if lock(&link.breaker).failed(admission, requests, Instant::now(), self.cooldown) {
            tracing::warn!(
                "model {} failed {TRIP_AFTER}+ requests in a row ({e}); skipping it for {} s",
                link.name,
                self.cooldown.as_secs()
            );
        }
    }
}

/// Gives a probe slot back when a call is dropped before its verdict (the turn was stopped).
struct ProbeGuard<'a> {
    link: &'a Link,
    admission: Admission,
    armed: bool,
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(&self.link.breaker).released(self.admission);
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
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        self.call(messages, tools, None).await
    }

    async fn complete_streaming(
        &self,
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        self.call(messages, tools, Some(deltas)).await
    }

    /// The first entry's check.
    async fn check(&self) -> Result<String, ProviderError> {
        match self.order.first() {
            Some(&i) => self.links[i].full.check().await,
            None => Err(ProviderError::BadResponse("no model is configured".into())),
        }
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
            _: &[Cow<'_, ChatMessage>],
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
        c.complete(&ethan_core::provider::owned([ChatMessage::user("hi")]), &[])
            .await
    }

    #[tokio::test]
    async fn a_server_error_moves_to_the_next_model_and_three_open_the_breaker() {
        let a = Scripted::new(
            "a",
            vec![Err(http(500)), Err(http(500)), Err(http(500)), Ok("back")],
        );
        let b = Scripted::new("b", vec![Ok("1"), Ok("2"), Ok("3"), Ok("4")]);
        let c = chain(&[&a, &b], Duration::from_millis(200));
        let first = ask(&c).await.unwrap();
        assert_eq!(first.message.content.as_deref(), Some("b says 1"));
        assert_eq!(first.model, "b");
        assert_eq!(first.message.role, Role::Assistant);
        // With another model to take over, each failure is one request: three open it.
        ask(&c).await.unwrap();
        assert!(lock(&c.links[0].breaker).open_until.is_none());
        ask(&c).await.unwrap();
        assert!(lock(&c.links[0].breaker).open_until.is_some());
        assert_eq!(a.calls(), 3);
        let fourth = ask(&c).await.unwrap();
        assert_eq!(fourth.message.content.as_deref(), Some("b says 4"));
        assert_eq!(a.calls(), 3, "skipped while open");
        tokio::time::sleep(Duration::from_millis(250)).await;
        // After the cool-down one call probes `a`, which answers: closed again.
        let fifth = ask(&c).await.unwrap();
        assert_eq!(fifth.message.content.as_deref(), Some("a says back"));
        assert_eq!(a.calls(), 4);
        let breaker = lock(&c.links[0].breaker);
        assert!(breaker.open_until.is_none() && !breaker.probing && breaker.failures == 0);
    }

    #[test]
    fn only_the_probe_settles_the_probe_slot() {
        let now = Instant::now();
        let cool = Duration::from_secs(60);
        let mut b = Breaker::default();
        assert_eq!(b.admit(now), Admission::Closed);
        // A call admitted before the breaker opened...
        assert!(b.failed(Admission::Closed, 3, now, cool));
        let later = now + cool;
        assert_eq!(b.admit(later), Admission::Probe);
        // ...finishing (failed or refused) while the probe is in flight leaves the slot taken.
        assert!(!b.failed(Admission::Closed, 1, later, cool));
        b.released(Admission::Closed);
        assert_eq!(b.admit(later), Admission::Skip, "one probe at a time");
        b.succeeded(Admission::Probe);
        assert_eq!(b.admit(later), Admission::Closed);
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
        // `a` failed once; `b`, the last candidate, failed with its retries: open.
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
        // The breaker is shared: `b`'s failure counts for the whole chain.
        assert_eq!(lock(&c.links[1].breaker).failures, 1);
    }
}
