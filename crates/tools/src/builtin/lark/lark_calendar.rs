//! `lark_calendar_events`: today's agenda or a time range of the primary Lark calendar.
//!
//! `POST /open-apis/calendar/v4/calendars/primary` finds the calendar; then
//! `GET /open-apis/calendar/v4/calendars/{id}/events/instance_view?start_time&end_time` (Unix
//! seconds, recurring events expanded) reads it, in windows of at most 40 days that are merged.
//! With `channels.lark.user_access_token` this is the user's calendar; without one it is the
//! bot's own, and the result says so. Read-only.

use crate::lark_common::{api_failure, segment, LarkClient};
use crate::{Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;

/// The longest window one instance_view call may cover.
pub const MAX_WINDOW_SECS: i64 = 40 * 86_400;
const SCOPES: &[&str] = &["calendar:calendar:readonly", "calendar:calendar.event:read"];

pub struct LarkCalendarEvents {
    client: Arc<LarkClient>,
    tz: Option<String>,
}

impl LarkCalendarEvents {
    pub fn new(client: Arc<LarkClient>, tz: Option<String>) -> Self {
        Self { client, tz }
    }

    fn zone(&self) -> Tz {
        ethan_tz::effective_zone(None, self.tz.as_deref())
            .unwrap_or_else(|_| ethan_tz::system_zone())
    }
}

/// A time argument: Unix seconds (number or digits), RFC 3339, or a local date / date-time in
/// `tz`.
pub fn parse_time(v: &Value, tz: &Tz) -> Result<i64, String> {
    if let Some(n) = v.as_i64() {
        return Ok(n);
    }
    let s = v.as_str().map(str::trim).unwrap_or_default();
    if s.is_empty() {
        return Err(format!("{v} is not a time"));
    }
    if let Ok(n) = s.parse::<i64>() {
        return Ok(n);
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp());
    }
    let local = |n: NaiveDateTime| {
        ethan_tz::resolve_local(tz, n)
            .map(|t| t.timestamp())
            .ok_or_else(|| format!("{s:?} does not exist in {tz}"))
    };
    for f in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(n) = NaiveDateTime::parse_from_str(s, f) {
            return local(n);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return local(d.and_hms_opt(0, 0, 0).expect("midnight"));
    }
    Err(format!(
        "{s:?} is not a time: use ISO 8601 (2026-11-30T09:00:00+08:00 or 2026-11-30) or Unix seconds"
    ))
}

/// `[start, end)` cut into windows of at most [`MAX_WINDOW_SECS`].
pub fn windows(start: i64, end: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut s = start;
    while s < end {
        let e = (s + MAX_WINDOW_SECS).min(end);
        out.push((s, e));
        s = e;
    }
    out
}

fn when(v: Option<&Value>, tz: &Tz) -> (i64, String) {
    let Some(v) = v else {
        return (0, "?".into());
    };
    if let Some(ts) = v.get("timestamp").and_then(|t| {
        t.as_str()
            .and_then(|s| s.parse::<i64>().ok())
            .or(t.as_i64())
    }) {
        let shown = Utc
            .timestamp_opt(ts, 0)
            .single()
            .map(|t| t.with_timezone(tz).format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_else(|| ts.to_string());
        return (ts, shown);
    }
    if let Some(d) = v.get("date").and_then(Value::as_str) {
        let ts = NaiveDate::parse_from_str(d, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .and_then(|n| ethan_tz::resolve_local(tz, n))
            .map(|t| t.timestamp())
            .unwrap_or(0);
        return (ts, format!("{d} (all day)"));
    }
    (0, "?".into())
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string()
}

/// One event as structured JSON (for metadata) plus its start for sorting.
fn event(item: &Value, tz: &Tz) -> (i64, Value) {
    let (start_ts, start) = when(item.get("start_time"), tz);
    let (_, end) = when(item.get("end_time"), tz);
    let mut organiser = text(item, "/event_organizer/display_name");
    if organiser.is_empty() {
        organiser = text(item, "/organizer/display_name");
    }
    let link = text(item, "/vchat/meeting_url");
    (
        start_ts,
        json!({
            "event_id": text(item, "/event_id"),
            "start": start,
            "end": end,
            "title": text(item, "/summary"),
            "location": text(item, "/location/name"),
            "organiser": organiser,
            "meeting_link": link,
            "status": text(item, "/status"),
        }),
    )
}

fn line(e: &Value) -> String {
    let f = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let title = if f("title").is_empty() {
        "(no title)".to_string()
    } else {
        f("title")
    };
    let mut s = format!("- {} – {}: {}", f("start"), f("end"), title);
    if !f("location").is_empty() {
        s.push_str(&format!(" @ {}", f("location")));
    }
    if !f("organiser").is_empty() {
        s.push_str(&format!(" (organiser: {})", f("organiser")));
    }
    if !f("meeting_link").is_empty() {
        s.push_str(&format!(" [meeting: {}]", f("meeting_link")));
    }
    if f("status") == "cancelled" {
        s.push_str(" [cancelled]");
    }
    s
}

#[async_trait]
impl Tool for LarkCalendarEvents {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "lark_calendar_events",
                "Read the primary Lark calendar: action=agenda for today's events, action=list for a \
                 time range (start_time/end_time as ISO 8601 or Unix seconds). Each event has start, \
                 end, title, location, organiser and meeting link. Read-only.",
                json!({
                    "type": "object",
                    "properties": {
                        "action": {"type": "string", "enum": ["agenda", "list"]},
                        "start_time": {
                            "type": ["string", "integer"],
                            "description": "ISO 8601 or Unix seconds (list; default: today's start)"
                        },
                        "end_time": {
                            "type": ["string", "integer"],
                            "description": "ISO 8601 or Unix seconds (list; default: 7 days after start)"
                        }
                    },
                    "required": ["action"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            .timeout(std::time::Duration::from_secs(60))
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let tz = self.zone();
        let (start, end) = range(&args, &tz)?;
        let as_user = self.client.user.is_configured();
        let cal_id = self.primary_calendar(as_user, ctx).await?;
        let events = self
            .events(&cal_id, (start, end), as_user, &tz, ctx)
            .await?;
        Ok(render(&cal_id, (start, end), as_user, &tz, events))
    }
}

/// The time range a call asks for, in Unix seconds: today for `agenda`, the arguments (or
/// from today's start, 7 days) for `list`; at most 366 days.
fn range(args: &Value, tz: &Tz) -> Result<(i64, i64), ToolError> {
    let invalid = |m: String| Err(ToolError::new(crate::ErrorKind::Validation, m));
    let today = Utc::now().with_timezone(tz).date_naive();
    let day_start = ethan_tz::resolve_local(tz, today.and_hms_opt(0, 0, 0).expect("midnight"))
        .map(|t| t.timestamp())
        .unwrap_or_else(|| Utc::now().timestamp());
    let day_end = today
        .succ_opt()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .and_then(|n| ethan_tz::resolve_local(tz, n))
        .map(|t| t.timestamp())
        .unwrap_or(day_start + 86_400);
    let action = args.get("action").and_then(Value::as_str).unwrap_or("");
    let (start, end) = match action {
        "agenda" => (day_start, day_end),
        "list" => {
            let start = match args.get("start_time").filter(|v| !v.is_null()) {
                Some(v) => match parse_time(v, tz) {
                    Ok(t) => t,
                    Err(e) => return invalid(format!("start_time: {e}")),
                },
                None => day_start,
            };
            let end = match args.get("end_time").filter(|v| !v.is_null()) {
                Some(v) => match parse_time(v, tz) {
                    Ok(t) => t,
                    Err(e) => return invalid(format!("end_time: {e}")),
                },
                None => start + 7 * 86_400,
            };
            (start, end)
        }
        other => return invalid(format!("action must be agenda or list, not {other:?}")),
    };
    if end <= start {
        return invalid("end_time must be after start_time".into());
    }
    if end - start > 366 * 86_400 {
        return invalid("the range may cover at most 366 days".into());
    }
    Ok((start, end))
}

impl LarkCalendarEvents {
    /// The id of the primary calendar (the user's, or the bot's without a user token).
    async fn primary_calendar(
        &self,
        as_user: bool,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        let primary = self
            .client
            .call(
                as_user,
                reqwest::Method::POST,
                "/open-apis/calendar/v4/calendars/primary",
                &[],
                Some(&json!({})),
                ctx,
            )
            .await
            .map_err(|e| api_failure("finding the primary calendar", &e, SCOPES, as_user))?;
        let cal_id = text(&primary, "/data/calendars/0/calendar/calendar_id");
        if cal_id.is_empty() {
            return Err(ToolError::new(
                crate::ErrorKind::Dependency,
                "Lark returned no primary calendar (data.calendars is empty)",
            ));
        }
        Ok(cal_id)
    }

    /// The events of `cal_id` in `(start, end)`, read in windows, each once, by start time.
    async fn events(
        &self,
        cal_id: &str,
        (start, end): (i64, i64),
        as_user: bool,
        tz: &Tz,
        ctx: &ToolContext,
    ) -> Result<Vec<(i64, Value)>, ToolError> {
        let path = format!(
            "/open-apis/calendar/v4/calendars/{}/events/instance_view",
            segment(cal_id)
        );
        let mut events: Vec<(i64, Value)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (s, e) in windows(start, end) {
            let (s, e) = (s.to_string(), e.to_string());
            let v = self
                .client
                .call(
                    as_user,
                    reqwest::Method::GET,
                    &path,
                    &[("start_time", &s), ("end_time", &e)],
                    None,
                    ctx,
                )
                .await
                .map_err(|err| api_failure("reading calendar events", &err, SCOPES, as_user))?;
            for item in v
                .pointer("/data/items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (ts, ev) = event(item, tz);
                let key = format!("{}@{}", ev["event_id"], ev["start"]);
                if seen.insert(key) {
                    events.push((ts, ev));
                }
            }
        }
        ethan_core::sort::sort_by_key(&mut events, |(ts, _)| *ts);
        Ok(events)
    }
}

/// The events as lines for the model (saying whose calendar it is), and as a list in the
/// metadata.
fn render(
    cal_id: &str,
    (start, end): (i64, i64),
    as_user: bool,
    tz: &Tz,
    events: Vec<(i64, Value)>,
) -> ToolOutput {
    let fmt = |t: i64| {
        Utc.timestamp_opt(t, 0)
            .single()
            .map(|t| t.with_timezone(tz).format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default()
    };
    let whose = if as_user {
        "your primary calendar".to_string()
    } else {
        "the BOT's own calendar (no channels.lark.user_access_token is configured, so this \
         is not your calendar; set user_access_token and user_refresh_token to read yours)"
            .to_string()
    };
    let mut out = format!(
        "{} events from {} to {} ({tz}) on {whose}:",
        events.len(),
        fmt(start),
        fmt(end)
    );
    if events.is_empty() {
        out.push_str("\n(none)");
    }
    for (_, e) in &events {
        out.push('\n');
        out.push_str(&line(e));
    }
    let list: Vec<Value> = events.into_iter().map(|(_, e)| e).collect();
    ToolOutput::new(out).with_metadata(json!({
        "calendar_id": cal_id,
        "as_user": as_user,
        "start_time": start,
        "end_time": end,
        "events": list,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_split_at_40_days() {
        assert_eq!(windows(0, 10), vec![(0, 10)]);
        let w = windows(0, 50 * 86_400);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0], (0, MAX_WINDOW_SECS));
        assert_eq!(w[1].1, 50 * 86_400);
    }

    #[test]
    fn times_parse() {
        let tz: Tz = "Asia/Shanghai".parse().unwrap();
        assert_eq!(parse_time(&json!(1700000000), &tz), Ok(1700000000));
        assert_eq!(parse_time(&json!("1700000000"), &tz), Ok(1700000000));
        assert_eq!(
            parse_time(&json!("2026-01-01T00:00:00Z"), &tz),
            Ok(1767225600)
        );
        assert_eq!(
            parse_time(&json!("2026-01-01"), &tz),
            Ok(1767225600 - 8 * 3600)
        );
        assert!(parse_time(&json!("tomorrow"), &tz).is_err());
    }
}
