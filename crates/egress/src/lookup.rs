//! Name resolution for the egress guard: [`SystemLookup`] asks the system resolver
//! (`getaddrinfo` through tokio); tests substitute a [`StaticLookup`], a fixed table.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;

/// Resolves a host name to IP addresses.
pub trait Lookup: Send + Sync {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>;
}

/// The system resolver (`getaddrinfo` through tokio).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>> {
        let host = host.to_string();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// A fixed table of host names, for tests: unknown names fail like an NXDOMAIN.
#[derive(Debug, Default, Clone)]
pub struct StaticLookup {
    table: HashMap<String, Vec<IpAddr>>,
}

impl StaticLookup {
    pub fn new() -> Self {
        Self::default()
    }
    /// Make `host` resolve to `addrs`.
    pub fn with(mut self, host: &str, addrs: &[IpAddr]) -> Self {
        self.table.insert(host.to_ascii_lowercase(), addrs.to_vec());
        self
    }
}

impl Lookup for StaticLookup {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>> {
        let r = self
            .table
            .get(&host.to_ascii_lowercase())
            .cloned()
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("no address for {host}"),
                )
            });
        Box::pin(async move { r })
    }
}
