//! `schedule_pause` against the store.

use super::ctx_in;
use crate::tools::schedule_create::ScheduleCreate;
use crate::tools::schedule_list::ScheduleList;
use crate::tools::schedule_pause::*;
use crate::tools::schedule_remove::ScheduleRemove;
use crate::tools::Tool;
use serde_json::json;

#[tokio::test]
async fn list_pause_resume_remove() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = ctx_in(dir.path());
    ctx.ethan_home = Some(dir.path().to_path_buf());
    ctx.services.store = Some(crate::store::Store::open_in_memory().unwrap().shared());
    let list = ScheduleList::new(None);
    assert_eq!(
        list.run(json!({}), &ctx).await.unwrap().text,
        "No scheduled jobs."
    );
    let r: crate::tools::ToolResult = ScheduleCreate::new(None)
        .run(
            json!({"prompt": "p", "interval_minutes": 60, "job_id": "hourly",
                   "deliver_to": "lark:oc_team", "timezone": "Europe/Paris"}),
            &ctx,
        )
        .await
        .into();
    assert!(r.ok, "{r:?}");
    let out = list.run(json!({}), &ctx).await.unwrap().text;
    assert!(
        out.contains("`hourly`") && out.contains("every 1 hour(s)"),
        "{out}"
    );
    assert!(
        out.contains("Europe/Paris") && out.contains("lark:oc_team"),
        "{out}"
    );
    assert!(out.contains("never ran"), "{out}");

    let pause = SchedulePause::new(None);
    // As the executor does: the tool's assessment first (it looks the job up), then consent.
    let args = json!({"job_id": "hourly", "paused": true});
    let mut asked = ctx.clone();
    asked.assessment = pause.assess(&args, &ctx).await;
    let d = pause.describe(&args, &asked).consent.unwrap();
    assert!(d.starts_with("pause scheduled job `hourly`"), "{d}");
    let r: crate::tools::ToolResult = pause.run(json!({"job_id": "hourly"}), &ctx).await.into();
    assert!(r.output.contains("Paused"), "{r:?}");
    assert!(list
        .run(json!({}), &ctx)
        .await
        .unwrap()
        .text
        .contains("next: paused"));
    let r: crate::tools::ToolResult = pause
        .run(json!({"job_id": "hourly", "paused": false}), &ctx)
        .await
        .into();
    assert!(
        r.output.contains("Resumed") && r.output.contains("next run"),
        "{r:?}"
    );
    let detail = list
        .run(json!({"job_id": "hourly"}), &ctx)
        .await
        .unwrap()
        .text;
    assert!(
        detail.contains("Prompt: p") && detail.contains("Recent runs: none"),
        "{detail}"
    );

    let remove = ScheduleRemove::new(None);
    let args = json!({"job_id": "hourly"});
    let mut asked = ctx.clone();
    asked.assessment = remove.assess(&args, &ctx).await;
    let d = remove.describe(&args, &asked).consent.unwrap();
    assert!(d.contains("every 1 hour(s)"), "{d}");
    assert!(remove.run(json!({"job_id": "hourly"}), &ctx).await.is_ok());
    let r: crate::tools::ToolResult = remove.run(json!({"job_id": "hourly"}), &ctx).await.into();
    assert!(r.error.unwrap().contains("no job"));
    let r: crate::tools::ToolResult = pause.run(json!({"job_id": "nope"}), &ctx).await.into();
    assert!(r.error.unwrap().contains("no job"));
}
