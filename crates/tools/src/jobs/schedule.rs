//! When a job fires: a 5-field cron expression, a fixed interval, or one instant (`at`).
//!
//! **Cron** is the standard POSIX form `minute hour day-of-month month day-of-week`:
//! `*`, lists (`1,15`), ranges (`1-5`), steps (`*/15`, `0-30/10`, `5/10` = from 5 to the end);
//! month names `jan`…`dec` and day names `sun`…`sat` (any case, full names too); 0 and 7 are
//! both Sunday; the macros `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily`
//! (`@midnight`) and `@hourly`. When both day fields are restricted (neither starts with `*`),
//! a day matches if *either* does, as in POSIX/Vixie cron: `0 9 1 * mon` runs on the 1st and on
//! every Monday. Each field is parsed and checked here (errors name the field and say what is
//! wrong), then handed to the `cron` crate as explicit lists — two schedules whose next times
//! are merged in the either-day case, because the crate itself requires both days to match.
//!
//! The crate walks wall-clock time; [`ethan_tz::resolve_local`] turns each wall time into an
//! instant (spring-forward gaps run at the end of the gap, fall-back overlaps once, at the first
//! occurrence). Slots that land on the same instant (several gap times) are one slot.
//!
//! **Interval** slots are `anchor + k·interval` (k ≥ 1), independent of zones. **At** is one
//! instant; naive date-times are read in the job's zone.

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use ethan_tz::{resolve_local, to_local};
use std::collections::BTreeSet;
use std::str::FromStr;

/// Why a schedule is not acceptable; the text says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("a cron expression has 5 fields (minute hour day-of-month month day-of-week), but {expr:?} has {found}")]
    FieldCount { expr: String, found: usize },
    #[error("cron {field} field {value:?}: {reason}")]
    Field {
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("unknown cron macro {0:?} (use @yearly, @monthly, @weekly, @daily or @hourly)")]
    Macro(String),
    #[error("cron expression {0:?} never matches a real date (e.g. 30 February)")]
    Never(String),
    #[error("interval_minutes must be between 1 and {max} (one year), got {got}")]
    Interval { got: u64, max: u64 },
    #[error("{field} {value:?} is not an ISO date-time: {reason}")]
    DateTime {
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("at {0} is in the past")]
    InPast(String),
    #[error("unsupported schedule kind {0:?}")]
    Kind(String),
}

/// The longest interval accepted, in minutes.
pub const MAX_INTERVAL_MINUTES: u64 = 366 * 24 * 60;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    Cron(Box<CronExpr>),
    Interval {
        every: Duration,
        anchor: DateTime<Utc>,
    },
    At(DateTime<Utc>),
}

impl Schedule {
    /// The stored form: (kind, spec). `at` is stored as an RFC 3339 UTC instant.
    pub fn stored(&self) -> (&'static str, String) {
        match self {
            Schedule::Cron(c) => ("cron", c.source.clone()),
            Schedule::Interval { every, .. } => ("interval", every.num_minutes().to_string()),
            Schedule::At(t) => ("at", t.to_rfc3339()),
        }
    }

    /// Rebuild from the stored form.
    pub fn from_stored(kind: &str, spec: &str, anchor: i64) -> Result<Self, ScheduleError> {
        match kind {
            "cron" => Ok(Schedule::Cron(Box::new(CronExpr::parse(spec)?))),
            "interval" => {
                let minutes = spec.trim().parse::<u64>().unwrap_or(0);
                Schedule::interval(
                    minutes,
                    DateTime::from_timestamp(anchor, 0).unwrap_or_default(),
                )
            }
            "at" => DateTime::parse_from_rfc3339(spec)
                .map(|t| Schedule::At(t.with_timezone(&Utc)))
                .map_err(|e| ScheduleError::DateTime {
                    field: "at",
                    value: spec.to_string(),
                    reason: e.to_string(),
                }),
            other => Err(ScheduleError::Kind(other.to_string())),
        }
    }

    /// An interval schedule of `minutes`, counted from `anchor`.
    pub fn interval(minutes: u64, anchor: DateTime<Utc>) -> Result<Self, ScheduleError> {
        if !(1..=MAX_INTERVAL_MINUTES).contains(&minutes) {
            return Err(ScheduleError::Interval {
                got: minutes,
                max: MAX_INTERVAL_MINUTES,
            });
        }
        Ok(Schedule::Interval {
            every: Duration::minutes(minutes as i64),
            anchor,
        })
    }

    /// The first slot strictly after `after`, in `tz` (used by cron only).
    pub fn next_after(&self, after: DateTime<Utc>, tz: &Tz) -> Option<DateTime<Utc>> {
        match self {
            Schedule::At(t) => (*t > after).then_some(*t),
            Schedule::Interval { every, anchor } => {
                let step = every.num_seconds().max(1);
                let since = (after - *anchor).num_seconds();
                let k = if since < 0 { 1 } else { since / step + 1 };
                anchor.checked_add_signed(Duration::seconds(k.checked_mul(step)?))
            }
            Schedule::Cron(c) => c.next_after(after, tz),
        }
    }

    /// For people: `cron 0 9 * * mon-fri`, `every 30 minutes`, `once at 2025-05-01 09:00 CEST`.
    pub fn describe(&self, tz: &Tz) -> String {
        match self {
            Schedule::Cron(c) => format!("cron `{}`", c.source),
            Schedule::Interval { every, .. } => match every.num_minutes() {
                1 => "every minute".to_string(),
                m if m % 1440 == 0 => format!("every {} day(s)", m / 1440),
                m if m % 60 == 0 => format!("every {} hour(s)", m / 60),
                m => format!("every {m} minutes"),
            },
            Schedule::At(t) => format!("once at {}", ethan_tz::display(tz, *t)),
        }
    }
}

/// A checked 5-field cron expression.
#[derive(Debug, Clone)]
pub struct CronExpr {
    /// As written (trimmed, macros kept).
    pub source: String,
    /// Both day fields together (or the day-of-month half of the either-day case).
    primary: cron::Schedule,
    /// The day-of-week half of the either-day case.
    secondary: Option<cron::Schedule>,
}

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
        ("january", 1),
        ("february", 2),
        ("march", 3),
        ("april", 4),
        ("june", 6),
        ("july", 7),
        ("august", 8),
        ("september", 9),
        ("october", 10),
        ("november", 11),
        ("december", 12),
    ],
};
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
        ("sunday", 0),
        ("monday", 1),
        ("tuesday", 2),
        ("wednesday", 3),
        ("thursday", 4),
        ("friday", 5),
        ("saturday", 6),
    ],
};

impl FieldSpec {
    fn err(&self, value: &str, reason: impl Into<String>) -> ScheduleError {
        ScheduleError::Field {
            field: self.name,
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    fn value(&self, field: &str, s: &str) -> Result<u32, ScheduleError> {
        let lower = s.to_ascii_lowercase();
        if let Some((_, v)) = self.names.iter().find(|(n, _)| *n == lower) {
            return Ok(*v);
        }
        let v: u32 = s.parse().map_err(|_| {
            let hint = if self.names.is_empty() {
                String::new()
            } else {
                format!(
                    " or a name ({})",
                    self.names
                        .iter()
                        .take(if self.name == "month" { 12 } else { 7 })
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            self.err(
                field,
                format!(
                    "{s:?} is not a number from {} to {}{hint}",
                    self.min, self.max
                ),
            )
        })?;
        if v < self.min || v > self.max {
            return Err(self.err(
                field,
                format!("{v} is out of range {}-{}", self.min, self.max),
            ));
        }
        Ok(v)
    }

    /// The set of values the field allows.
    fn parse(&self, field: &str) -> Result<BTreeSet<u32>, ScheduleError> {
        let mut out = BTreeSet::new();
        for part in field.split(',') {
            if part.is_empty() {
                return Err(self.err(field, "empty list element"));
            }
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => {
                    let step: u32 = s.parse().map_err(|_| {
                        self.err(field, format!("step {s:?} is not a positive number"))
                    })?;
                    if step == 0 {
                        return Err(self.err(field, "a step of 0 never advances"));
                    }
                    (r, Some(step))
                }
                None => (part, None),
            };
            let (lo, hi) = if range == "*" {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(field, a)?, self.value(field, b)?);
                if a > b {
                    return Err(self.err(
                        field,
                        format!("range {a}-{b} goes backwards (write it as two ranges)"),
                    ));
                }
                (a, b)
            } else {
                let a = self.value(field, range)?;
                // `5/10` means from 5 to the end in steps of 10.
                (a, if step.is_some() { self.max } else { a })
            };
            let step = step.unwrap_or(1);
            out.extend((lo..=hi).step_by(step as usize));
        }
        Ok(out)
    }
}

/// A value set in the `cron` crate's syntax (`*` when complete).
fn crate_list(set: &BTreeSet<u32>, complete: usize) -> String {
    if set.len() == complete {
        "*".to_string()
    } else {
        set.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
    }
}

impl CronExpr {
    /// Parse and check a 5-field expression or a macro.
    pub fn parse(expr: &str) -> Result<Self, ScheduleError> {
        let source = expr.split_whitespace().collect::<Vec<_>>().join(" ");
        let expanded = match source.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_string(),
            "@monthly" => "0 0 1 * *".to_string(),
            "@weekly" => "0 0 * * 0".to_string(),
            "@daily" | "@midnight" => "0 0 * * *".to_string(),
            "@hourly" => "0 * * * *".to_string(),
            m if m.starts_with('@') => return Err(ScheduleError::Macro(source.clone())),
            _ => source.clone(),
        };
        let fields: Vec<&str> = expanded.split(' ').filter(|f| !f.is_empty()).collect();
        if fields.len() != 5 {
            return Err(ScheduleError::FieldCount {
                expr: source,
                found: fields.len(),
            });
        }
        let minutes = MINUTE.parse(fields[0])?;
        let hours = HOUR.parse(fields[1])?;
        let dom = DAY_OF_MONTH.parse(fields[2])?;
        let months = MONTH.parse(fields[3])?;
        // 7 is Sunday too; the crate counts 1 = Sunday … 7 = Saturday.
        let dow: BTreeSet<u32> = DAY_OF_WEEK
            .parse(fields[4])?
            .into_iter()
            .map(|d| if d == 7 { 0 } else { d })
            .collect();
        let dow_crate: BTreeSet<u32> = dow.iter().map(|d| d + 1).collect();
        let (m, h, mo) = (
            crate_list(&minutes, 60),
            crate_list(&hours, 24),
            crate_list(&months, 12),
        );
        let (dom_s, dow_s) = (crate_list(&dom, 31), crate_list(&dow_crate, 7));
        let build = |dom: &str, dow: &str| {
            let text = format!("0 {m} {h} {dom} {mo} {dow}");
            cron::Schedule::from_str(&text).map_err(|e| ScheduleError::Field {
                field: "expression",
                value: source.clone(),
                reason: e.to_string(),
            })
        };
        let either_day = !fields[2].starts_with('*') && !fields[4].starts_with('*');
        let (primary, secondary) = if either_day {
            (build(&dom_s, "*")?, Some(build("*", &dow_s)?))
        } else {
            (build(&dom_s, &dow_s)?, None)
        };
        let c = CronExpr {
            source,
            primary,
            secondary,
        };
        let probe = NaiveDate::from_ymd_opt(2000, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .unwrap_or_default();
        if c.next_wall(probe).is_none() {
            return Err(ScheduleError::Never(c.source));
        }
        Ok(c)
    }

    /// The next matching wall-clock time strictly after `after`.
    fn next_wall(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        let from = Utc.from_utc_datetime(&after);
        let a = self.primary.after(&from).next();
        let b = self.secondary.as_ref().and_then(|s| s.after(&from).next());
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|t| t.naive_utc())
    }

    /// The first slot strictly after the instant `after`, in `tz`.
    pub fn next_after(&self, after: DateTime<Utc>, tz: &Tz) -> Option<DateTime<Utc>> {
        // Wall times at or before the wall time of `after` map to instants at or before it
        // (the mapping is monotonic), so the search starts there.
        let mut cursor = to_local(tz, after);
        // Bounded: at most an hour or two of per-minute slots inside an overlap are passed over.
        for _ in 0..10_000 {
            let wall = self.next_wall(cursor)?;
            if let Some(t) = resolve_local(tz, wall) {
                if t > after {
                    return Some(t);
                }
            }
            cursor = wall;
        }
        None
    }
}

/// Parse an ISO date-time for `field` (`at`, `end_date`): RFC 3339 with an offset or `Z`, or a
/// local `YYYY-MM-DD[T ]HH:MM[:SS]` read in `tz`. With `date_only_end`, a bare `YYYY-MM-DD`
/// means the end of that day (the last second before the next midnight).
pub fn parse_datetime(
    field: &'static str,
    value: &str,
    tz: &Tz,
    date_only_end: bool,
) -> Result<DateTime<Utc>, ScheduleError> {
    let err = |reason: &str| ScheduleError::DateTime {
        field,
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let v = value.trim();
    if let Ok(d) = NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        if !date_only_end {
            return Err(err("give a time of day too, e.g. 2025-05-01T09:00"));
        }
        let next = d
            .succ_opt()
            .and_then(|n| n.and_hms_opt(0, 0, 0))
            .ok_or_else(|| err("the date is out of range"))?;
        return resolve_local(tz, next)
            .map(|t| t - Duration::seconds(1))
            .ok_or_else(|| err("the date is out of range"));
    }
    // A space may separate date and time; seconds are optional.
    let mut s = v.replacen(' ', "T", 1);
    if let Some(tpos) = s.find('T') {
        let time = &s[tpos + 1..];
        let clock_len = time
            .find(|c: char| !(c.is_ascii_digit() || c == ':'))
            .unwrap_or(time.len());
        if time[..clock_len].matches(':').count() == 1 {
            s.insert_str(tpos + 1 + clock_len, ":00");
        }
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(&s) {
        return Ok(t.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(n) = NaiveDateTime::parse_from_str(&s, fmt) {
            return resolve_local(tz, n).ok_or_else(|| err("the time is out of range"));
        }
    }
    Err(err(
        "use e.g. 2025-05-01T09:00 (in the job's time zone) or 2025-05-01T09:00:00+08:00",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_tz::parse_zone;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// The next `n` slots after `from`.
    fn slots(s: &Schedule, tz: &Tz, from: &str, n: usize) -> Vec<String> {
        let mut t = utc(from);
        let mut out = Vec::new();
        for _ in 0..n {
            match s.next_after(t, tz) {
                Some(next) => {
                    out.push(
                        next.with_timezone(tz)
                            .format("%a %Y-%m-%d %H:%M %Z")
                            .to_string(),
                    );
                    t = next;
                }
                None => break,
            }
        }
        out
    }

    fn cron(e: &str) -> Schedule {
        Schedule::Cron(Box::new(CronExpr::parse(e).unwrap()))
    }

    fn err(e: &str) -> String {
        CronExpr::parse(e).unwrap_err().to_string()
    }

    #[test]
    fn weekday_names_numbers_and_sunday_as_0_or_7() {
        let utc_tz = Tz::UTC;
        // 2025-01-01 is a Wednesday.
        let a = slots(&cron("0 9 * * mon-fri"), &utc_tz, "2025-01-01T10:00:00Z", 3);
        assert_eq!(
            a,
            [
                "Thu 2025-01-02 09:00 UTC",
                "Fri 2025-01-03 09:00 UTC",
                "Mon 2025-01-06 09:00 UTC"
            ]
        );
        let sun0 = slots(&cron("30 8 * * 0"), &utc_tz, "2025-01-01T00:00:00Z", 2);
        let sun7 = slots(&cron("30 8 * * 7"), &utc_tz, "2025-01-01T00:00:00Z", 2);
        let sun = slots(&cron("30 8 * * SUN"), &utc_tz, "2025-01-01T00:00:00Z", 2);
        assert_eq!(
            sun0,
            ["Sun 2025-01-05 08:30 UTC", "Sun 2025-01-12 08:30 UTC"]
        );
        assert_eq!(sun0, sun7);
        assert_eq!(sun0, sun);
        let weekend = slots(&cron("0 0 * * 6-7"), &utc_tz, "2025-01-01T00:00:00Z", 2);
        assert_eq!(
            weekend,
            ["Sat 2025-01-04 00:00 UTC", "Sun 2025-01-05 00:00 UTC"]
        );
        let months = slots(
            &cron("0 12 1 jan,Jul *"),
            &utc_tz,
            "2025-01-02T00:00:00Z",
            2,
        );
        assert_eq!(
            months,
            ["Tue 2025-07-01 12:00 UTC", "Thu 2026-01-01 12:00 UTC"]
        );
    }

    #[test]
    fn both_day_fields_restricted_means_either() {
        let tz = Tz::UTC;
        // The 15th, or any Friday (2025-01-03 is a Friday).
        let s = slots(&cron("0 9 15 * 5"), &tz, "2025-01-01T00:00:00Z", 4);
        assert_eq!(
            s,
            [
                "Fri 2025-01-03 09:00 UTC",
                "Fri 2025-01-10 09:00 UTC",
                "Wed 2025-01-15 09:00 UTC",
                "Fri 2025-01-17 09:00 UTC"
            ]
        );
        // A `*` in one day field: only the other counts.
        let s = slots(&cron("0 9 * * 5"), &tz, "2025-01-01T00:00:00Z", 1);
        assert_eq!(s, ["Fri 2025-01-03 09:00 UTC"]);
        let s = slots(&cron("0 9 15 * *"), &tz, "2025-01-01T00:00:00Z", 1);
        assert_eq!(s, ["Wed 2025-01-15 09:00 UTC"]);
    }

    #[test]
    fn steps_ranges_and_macros() {
        let tz = Tz::UTC;
        let s = slots(&cron("*/20 * * * *"), &tz, "2025-01-01T00:00:00Z", 3);
        assert_eq!(
            s,
            [
                "Wed 2025-01-01 00:20 UTC",
                "Wed 2025-01-01 00:40 UTC",
                "Wed 2025-01-01 01:00 UTC"
            ]
        );
        let s = slots(&cron("5/30 8-9 * * *"), &tz, "2025-01-01T00:00:00Z", 3);
        assert_eq!(
            s,
            [
                "Wed 2025-01-01 08:05 UTC",
                "Wed 2025-01-01 08:35 UTC",
                "Wed 2025-01-01 09:05 UTC"
            ]
        );
        let s = slots(&cron("@daily"), &tz, "2025-01-01T00:00:00Z", 1);
        assert_eq!(s, ["Thu 2025-01-02 00:00 UTC"]);
        let s = slots(&cron("@weekly"), &tz, "2025-01-01T00:00:00Z", 1);
        assert_eq!(s, ["Sun 2025-01-05 00:00 UTC"]);
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        assert!(err("0 9 * *").contains("5 fields"), "{}", err("0 9 * *"));
        assert!(err("0 9 * * * *").contains("has 6"));
        let e = err("61 9 * * *");
        assert!(
            e.contains("minute") && e.contains("61 is out of range 0-59"),
            "{e}"
        );
        let e = err("0 24 * * *");
        assert!(e.contains("hour") && e.contains("out of range 0-23"), "{e}");
        let e = err("0 9 0 * *");
        assert!(e.contains("day-of-month"), "{e}");
        let e = err("0 9 * 13 *");
        assert!(e.contains("month") && e.contains("13"), "{e}");
        let e = err("0 9 * * funday");
        assert!(e.contains("day-of-week") && e.contains("mon"), "{e}");
        let e = err("0 9 * * 8");
        assert!(e.contains("out of range 0-7"), "{e}");
        let e = err("*/0 * * * *");
        assert!(e.contains("step of 0"), "{e}");
        let e = err("0 9 * * 5-1");
        assert!(e.contains("backwards"), "{e}");
        let e = err("0 9 1,,2 * *");
        assert!(e.contains("empty"), "{e}");
        let e = err("0 9 30 2 *");
        assert!(e.contains("never matches"), "{e}");
        let e = err("@reboot");
        assert!(e.contains("@reboot"), "{e}");
    }

    #[test]
    fn cron_across_spring_forward_in_berlin() {
        let tz = parse_zone("Europe/Berlin").unwrap();
        // 2025-03-30: 02:00 CET → 03:00 CEST. 02:30 does not exist that day.
        let s = slots(&cron("30 2 * * *"), &tz, "2025-03-28T12:00:00Z", 4);
        assert_eq!(
            s,
            [
                "Sat 2025-03-29 02:30 CET",
                "Sun 2025-03-30 03:00 CEST",
                "Mon 2025-03-31 02:30 CEST",
                "Tue 2025-04-01 02:30 CEST"
            ]
        );
        // Every 15 minutes: the gap slots collapse into one at 03:00, then 03:15 follows.
        let s = slots(&cron("*/15 * * * *"), &tz, "2025-03-30T00:40:00Z", 3);
        assert_eq!(
            s,
            [
                "Sun 2025-03-30 01:45 CET",
                "Sun 2025-03-30 03:00 CEST",
                "Sun 2025-03-30 03:15 CEST"
            ]
        );
    }

    #[test]
    fn cron_across_fall_back_runs_once_at_the_first_occurrence() {
        let tz = parse_zone("Europe/Berlin").unwrap();
        // 2025-10-26: 03:00 CEST → 02:00 CET; 02:30 happens twice.
        let s = slots(&cron("30 2 * * *"), &tz, "2025-10-25T12:00:00Z", 3);
        assert_eq!(
            s,
            [
                "Sun 2025-10-26 02:30 CEST",
                "Mon 2025-10-27 02:30 CET",
                "Tue 2025-10-28 02:30 CET"
            ]
        );
        // Hourly: the repeated hour does not run again.
        let s = slots(&cron("0 * * * *"), &tz, "2025-10-25T22:30:00Z", 4);
        assert_eq!(
            s,
            [
                "Sun 2025-10-26 01:00 CEST",
                "Sun 2025-10-26 02:00 CEST",
                "Sun 2025-10-26 03:00 CET",
                "Sun 2025-10-26 04:00 CET"
            ]
        );
        // Starting inside the second occurrence of the hour.
        let inside = utc("2025-10-26T01:10:00Z"); // 02:10 CET, the repeat
        let next = cron("*/20 * * * *").next_after(inside, &tz).unwrap();
        assert_eq!(next, utc("2025-10-26T02:00:00Z")); // 03:00 CET
    }

    #[test]
    fn interval_and_at() {
        let anchor = utc("2025-01-01T00:00:00Z");
        let s = Schedule::interval(90, anchor).unwrap();
        assert_eq!(
            s.next_after(anchor, &Tz::UTC),
            Some(utc("2025-01-01T01:30:00Z"))
        );
        assert_eq!(
            s.next_after(utc("2024-06-01T00:00:00Z"), &Tz::UTC),
            Some(utc("2025-01-01T01:30:00Z"))
        );
        assert_eq!(
            s.next_after(utc("2025-01-01T01:30:00Z"), &Tz::UTC),
            Some(utc("2025-01-01T03:00:00Z"))
        );
        assert!(Schedule::interval(0, anchor).is_err());
        let at = Schedule::At(utc("2025-01-01T09:00:00Z"));
        assert_eq!(
            at.next_after(anchor, &Tz::UTC),
            Some(utc("2025-01-01T09:00:00Z"))
        );
        assert_eq!(at.next_after(utc("2025-01-01T09:00:00Z"), &Tz::UTC), None);
        for s in [cron("0 9 * * 1"), s, at] {
            let (kind, spec) = s.stored();
            let back = Schedule::from_stored(kind, &spec, anchor.timestamp()).unwrap();
            assert_eq!(back.stored(), (kind, spec));
        }
    }

    #[test]
    fn iso_date_times() {
        let sh = parse_zone("Asia/Shanghai").unwrap();
        let p = |v: &str| parse_datetime("at", v, &sh, false);
        assert_eq!(p("2025-05-01T09:00").unwrap(), utc("2025-05-01T01:00:00Z"));
        assert_eq!(
            p("2025-05-01 09:00:30").unwrap(),
            utc("2025-05-01T01:00:30Z")
        );
        assert_eq!(p("2025-05-01T09:00Z").unwrap(), utc("2025-05-01T09:00:00Z"));
        assert_eq!(
            p("2025-05-01T09:00:00-04:00").unwrap(),
            utc("2025-05-01T13:00:00Z")
        );
        assert!(p("2025-05-01")
            .unwrap_err()
            .to_string()
            .contains("time of day"));
        assert!(p("tomorrow").unwrap_err().to_string().contains("ISO"));
        assert!(p("2025-13-01T09:00").is_err());
        let end = parse_datetime("end_date", "2025-05-01", &sh, true).unwrap();
        assert_eq!(end, utc("2025-05-01T15:59:59Z"));
    }
}
