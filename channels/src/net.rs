//! Network failures in one line a person can act on: [`describe`] lives in `ethan-core` (the
//! model clients, the Lark Open API client and the adapters share it) and keeps this path.

pub use ethan_core::net::describe;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_port_and_an_unknown_host_are_named() {
        // A port nothing listens on: bind, take the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = reqwest::Client::new();
        let e = client
            .get(format!("http://127.0.0.1:{port}/bot123:secret/getMe"))
            .send()
            .await
            .unwrap_err();
        let line = describe(&e);
        assert!(line.starts_with("connection refused ("), "{line}");
        assert!(!line.contains("secret"), "{line}");
        let e = client
            .get("http://no-such-host.invalid/")
            .send()
            .await
            .unwrap_err();
        let line = describe(&e);
        assert!(line.starts_with("no such host ("), "{line}");
    }
}
