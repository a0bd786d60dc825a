//! Jobs as the tools and the CLI handle them: checking a request and turning it into a stored
//! [`JobRecord`] (schedule, zone, first slot, end, target chat), and reading one back
//! (its [`Schedule`], its zone, its next slot, a one-line description).

use super::schedule::{parse_datetime, Schedule, ScheduleError};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use ethan_core::store::{JobRecord, JobState, JobStore, StoreError};
use ethan_core::{ChannelKind, ChatKind, ChatRef};
use ethan_tz::{self as tz, UnknownZone};

/// Why a job cannot be created or changed; the text says what to do.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error(transparent)]
    Zone(#[from] UnknownZone),
    #[error("give exactly one of `cron`, `interval_minutes` or `at` (got {0})")]
    ScheduleChoice(String),
    #[error("`prompt` must not be empty: it is what the job asks each time it runs")]
    EmptyPrompt,
    #[error("job id {0:?} must be 1-64 letters, digits, `-`, `_` or `.`, starting with a letter or digit")]
    BadId(String),
    #[error("a job with id {0:?} exists already; choose another id, or remove that job first")]
    Exists(String),
    #[error("there is no job {0:?} (schedule_list / `ethan jobs list` shows the ids)")]
    NotFound(String),
    #[error("deliver_to {value:?}: {reason}")]
    Target { value: String, reason: String },
    #[error("deliver_to is required here (this interface has no chat to post to): name the chat as telegram:<chat_id> or lark:<chat_id>")]
    DeliverToRequired,
    #[error("the job would never run: end_date {0} is before its first slot")]
    EndsBeforeStart(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a job's digest goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub channel: ChannelKind,
    pub chat: ChatRef,
}

impl Target {
    /// `telegram:<chat_id>[:<thread>]` or `lark:<chat_id>[:<thread_id>]`.
    pub fn parse(value: &str) -> Result<Self, JobError> {
        let bad = |reason: &str| JobError::Target {
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let mut parts = value.trim().splitn(3, ':');
        let channel = parts.next().unwrap_or("");
        let id = parts.next().unwrap_or("").trim();
        let thread = parts
            .next()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if id.is_empty() {
            return Err(bad(
                "name the chat as telegram:<chat_id> or lark:<chat_id> (e.g. telegram:123456789, lark:oc_…)",
            ));
        }
        match channel {
            "telegram" => {
                let n: i64 = id
                    .parse()
                    .map_err(|_| bad("a Telegram chat id is a number (negative for groups)"))?;
                if thread.as_deref().is_some_and(|t| t.parse::<i32>().is_err()) {
                    return Err(bad("a Telegram topic (message_thread_id) is a number"));
                }
                Ok(Target {
                    channel: ChannelKind::Telegram,
                    chat: ChatRef {
                        id: id.to_string(),
                        kind: if n > 0 {
                            ChatKind::Direct
                        } else {
                            ChatKind::Group
                        },
                        thread,
                    },
                })
            }
            "lark" => {
                if !id.starts_with("oc_") {
                    return Err(bad(
                        "a Lark chat id starts with oc_ (not a user's ou_ open_id)",
                    ));
                }
                Ok(Target {
                    channel: ChannelKind::Lark,
                    chat: ChatRef {
                        id: id.to_string(),
                        kind: ChatKind::Group,
                        thread,
                    },
                })
            }
            _ => Err(bad("the channel must be telegram or lark")),
        }
    }

    /// The target stored with a job.
    pub fn of(job: &JobRecord) -> Option<Self> {
        let channel = match job.channel.as_str() {
            "telegram" => ChannelKind::Telegram,
            "lark" => ChannelKind::Lark,
            _ => return None,
        };
        Some(Target {
            channel,
            chat: ChatRef {
                id: job.chat_id.clone(),
                kind: if job.chat_kind == "direct" {
                    ChatKind::Direct
                } else {
                    ChatKind::Group
                },
                thread: job.thread.clone(),
            },
        })
    }

    /// `telegram:123`, `lark:oc_x:omt_y`.
    pub fn label(&self) -> String {
        match &self.chat.thread {
            Some(t) => format!("{}:{}:{t}", self.channel, self.chat.id),
            None => format!("{}:{}", self.channel, self.chat.id),
        }
    }
}

/// The label of a stored job's target.
pub fn target_label(job: &JobRecord) -> String {
    match &job.thread {
        Some(t) => format!("{}:{}:{t}", job.channel, job.chat_id),
        None => format!("{}:{}", job.channel, job.chat_id),
    }
}

/// A request to create a job (the `schedule_create` arguments).
#[derive(Debug, Clone, Default)]
pub struct NewJob {
    pub job_id: Option<String>,
    pub prompt: String,
    pub cron: Option<String>,
    pub interval_minutes: Option<u64>,
    pub at: Option<String>,
    pub timezone: Option<String>,
    pub title: Option<String>,
    pub end_date: Option<String>,
    pub deliver_to: Option<String>,
    pub allowed_tools: Vec<String>,
    /// The model its runs ask first; checked against the configured names by the caller.
    pub model: Option<String>,
}

/// Where the request was made: the default target and the creator.
#[derive(Debug, Clone)]
pub struct Origin {
    pub channel: ChannelKind,
    pub chat: Option<ChatRef>,
    pub user_id: String,
    pub session_key: String,
}

/// Whether `id` is an acceptable job id.
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A fresh id such as `job-3f9a1c`.
pub fn generate_id() -> String {
    format!("job-{}", &uuid::Uuid::new_v4().simple().to_string()[..6])
}

/// A title from the prompt's first line (at most 48 characters).
fn default_title(prompt: &str) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    if line.chars().count() <= 48 {
        line.to_string()
    } else {
        format!("{}…", line.chars().take(47).collect::<String>())
    }
}

/// The target of a request: `deliver_to`, else the chat it was made in.
pub fn target_of(new: &NewJob, origin: &Origin) -> Result<Target, JobError> {
    if let Some(d) = new.deliver_to.as_deref().filter(|d| !d.trim().is_empty()) {
        let mut t = Target::parse(d)?;
        // The chat we are in: keep what we know about it (direct or group).
        if let Some(c) = &origin.chat {
            if origin.channel == t.channel && c.id == t.chat.id {
                t.chat.kind = c.kind;
            }
        }
        return Ok(t);
    }
    match (&origin.channel, &origin.chat) {
        (ChannelKind::Telegram | ChannelKind::Lark, Some(chat)) => Ok(Target {
            channel: origin.channel,
            chat: chat.clone(),
        }),
        _ => Err(JobError::DeliverToRequired),
    }
}

/// Check a request and build the job record (not stored yet). `now` is the creation time.
pub fn plan(
    new: &NewJob,
    origin: &Origin,
    config_tz: Option<&str>,
    now: DateTime<Utc>,
) -> Result<JobRecord, JobError> {
    let prompt = new.prompt.trim();
    if prompt.is_empty() {
        return Err(JobError::EmptyPrompt);
    }
    let id = match new
        .job_id
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty())
    {
        Some(i) if valid_id(i) => i.to_string(),
        Some(i) => return Err(JobError::BadId(i.to_string())),
        None => generate_id(),
    };
    let job_tz = new
        .timezone
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let zone = tz::effective_zone(job_tz, config_tz)?;
    let now = DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now);
    let given: Vec<&str> = [
        new.cron
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .map(|_| "cron"),
        new.interval_minutes.map(|_| "interval_minutes"),
        new.at
            .as_deref()
            .filter(|a| !a.trim().is_empty())
            .map(|_| "at"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let schedule = match given.as_slice() {
        ["cron"] => Schedule::Cron(Box::new(super::schedule::CronExpr::parse(
            new.cron.as_deref().unwrap_or(""),
        )?)),
        ["interval_minutes"] => Schedule::interval(new.interval_minutes.unwrap_or(0), now)?,
        ["at"] => {
            let at = parse_datetime("at", new.at.as_deref().unwrap_or(""), &zone, false)?;
            if at <= now {
                return Err(ScheduleError::InPast(tz::display(&zone, at)).into());
            }
            Schedule::At(at)
        }
        [] => return Err(JobError::ScheduleChoice("none".into())),
        more => return Err(JobError::ScheduleChoice(more.join(" and "))),
    };
    let end_at = match new.end_date.as_deref().filter(|e| !e.trim().is_empty()) {
        Some(e) => Some(parse_datetime("end_date", e, &zone, true)?),
        None => None,
    };
    let first = schedule.next_after(now, &zone);
    let next_run = match (first, end_at) {
        (Some(f), Some(end)) if f > end => {
            return Err(JobError::EndsBeforeStart(tz::display(&zone, end)))
        }
        (f, _) => f,
    };
    let Some(next_run) = next_run else {
        return Err(ScheduleError::Never(schedule.stored().1).into());
    };
    let target = target_of(new, origin)?;
    let (kind, spec) = schedule.stored();
    let mut allowed: Vec<String> = new
        .allowed_tools
        .iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    ethan_core::sort::sort(&mut allowed);
    allowed.dedup();
    Ok(JobRecord {
        id,
        title: new
            .title
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| default_title(prompt)),
        prompt: prompt.to_string(),
        kind: kind.to_string(),
        spec,
        timezone: job_tz.map(|_| zone.name().to_string()),
        anchor: now.timestamp(),
        end_at: end_at.map(|e| e.timestamp()),
        allowed_tools: allowed,
        model: new
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string),
        channel: target.channel.as_str().to_string(),
        chat_id: target.chat.id.clone(),
        chat_kind: match target.chat.kind {
            ChatKind::Direct => "direct".into(),
            ChatKind::Group => "group".into(),
        },
        thread: target.chat.thread.clone(),
        creator: format!("{}:{}", origin.channel, origin.user_id),
        created_in: origin.session_key.clone(),
        next_run: Some(next_run.timestamp()),
        paused: false,
        state: JobState::Active,
        created_at: now.timestamp(),
        updated_at: now.timestamp(),
    })
}

/// Check, then store a new job. A generated id that collides is generated again.
pub async fn create(
    store: &dyn JobStore,
    new: &NewJob,
    origin: &Origin,
    config_tz: Option<&str>,
    now: DateTime<Utc>,
) -> Result<JobRecord, JobError> {
    let generated = new.job_id.as_deref().is_none_or(|i| i.trim().is_empty());
    for _ in 0..5 {
        let job = plan(new, origin, config_tz, now)?;
        if store.insert_job(&job).await? {
            return Ok(job);
        }
        if !generated {
            return Err(JobError::Exists(job.id));
        }
    }
    Err(JobError::Exists("(generated)".into()))
}

/// The schedule of a stored job.
pub fn schedule_of(job: &JobRecord) -> Result<Schedule, ScheduleError> {
    Schedule::from_stored(&job.kind, &job.spec, job.anchor)
}

/// The zone a stored job runs in (an unknown stored name falls back to the config/system zone,
/// with a warning).
pub fn zone_of(job: &JobRecord, config_tz: Option<&str>) -> Tz {
    tz::effective_zone(job.timezone.as_deref(), config_tz).unwrap_or_else(|e| {
        tracing::warn!("job {}: {e}; using the default zone", job.id);
        tz::effective_zone(None, config_tz).unwrap_or_else(|_| tz::system_zone())
    })
}

/// The job's first slot strictly after `after`, honouring its end.
pub fn next_slot(
    job: &JobRecord,
    schedule: &Schedule,
    zone: &Tz,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let next = schedule.next_after(after, zone)?;
    match job.end_at {
        Some(end) if next.timestamp() > end => None,
        _ => Some(next),
    }
}

/// `cron `0 9 * * 1-5` (Asia/Shanghai)` for listings.
pub fn describe_schedule(job: &JobRecord, config_tz: Option<&str>) -> String {
    let zone = zone_of(job, config_tz);
    match schedule_of(job) {
        Ok(s) => s.describe(&zone),
        Err(e) => format!("unreadable schedule ({e})"),
    }
}

/// Pause or resume; resuming starts from the next slot after `now`.
pub async fn set_paused(
    store: &dyn JobStore,
    id: &str,
    paused: bool,
    config_tz: Option<&str>,
    now: DateTime<Utc>,
) -> Result<JobRecord, JobError> {
    let job = store
        .get_job(id)
        .await?
        .ok_or_else(|| JobError::NotFound(id.to_string()))?;
    let next = if paused {
        None
    } else {
        let zone = zone_of(&job, config_tz);
        next_slot(&job, &schedule_of(&job)?, &zone, now).map(|t| t.timestamp())
    };
    store.set_job_paused(id, paused, next).await?;
    store
        .get_job(id)
        .await?
        .ok_or_else(|| JobError::NotFound(id.to_string()))
}

/// Remove a job (and its history); returns what was removed.
pub async fn remove(store: &dyn JobStore, id: &str) -> Result<JobRecord, JobError> {
    let job = store
        .get_job(id)
        .await?
        .ok_or_else(|| JobError::NotFound(id.to_string()))?;
    store.remove_job(id).await?;
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_chat_job_targets_its_chat_and_a_terminal_job_needs_deliver_to() {
        let new = NewJob {
            prompt: "news".into(),
            cron: Some("0 9 * * *".into()),
            timezone: Some("Asia/Shanghai".into()),
            ..Default::default()
        };
        let now = utc("2025-01-01T00:00:00Z");
        let job = plan(&new, &origin_tg(), None, now).unwrap();
        assert_eq!(
            (job.channel.as_str(), job.chat_id.as_str()),
            ("telegram", "42")
        );
        assert_eq!(job.chat_kind, "direct");
        assert_eq!(job.next_run, Some(utc("2025-01-01T01:00:00Z").timestamp()));
        assert!(job.id.starts_with("job-"));
        assert_eq!(job.title, "news");
        let terminal = Origin {
            channel: ChannelKind::Terminal,
            chat: None,
            user_id: "me".into(),
            session_key: "terminal:x".into(),
        };
        assert!(matches!(
            plan(&new, &terminal, None, now),
            Err(JobError::DeliverToRequired)
        ));
        let with = NewJob {
            deliver_to: Some("lark:oc_abc".into()),
            ..new.clone()
        };
        let job = plan(&with, &terminal, None, now).unwrap();
        assert_eq!(
            (job.channel.as_str(), job.chat_id.as_str()),
            ("lark", "oc_abc")
        );
        assert_eq!(job.creator, "terminal:me");
    }

    #[test]
    fn requests_are_checked() {
        let now = utc("2025-01-01T00:00:00Z");
        let o = origin_tg();
        let base = NewJob {
            prompt: "p".into(),
            ..Default::default()
        };
        let e = plan(&base, &o, None, now).unwrap_err().to_string();
        assert!(e.contains("exactly one") && e.contains("none"), "{e}");
        let two = NewJob {
            cron: Some("0 9 * * *".into()),
            interval_minutes: Some(5),
            ..base.clone()
        };
        let e = plan(&two, &o, None, now).unwrap_err().to_string();
        assert!(e.contains("cron and interval_minutes"), "{e}");
        let past = NewJob {
            at: Some("2024-12-31T09:00".into()),
            timezone: Some("UTC".into()),
            ..base.clone()
        };
        assert!(plan(&past, &o, None, now)
            .unwrap_err()
            .to_string()
            .contains("past"));
        let bad_tz = NewJob {
            cron: Some("0 9 * * *".into()),
            timezone: Some("Moon/Base".into()),
            ..base.clone()
        };
        assert!(plan(&bad_tz, &o, None, now)
            .unwrap_err()
            .to_string()
            .contains("Moon/Base"));
        let ended = NewJob {
            interval_minutes: Some(60 * 24),
            end_date: Some("2025-01-01T12:00Z".into()),
            ..base.clone()
        };
        assert!(plan(&ended, &o, None, now)
            .unwrap_err()
            .to_string()
            .contains("never run"));
        let bad_id = NewJob {
            job_id: Some("no spaces".into()),
            interval_minutes: Some(5),
            ..base.clone()
        };
        assert!(matches!(
            plan(&bad_id, &o, None, now),
            Err(JobError::BadId(_))
        ));
        for (d, why) in [
            ("slack:1", "telegram or lark"),
            ("telegram:abc", "number"),
            ("lark:ou_123", "oc_"),
            ("telegram:", "name the chat"),
        ] {
            let e = Target::parse(d).unwrap_err().to_string();
            assert!(e.contains(why), "{d}: {e}");
        }
        let t = Target::parse("telegram:-100123:7").unwrap();
        assert_eq!(t.chat.kind, ChatKind::Group);
        assert_eq!(t.label(), "telegram:-100123:7");
    }
}
