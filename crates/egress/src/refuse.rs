//! The browser proxies are never a destination of an HTTP client either: [`RefuseProxies`], a
//! layer over `reqwest`'s connector, looks at the address each new connection reached and
//! drops it, before a byte of the request is written, when it is one of the daemon's browser
//! proxies ([`super::Egress::is_proxy`]). Over HTTPS the layer wraps the TLS handshake too, so
//! a proxy reached that way has seen a TLS greeting (never a request) when it is dropped. `reqwest`'s resolver is told a host name only, never the port;
//! [`super::EgressGuard::check_proxies`] judges the name with the port before the request, and
//! this layer holds when a name resolves to a proxy only on the second lookup (DNS rebinding).

use super::{proxy_refusal, Egress};
use hyper_util::client::legacy::connect::{Connection, HttpInfo};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The connector layer of every [`super::EgressClient`].
#[derive(Clone)]
pub struct RefuseProxies {
    pub(super) shared: Egress,
}

impl<S> tower_layer::Layer<S> for RefuseProxies {
    type Service = RefuseProxiesService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RefuseProxiesService {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The connector wrapped by [`RefuseProxies`].
#[derive(Clone)]
pub struct RefuseProxiesService<S> {
    inner: S,
    shared: Egress,
}

impl<S, R> tower_service::Service<R> for RefuseProxiesService<S>
where
    S: tower_service::Service<R, Error = BoxError>,
    S::Response: Connection + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let connecting = self.inner.call(req);
        let shared = self.shared.clone();
        Box::pin(async move {
            let conn = connecting.await?;
            let mut extras = http::Extensions::new();
            conn.connected().get_extras(&mut extras);
            match extras.get::<HttpInfo>().map(HttpInfo::remote_addr) {
                Some(addr) if shared.is_proxy(addr) => {
                    Err(Box::new(proxy_refusal(&addr.ip().to_string(), addr.port())) as BoxError)
                }
                _ => Ok(conn),
            }
        })
    }
}
