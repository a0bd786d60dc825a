//! A job created, paused, resumed and removed in the store.

use crate::tools::jobs::job::*;
use chrono::{DateTime, Utc};
use ethan_core::{ChannelKind, ChatKind, ChatRef};

fn origin_tg() -> Origin {
    Origin {
        channel: ChannelKind::Telegram,
        chat: Some(ChatRef {
            id: "42".into(),
            kind: ChatKind::Direct,
            thread: None,
        }),
        user_id: "42".into(),
        session_key: "telegram:42".into(),
    }
}

fn utc(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

#[tokio::test]
async fn create_pause_resume_remove() {
    let s = crate::store::Store::open_in_memory().unwrap();
    let now = utc("2025-01-01T00:00:00Z");
    let new = NewJob {
        job_id: Some("daily".into()),
        prompt: "p".into(),
        interval_minutes: Some(60),
        ..Default::default()
    };
    let job = create(&s, &new, &origin_tg(), None, now).await.unwrap();
    assert_eq!(job.next_run, Some(now.timestamp() + 3600));
    assert!(matches!(
        create(&s, &new, &origin_tg(), None, now).await,
        Err(JobError::Exists(_))
    ));
    let later = utc("2025-01-03T00:30:00Z");
    assert!(
        set_paused(&s, "daily", true, None, later)
            .await
            .unwrap()
            .paused
    );
    let resumed = set_paused(&s, "daily", false, None, later).await.unwrap();
    assert!(!resumed.paused);
    assert_eq!(
        resumed.next_run,
        Some(utc("2025-01-03T01:00:00Z").timestamp())
    );
    assert_eq!(remove(&s, "daily").await.unwrap().id, "daily");
    assert!(matches!(
        remove(&s, "daily").await,
        Err(JobError::NotFound(_))
    ));
}
