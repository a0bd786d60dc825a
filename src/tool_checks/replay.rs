//! The replay guard's keys kept in the store across a new guard.

use crate::tools::replay::*;

#[tokio::test]
async fn persisted_keys_survive_a_new_guard() {
    let store = crate::store::Store::open_in_memory().unwrap().shared();
    let g = ReplayGuard::new(Some(store.clone()));
    assert!(!g.seen("k1").await);
    assert!(g.first_time("k1", "t", "shell").await);
    assert!(g.seen("k1").await);
    assert!(!g.first_time("k1", "t", "shell").await);
    let g2 = ReplayGuard::new(Some(store));
    assert!(g2.seen("k1").await, "a restarted daemon must see the key");
    assert!(
        !g2.first_time("k1", "t", "shell").await,
        "a restarted daemon must recognise the key"
    );
    assert!(!g2.seen("k2").await, "looking does not record");
    assert!(g2.first_time("k2", "t", "shell").await);
}
