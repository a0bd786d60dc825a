//! Network failures in one line a person can act on: what went wrong in plain words
//! ("connection refused", "no such host", "TLS", "timed out") followed by the cause chain of the
//! error (reqwest → hyper → the OS or rustls), with request URLs left out (a Bot API URL
//! carries the bot token).

/// `error` and its sources as one line, led by the cause in plain words when one is known.
pub fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(error);
    while let Some(e) = cur {
        let msg = strip_url(&e.to_string());
        // A wrapper often repeats its source's text; keep each message once.
        if !msg.is_empty() && !parts.iter().any(|p| p.contains(&msg)) {
            parts.retain(|p| !msg.contains(p.as_str()));
            parts.push(msg);
        }
        cur = e.source();
    }
    let chain = parts.join(": ");
    match plain_cause(&chain) {
        Some(cause) => format!("{cause} ({chain})"),
        None => chain,
    }
}

/// The cause in plain words, from the texts of the chain.
fn plain_cause(chain: &str) -> Option<&'static str> {
    let l = chain.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| l.contains(w));
    Some(if has(&["connection refused"]) {
        "connection refused"
    } else if has(&[
        "dns error",
        "failed to lookup address",
        "name or service not known",
        "no address associated",
        "nodename nor servname",
    ]) {
        "no such host"
    } else if has(&["certificate", "tls", "handshake", "invalid peer"]) {
        "TLS failed"
    } else if has(&["timed out", "timeout", "deadline has elapsed"]) {
        "timed out"
    } else if has(&["connection reset", "broken pipe"]) {
        "connection reset"
    } else if has(&["network is unreachable", "no route to host"]) {
        "network unreachable"
    } else {
        return None;
    })
}

/// `error sending request for url (https://…)` → `error sending request`.
fn strip_url(msg: &str) -> String {
    match msg.find(" for url (") {
        Some(start) => {
            let rest = &msg[start + " for url (".len()..];
            let end = rest.find(')').map_or(rest.len(), |i| i + 1);
            format!("{}{}", &msg[..start], &rest[end..])
                .trim()
                .to_string()
        }
        None => msg.trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_left_out() {
        assert_eq!(
            strip_url("error sending request for url (https://x/bot1:abc/getMe)"),
            "error sending request"
        );
        assert_eq!(strip_url("plain"), "plain");
    }

    #[test]
    fn the_cause_leads_and_repeats_are_dropped() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let inner = E("Connection refused (os error 111)", None);
        let outer = E(
            "error sending request for url (http://x/)",
            Some(Box::new(inner)),
        );
        assert_eq!(
            describe(&outer),
            "connection refused (error sending request: Connection refused (os error 111))"
        );
        assert_eq!(describe(&E("odd", None)), "odd");
    }
}
