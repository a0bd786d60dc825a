//! PostgreSQL-only tests on the throwaway cluster ([`super::cluster`]): replicas connecting and
//! migrating at once, claims from two stores, a newer schema refused, the error texts of a bad
//! URL, a refused connection and a wrong password, the backend's identity. The shared behaviour
//! is checked by `crate::store::conformance`, which takes its PostgreSQL store from
//! [`subject`].

use super::cluster::{cluster, fresh_database, PASSWORD_USER};
use super::{PgStore, SCHEMA_VERSION};
use crate::store::conformance::{self, Backdate, Subject};
use crate::store::{StoreAdmin, StoreError};
use async_trait::async_trait;
use ethan_core::message::ChatMessage;
use ethan_core::store::{MessageStore, SessionStore};
use std::sync::Arc;

/// A fresh database; fails (never skips) when the cluster cannot start.
async fn database() -> String {
    match fresh_database().await {
        Ok(url) => url,
        Err(e) => panic!("{e}"),
    }
}

/// A [`PgStore`] on a fresh database, for the conformance suite.
pub(crate) async fn subject() -> Subject {
    let store = PgStore::connect(&database().await).await.unwrap();
    Subject {
        store: store.daemon(),
        backdate: Arc::new(store),
    }
}

#[async_trait]
impl Backdate for PgStore {
    async fn backdate_inbound(&self, event_id: &str, secs: i64) {
        let client = self.client("backdate").await.unwrap();
        client
            .execute(
                "UPDATE inbound_events SET received_at = received_at - $2,
                 updated_at = updated_at - $2 WHERE event_id = $1",
                &[&event_id, &secs],
            )
            .await
            .unwrap();
    }
}

/// Run one statement on `url` as given.
async fn exec(url: &str, sql: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    let _ = conn.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_connecting_at_once_apply_each_migration_once() {
    let url = database().await;
    let (a, b, c) = tokio::join!(
        PgStore::connect(&url),
        PgStore::connect(&url),
        PgStore::connect(&url)
    );
    let (a, b, _c) = (a.unwrap(), b.unwrap(), c.unwrap());
    assert_eq!(a.schema_version().await.unwrap(), SCHEMA_VERSION);
    let client = a.client("test").await.unwrap();
    let steps: i64 = client
        .query_one("SELECT COUNT(*) FROM schema_version", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(steps, SCHEMA_VERSION);
    // Two replicas claiming the same slot at once: one run.
    conformance::concurrent_claims(&[a.daemon(), b.daemon()]).await;
    // And asking for the same session key at once: one session.
    let (x, y) = tokio::join!(
        a.current_session("lark:oc_1"),
        b.current_session("lark:oc_1")
    );
    assert_eq!(x.unwrap(), y.unwrap());
}

#[tokio::test]
async fn a_database_with_a_newer_schema_is_refused() {
    let url = database().await;
    PgStore::connect(&url).await.unwrap();
    exec(
        &url,
        &format!(
            "INSERT INTO schema_version (version, applied_at) VALUES ({}, 0)",
            SCHEMA_VERSION + 1
        ),
    )
    .await;
    let e = PgStore::connect(&url).await.unwrap_err();
    assert!(
        matches!(e, StoreError::Corrupt { op: "migrate", .. }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains(&format!("schema version {}", SCHEMA_VERSION + 1))
            && text.contains("newer")
            && text.contains("use a newer ethan"),
        "{text}"
    );
}

#[tokio::test]
async fn a_refused_connection_names_the_server() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = PgStore::connect(&format!("postgres://ethan@127.0.0.1:{port}/bot"))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!("connection refused to 127.0.0.1:{port}/bot")),
        "{text}"
    );
    assert!(matches!(e, StoreError::Backend { op: "connect", .. }));
}

#[tokio::test]
async fn a_bad_url_says_so() {
    let e = PgStore::connect("postgres://ethan@127.0.0.1:notaport/bot")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("URL is not valid"), "{e}");
}

#[tokio::test]
async fn a_wrong_password_is_refused_with_the_servers_reason() {
    let url = database().await;
    let port = cluster().unwrap().port();
    let db = url.rsplit('/').next().unwrap().to_owned();
    exec(
        &url,
        &format!(
            "DO $$ BEGIN CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD 'right-one';
             EXCEPTION WHEN duplicate_object THEN NULL; END $$;
             ALTER DATABASE \"{db}\" OWNER TO {PASSWORD_USER};"
        ),
    )
    .await;
    let e = PgStore::connect(&format!(
        "postgres://{PASSWORD_USER}:wrong@127.0.0.1:{port}/{db}"
    ))
    .await
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "password authentication failed for user \"{PASSWORD_USER}\""
        )),
        "{text}"
    );
    assert!(!text.contains("wrong"), "the password is not shown: {text}");
    let ok = PgStore::connect(&format!(
        "postgres://{PASSWORD_USER}:right-one@127.0.0.1:{port}/{db}"
    ))
    .await
    .unwrap();
    assert_eq!(ok.schema_version().await.unwrap(), SCHEMA_VERSION);
}

#[tokio::test]
async fn backend_info_names_the_server_never_the_password() {
    let url = database().await;
    let store = PgStore::connect(&url).await.unwrap();
    let info = store.backend_info().await.unwrap();
    let db = url.rsplit('/').next().unwrap();
    assert_eq!(info.backend, "postgresql");
    assert_eq!(
        info.location,
        format!("127.0.0.1:{}/{db}", cluster().unwrap().port())
    );
    assert!(info.server_version.starts_with("PostgreSQL 1"), "{info:?}");
    assert_eq!(info.schema_version, SCHEMA_VERSION);
    assert_eq!(info.binary_schema_version, SCHEMA_VERSION);
    assert_eq!(
        info.connection.as_deref(),
        Some("not encrypted (no sslmode in store.url)")
    );
    store.checkpoint().await.unwrap();
}

#[tokio::test]
async fn text_with_nul_is_stored_with_a_replacement_character() {
    let store = PgStore::connect(&database().await).await.unwrap();
    let sid = store.current_session("t:nul").await.unwrap();
    store
        .append_messages(
            &sid,
            &[ChatMessage::user("a\0b"), ChatMessage::tool("c", "x\0")],
        )
        .await
        .unwrap();
    let back = store.load_window(&sid, 10).await.unwrap();
    assert_eq!(back[0].content.as_deref(), Some("a\u{FFFD}b"));
    assert_eq!(back[1].content.as_deref(), Some("x\u{FFFD}"));
}

#[tokio::test]
async fn sslmode_require_uses_tls_and_fails_clearly_without_it() {
    let url = database().await;
    // The throwaway server has no TLS: a required TLS connection is refused, not downgraded,
    // and `prefer` is no weaker.
    for mode in ["require", "prefer", "verify-full"] {
        let e = PgStore::connect(&format!("{url}?sslmode={mode}"))
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("does not offer TLS") && text.contains("127.0.0.1"),
            "{mode}: {text}"
        );
    }
    // `disable` connects in plain text, and says so.
    let plain = PgStore::connect(&format!("{url}?sslmode=disable"))
        .await
        .unwrap();
    assert_eq!(
        plain.connection_security().await.unwrap(),
        "not encrypted (sslmode=disable)"
    );
}

/// An event of `chat` with the platform order `seq`.
fn chat_event(chat: &str, id: &str, seq: i64) -> ethan_channels::InboundEvent {
    use ethan_channels::{ChannelKind, ChatKind, ChatRef, InboundEvent, Sender};
    InboundEvent {
        channel: ChannelKind::Lark,
        event_id: id.into(),
        message_id: Some(id.into()),
        chat: ChatRef {
            id: chat.into(),
            kind: ChatKind::Group,
            thread: None,
        },
        sender: Sender {
            id: "ou_1".into(),
            display_name: "A".into(),
            is_bot: false,
        },
        text: id.into(),
        relayed: None,
        unfetched: None,
        addressed: true,
        reply_to: None,
        sent_at: seq / 1000,
        seq,
        attachments: Vec::new(),
    }
}

#[tokio::test]
async fn leases_exclude_other_holders_expire_renew_and_release() {
    use crate::store::ReplicaStore;
    let url = database().await;
    let (a, b) = (
        PgStore::connect(&url).await.unwrap(),
        PgStore::connect(&url).await.unwrap(),
    );
    assert!(a.replicated());
    assert!(a.try_lease("x", "A", 30).await.unwrap());
    assert!(!b.try_lease("x", "B", 30).await.unwrap(), "held by A");
    assert!(
        a.try_lease("x", "A", 30).await.unwrap(),
        "A extends its own"
    );
    assert!(a
        .renew_leases(&["x".into()], "A", 30)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        b.renew_leases(&["x".into()], "B", 30).await.unwrap(),
        vec!["x".to_string()],
        "B does not hold x"
    );
    b.release_lease("x", "B").await.unwrap();
    assert!(
        !b.try_lease("x", "B", 30).await.unwrap(),
        "B cannot release A's lease"
    );
    a.release_lease("x", "A").await.unwrap();
    assert!(
        b.try_lease("x", "B", 30).await.unwrap(),
        "free after A let go"
    );

    // An expired lease goes to whoever asks, and its old holder learns it lost it.
    assert!(a.try_lease("y", "A", 1).await.unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(1_300)).await;
    assert!(b.try_lease("y", "B", 30).await.unwrap(), "expired");
    assert_eq!(
        a.renew_leases(&["y".into()], "A", 30).await.unwrap(),
        vec!["y".to_string()]
    );
}

#[tokio::test]
async fn one_of_two_replicas_taking_a_lease_at_once_gets_it() {
    use crate::store::ReplicaStore;
    let url = database().await;
    let (a, b) = (
        PgStore::connect(&url).await.unwrap(),
        PgStore::connect(&url).await.unwrap(),
    );
    for i in 0..20 {
        let name = format!("race-{i}");
        let (x, y) = tokio::join!(a.try_lease(&name, "A", 30), b.try_lease(&name, "B", 30));
        assert!(x.unwrap() ^ y.unwrap(), "exactly one holder of {name}");
    }
}

#[tokio::test]
async fn a_sessions_pending_events_come_in_the_platform_order() {
    use crate::store::{session_lease, InboundStore, Pending, ReplicaStore};
    let store = PgStore::connect(&database().await).await.unwrap();
    // Recorded out of order (two replicas' intakes), listed in the platform's order.
    for (id, seq) in [("m30", 30_000), ("m10", 10_000), ("m20", 20_000)] {
        assert!(store
            .record_inbound(&chat_event("oc_1", id, seq))
            .await
            .unwrap());
    }
    store
        .record_inbound(&chat_event("oc_2", "other", 5))
        .await
        .unwrap();
    store
        .set_inbound_state("lark", "m10", "processing")
        .await
        .unwrap();
    store
        .set_inbound_sending("lark", "m20", "the reply")
        .await
        .unwrap();
    let key = chat_event("oc_1", "x", 0).session_key();
    let pending = store.pending_inbound(&key).await.unwrap();
    assert_eq!(pending.len(), 3, "{pending:?}");
    assert!(
        matches!(&pending[0], Pending::Turn { event, resumed: true } if event.event_id == "m10"),
        "{pending:?}"
    );
    assert!(
        matches!(&pending[1], Pending::Reply(r) if r.event.event_id == "m20" && r.reply == "the reply"),
        "{pending:?}"
    );
    assert!(
        matches!(&pending[2], Pending::Turn { event, resumed: false } if event.event_id == "m30"),
        "{pending:?}"
    );

    // Sessions with unfinished events and nobody holding them.
    let mut free = store.unleased_sessions().await.unwrap();
    free.sort();
    assert_eq!(free, vec![key.clone(), "lark:oc_2".to_string()]);
    assert!(store
        .try_lease(&session_lease(&key), "A", 30)
        .await
        .unwrap());
    assert_eq!(
        store.unleased_sessions().await.unwrap(),
        vec!["lark:oc_2".to_string()]
    );
    store
        .set_inbound_state("lark", "other", "done")
        .await
        .unwrap();
    assert!(store.unleased_sessions().await.unwrap().is_empty());

    // An event started MAX_ATTEMPTS times is failed, not handed out again.
    for _ in 0..crate::store::inbound::MAX_ATTEMPTS {
        store
            .set_inbound_state("lark", "m30", "processing")
            .await
            .unwrap();
    }
    let pending = store.pending_inbound(&key).await.unwrap();
    assert!(
        pending
            .iter()
            .all(|p| !matches!(p, Pending::Turn { event, .. } if event.event_id == "m30")),
        "{pending:?}"
    );
    assert_eq!(
        store.inbound_state("lark", "m30").await.unwrap().as_deref(),
        Some("failed")
    );
}

#[tokio::test]
async fn a_session_is_claimed_with_its_events_and_let_go_only_when_none_is_left() {
    use crate::store::{session_lease, InboundStore, Pending, ReplicaStore};
    use ethan_core::store::KvStore;
    let url = database().await;
    let (a, b) = (
        PgStore::connect(&url).await.unwrap(),
        PgStore::connect(&url).await.unwrap(),
    );
    let key = chat_event("oc_c", "x", 0).session_key();
    let lease = session_lease(&key);
    let stop = format!("replica.stop:{key}");
    let none: Vec<String> = Vec::new();
    // Nothing to run: the lease is not taken.
    assert_eq!(
        a.claim_pending(&key, &lease, "A", 30, &none, &stop)
            .await
            .unwrap(),
        None
    );
    assert!(a.lease_holders().await.unwrap().is_empty());

    for (id, seq) in [("c2", 2_000), ("c1", 1_000)] {
        a.record_inbound(&chat_event("oc_c", id, seq))
            .await
            .unwrap();
    }
    a.kv_set(&stop, "{}").await.unwrap();
    let got = a
        .claim_pending(&key, &lease, "A", 30, &none, &stop)
        .await
        .unwrap()
        .expect("claimed");
    let ids: Vec<&str> = got.iter().map(|p| p.event().event_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"], "the platform's order");
    assert!(a.kv_get(&stop).await.unwrap().is_none(), "stop forgotten");
    // Held: another replica gets nothing, and does not forget a stop request.
    b.kv_set(&stop, "{}").await.unwrap();
    assert_eq!(
        b.claim_pending(&key, &lease, "B", 30, &none, &stop)
            .await
            .unwrap(),
        None
    );
    assert!(b.kv_get(&stop).await.unwrap().is_some());

    // The answer's record is fenced by the lease.
    assert!(a
        .set_inbound_sending_fenced("lark", "c1", "one", &lease, "A", 30)
        .await
        .unwrap());
    assert!(!b
        .set_inbound_sending_fenced("lark", "c2", "two", &lease, "B", 30)
        .await
        .unwrap());
    assert_eq!(
        a.inbound_state("lark", "c2").await.unwrap().as_deref(),
        Some("received"),
        "nothing written without the lease"
    );

    // Not let go while an event is left that was not handled.
    let handled = vec!["c1".to_string()];
    let left = a
        .release_if_idle(&key, &lease, "A", &handled, &stop)
        .await
        .unwrap()
        .expect("c2 is left");
    assert!(
        matches!(&left[..], [Pending::Turn { event, .. }] if event.event_id == "c2"),
        "{left:?}"
    );
    assert_eq!(a.lease_holders().await.unwrap().len(), 1);
    // Let go once every event was handled (finished or not).
    let handled = vec!["c1".to_string(), "c2".to_string()];
    assert_eq!(
        a.release_if_idle(&key, &lease, "A", &handled, &stop)
            .await
            .unwrap(),
        None
    );
    assert!(a.lease_holders().await.unwrap().is_empty());
    // Another replica takes it over with what is unfinished (both), the one in `sending` as a
    // reply to settle.
    let got = b
        .claim_pending(&key, &lease, "B", 30, &none, &stop)
        .await
        .unwrap()
        .expect("claimed by B");
    assert!(
        matches!(&got[..], [Pending::Reply(r), Pending::Turn { .. }] if r.reply == "one"),
        "{got:?}"
    );
}
