//! What every egress guard of one daemon shares ([`Egress`]): the addresses of the browser
//! proxies it runs, which a browser's connection ([`super::EgressGuard::connect`]) may never
//! reach whatever `allow_private` says (a page would act through another session's proxy), and
//! the metrics registry its verdicts are counted in. The daemon's wiring step builds one and
//! hands it to whatever builds guards. Known gap: the HTTP clients' checks (`check_url`,
//! `resolve`: `web_fetch`, `web_search`, MCP, media) judge a proxy's loopback address by the
//! address rule only, so a guard whose `allow_private` lists loopback does not refuse it there.
//!
//! A guard built outside the daemon ([`super::EgressGuard::new`]: tests, stand-alone tools) has
//! an [`Egress`] of its own: the proxies started with it (or its clones) are refused by it, and a
//! proxy of any other guard listens on loopback, which the address rule refuses anyway unless
//! `allow_private` lists it.

use crate::metrics::Metrics;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// The shared part of the egress guards of one daemon. Cheap to clone (clones share).
#[derive(Clone, Default)]
pub struct Egress {
    proxies: Arc<Mutex<HashSet<SocketAddr>>>,
    metrics: Arc<Metrics>,
}

impl Egress {
    /// No proxy running yet; verdicts counted in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            proxies: Default::default(),
            metrics,
        }
    }

    /// The guard exempting the hosts of `allow_private`, resolving with `lookup`.
    pub fn guard(
        &self,
        allow_private: &[String],
        lookup: Arc<dyn super::Lookup>,
    ) -> super::EgressGuard {
        super::EgressGuard::within(self.clone(), allow_private, lookup)
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn proxies(&self) -> std::sync::MutexGuard<'_, HashSet<SocketAddr>> {
        self.proxies.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `addr` is one of the browser proxies.
    pub fn is_proxy(&self, addr: SocketAddr) -> bool {
        self.proxies().contains(&addr)
    }

    /// A browser proxy now listens on `addr`.
    pub(crate) fn add_proxy(&self, addr: SocketAddr) {
        self.proxies().insert(addr);
    }

    /// The browser proxy on `addr` has stopped.
    pub(crate) fn remove_proxy(&self, addr: SocketAddr) {
        self.proxies().remove(&addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::proxy::BrowserProxy;
    use crate::egress::{ConnectFailure, EgressGuard, Route, StaticLookup};
    use std::time::Duration;

    async fn refusal(guard: &EgressGuard, port: u16) -> String {
        match guard
            .connect(
                Route::Browser,
                "127.0.0.1",
                port,
                &[],
                Duration::from_secs(2),
            )
            .await
        {
            Err(ConnectFailure::Refused(r)) => r.0,
            Err(e) => panic!("not refused: {e}"),
            Ok(_) => panic!("connected to a browser proxy"),
        }
    }

    /// A proxy started with one guard of the daemon is refused by every other guard of it,
    /// even one that `allow_private` lets onto loopback; a guard outside it still refuses it by
    /// the address rule. Verdicts are counted in the daemon's registry.
    #[tokio::test]
    async fn every_guard_of_one_daemon_refuses_its_proxies() {
        let metrics = Arc::new(Metrics::new());
        let egress = Egress::new(metrics.clone());
        let lookup = Arc::new(StaticLookup::new());
        let proxy = BrowserProxy::start(egress.guard(&[], lookup.clone()), "a")
            .await
            .unwrap();
        let addr: SocketAddr = proxy.url().trim_start_matches("http://").parse().unwrap();
        let port = addr.port();
        let loopback = egress.guard(&["127.0.0.1".into()], lookup.clone());
        assert!(egress.is_proxy(addr));
        let why = refusal(&loopback, port).await;
        assert!(why.contains("one of Ethan's own browser proxies"), "{why}");
        let outside = EgressGuard::new(&[], lookup);
        let why = refusal(&outside, port).await;
        assert!(why.contains("loopback"), "{why}");
        let text = metrics.render();
        assert!(
            text.contains("ethan_egress_total{path=\"browser\",verdict=\"refused\"} 1"),
            "{text}"
        );
        drop(proxy);
        assert!(!egress.is_proxy(addr));
    }
}
