//! What every egress guard of one daemon shares ([`Egress`]): the addresses of the browser
//! proxies it runs, which a browser's connection ([`super::EgressGuard::connect`]) may never
//! reach whatever `allow_private` says (a page would act through another session's proxy), and
//! the metrics registry its verdicts are counted in. The daemon's wiring step builds one and
//! hands it to whatever builds guards. The HTTP clients (`web_fetch`, `web_search`, MCP, media)
//! refuse the proxies too, by address and port, whatever `allow_private` lists: before a
//! request ([`super::EgressGuard::check_url`], [`super::EgressGuard::check_proxies`]) and at
//! each connection ([`super::refuse`]).
//!
//! A guard built outside the daemon ([`super::EgressGuard::new`]: tests, stand-alone tools) has
//! an [`Egress`] of its own: the proxies started with it (or its clones) are refused by it, and a
//! proxy of any other guard listens on loopback, which the address rule refuses anyway unless
//! `allow_private` lists it.

use ethan_metrics::Metrics;
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
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

    /// The guard exempting the hosts of `allow_private` (the config's
    /// `tools.web_fetch.allow_private`), resolving with the system resolver.
    pub fn system_guard(&self, allow_private: &[String]) -> super::EgressGuard {
        self.guard(allow_private, Arc::new(super::SystemLookup))
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn proxies(&self) -> std::sync::MutexGuard<'_, HashSet<SocketAddr>> {
        self.proxies.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a connection to `addr` may reach one of the browser proxies: the same port and
    /// the same address in any spelling the kernel accepts — an IPv4-mapped IPv6 address is
    /// its IPv4 address, and a proxy on loopback is reached through any loopback or unspecified
    /// address (`0.0.0.0`, `::`, `::ffff:0.0.0.0` connect to this machine).
    pub fn is_proxy(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        let local = |ip: IpAddr| ip.is_loopback() || ip.is_unspecified();
        self.proxies().iter().any(|p| {
            let proxy = p.ip().to_canonical();
            p.port() == addr.port() && (proxy == ip || (local(proxy) && local(ip)))
        })
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
    use crate::proxy::BrowserProxy;
    use crate::{ConnectFailure, EgressGuard, Route, StaticLookup};
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

    /// A proxy on `127.0.0.1:P` is matched in every spelling that reaches it: the IPv4-mapped
    /// address, and loopback or unspecified addresses with its port; not another port.
    #[tokio::test]
    async fn a_proxy_is_matched_as_the_kernel_routes_to_it() {
        let egress = Egress::new(Arc::new(Metrics::new()));
        let proxy = BrowserProxy::start(egress.guard(&[], Arc::new(StaticLookup::new())), "a")
            .await
            .unwrap();
        let addr: SocketAddr = proxy.url().trim_start_matches("http://").parse().unwrap();
        let p = addr.port();
        for spelled in [
            format!("127.0.0.1:{p}"),
            format!("[::ffff:127.0.0.1]:{p}"),
            format!("0.0.0.0:{p}"),
            format!("[::ffff:0.0.0.0]:{p}"),
            format!("[::]:{p}"),
            format!("[::1]:{p}"),
        ] {
            assert!(egress.is_proxy(spelled.parse().unwrap()), "{spelled}");
        }
        let other = p.wrapping_add(1).max(1);
        assert!(!egress.is_proxy(format!("127.0.0.1:{other}").parse().unwrap()));
        assert!(!egress.is_proxy(format!("10.0.0.1:{p}").parse().unwrap()));
    }

    /// Resolves `flip.test` to 127.0.0.2 the first time and to 127.0.0.1 after (DNS rebinding).
    struct Flip(std::sync::atomic::AtomicUsize);

    impl crate::Lookup for Flip {
        fn lookup(
            &self,
            _host: &str,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = std::io::Result<Vec<std::net::IpAddr>>> + Send>,
        > {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let ip = if n == 0 { "127.0.0.2" } else { "127.0.0.1" };
            Box::pin(async move { Ok(vec![ip.parse().unwrap()]) })
        }
    }

    /// The HTTP clients refuse a browser proxy of the daemon whatever `allow_private` lists:
    /// by its address, by a listed name that resolves to it, and by a name that resolves to it
    /// only on the request's own lookup (the connector drops the connection).
    #[tokio::test]
    async fn the_http_clients_refuse_the_proxies_whatever_allow_private_lists() {
        use crate::{EgressClient, EgressError};
        let egress = Egress::new(Arc::new(Metrics::new()));
        let lookup =
            Arc::new(StaticLookup::new().with("mine.test", &["127.0.0.1".parse().unwrap()]));
        let proxy = BrowserProxy::start(egress.guard(&[], lookup.clone()), "a")
            .await
            .unwrap();
        let port = proxy
            .url()
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<u16>()
            .unwrap();
        let allow = [
            "127.0.0.1".to_string(),
            "mine.test".into(),
            "flip.test".into(),
        ];
        for (url, guard) in [
            (proxy.url(), egress.guard(&allow, lookup.clone())),
            (
                format!("http://mine.test:{port}/"),
                egress.guard(&allow, lookup.clone()),
            ),
            (
                format!("http://flip.test:{port}/"),
                egress.guard(&allow, Arc::new(Flip(Default::default()))),
            ),
        ] {
            let c = EgressClient::new(&guard, Route::WebFetch, Vec::new(), |b| b).unwrap();
            match c.get(&url).send().await {
                Err(EgressError::Refused(r)) => {
                    assert!(
                        r.0.contains("one of Ethan's own browser proxies"),
                        "{url}: {r}"
                    )
                }
                other => panic!("{url} was not refused: {other:?}"),
            }
        }
    }
}
