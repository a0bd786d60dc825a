//! Time zones of schedules (IANA names through chrono-tz).
//!
//! A job's zone is its own `timezone`, else the config's `timezone`, else the system zone (`TZ`,
//! then the zone the system is set to, else UTC). Wall-clock times become instants by these
//! rules around daylight-saving changes:
//! - a time inside a spring-forward gap (02:30 on a day that jumps from 02:00 to 03:00) means
//!   the first instant after the gap (03:00 in the new offset);
//! - a time inside a fall-back overlap (01:30 on a day that repeats 01:00–02:00) means its first
//!   occurrence, so a slot there runs once.
//!
//! The mapping is monotonic (later wall times never give earlier instants), which the scheduler
//! relies on when it looks for the next slot.

use chrono::{DateTime, Duration, LocalResult, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use std::sync::OnceLock;

/// An unknown zone name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone {0:?}: use an IANA name such as Europe/Berlin, America/New_York or Asia/Shanghai")]
pub struct UnknownZone(pub String);

/// Parse an IANA zone name (`Asia/Shanghai`, `UTC`).
pub fn parse_zone(name: &str) -> Result<Tz, UnknownZone> {
    let n = name.trim();
    n.parse::<Tz>().map_err(|_| UnknownZone(n.to_string()))
}

/// The system's zone: `TZ` (an IANA name, `:Name`, or a path under `zoneinfo/`), else the zone
/// the system is set to, else UTC (logged once).
pub fn system_zone() -> Tz {
    static ZONE: OnceLock<Tz> = OnceLock::new();
    *ZONE.get_or_init(|| {
        if let Ok(tz) = std::env::var("TZ") {
            let name = tz.trim_start_matches(':');
            let name = name.rsplit_once("zoneinfo/").map_or(name, |(_, n)| n);
            if let Ok(z) = parse_zone(name) {
                return z;
            }
        }
        match iana_time_zone::get_timezone() {
            Ok(name) => parse_zone(&name).unwrap_or_else(|e| {
                tracing::warn!("system time zone: {e}; using UTC");
                Tz::UTC
            }),
            Err(e) => {
                tracing::warn!("cannot tell the system time zone ({e}); using UTC");
                Tz::UTC
            }
        }
    })
}

/// The zone of a job: its own, else the config's, else the system's.
pub fn effective_zone(job: Option<&str>, config: Option<&str>) -> Result<Tz, UnknownZone> {
    match (job, config) {
        (Some(j), _) if !j.trim().is_empty() => parse_zone(j),
        (_, Some(c)) if !c.trim().is_empty() => parse_zone(c),
        _ => Ok(system_zone()),
    }
}

/// The instant of a wall-clock time in `tz`, by the gap and overlap rules of this module.
/// `None` only for times chrono cannot represent.
pub fn resolve_local(tz: &Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(a, b) => Some(a.min(b).with_timezone(&Utc)),
        LocalResult::None => after_gap(tz, wall),
    }
}

/// The first instant after the gap that `wall` falls into: the earliest valid wall time after
/// it (gaps end on a minute boundary in practice; seconds are checked for the odd historic one).
fn after_gap(tz: &Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    let base = wall.with_second(0)?.with_nanosecond(0)?;
    // The longest gap on record skipped a whole day (Samoa, 2011).
    for m in 1..=(49 * 60) {
        let w = base + Duration::minutes(m);
        if let Some(t) = tz.from_local_datetime(&w).earliest() {
            for s in (1..60).rev() {
                let earlier = w - Duration::seconds(s);
                if earlier > wall {
                    if let Some(e) = tz.from_local_datetime(&earlier).earliest() {
                        return Some(e.with_timezone(&Utc));
                    }
                }
            }
            return Some(t.with_timezone(&Utc));
        }
    }
    None
}

/// `t` as wall-clock time in `tz`.
pub fn to_local(tz: &Tz, t: DateTime<Utc>) -> NaiveDateTime {
    t.with_timezone(tz).naive_local()
}

/// `t` for people: `2025-03-30 09:00 CEST`.
pub fn display(tz: &Tz, t: DateTime<Utc>) -> String {
    t.with_timezone(tz).format("%Y-%m-%d %H:%M %Z").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn wall(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap()
    }

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn gap_times_run_at_the_end_of_the_gap() {
        let ny = parse_zone("America/New_York").unwrap();
        // 2025-03-09: 02:00 EST → 03:00 EDT (07:00Z).
        assert_eq!(
            resolve_local(&ny, wall(2025, 3, 9, 2, 30)),
            Some(utc("2025-03-09T07:00:00Z"))
        );
        assert_eq!(
            resolve_local(&ny, wall(2025, 3, 9, 2, 0)),
            Some(utc("2025-03-09T07:00:00Z"))
        );
        assert_eq!(
            resolve_local(&ny, wall(2025, 3, 9, 3, 0)),
            Some(utc("2025-03-09T07:00:00Z"))
        );
        assert_eq!(
            resolve_local(&ny, wall(2025, 3, 9, 1, 59)),
            Some(utc("2025-03-09T06:59:00Z"))
        );
    }

    #[test]
    fn overlap_times_take_the_first_occurrence() {
        let ny = parse_zone("America/New_York").unwrap();
        // 2025-11-02: 02:00 EDT → 01:00 EST; 01:30 happens at 05:30Z and 06:30Z.
        assert_eq!(
            resolve_local(&ny, wall(2025, 11, 2, 1, 30)),
            Some(utc("2025-11-02T05:30:00Z"))
        );
    }

    #[test]
    fn samoa_skipped_a_day() {
        let ws = parse_zone("Pacific/Apia").unwrap();
        // 2011-12-30 did not exist in Samoa: 29 Dec 23:59:59 (-10) → 31 Dec 00:00 (+14).
        let t = resolve_local(&ws, wall(2011, 12, 30, 9, 0)).unwrap();
        assert_eq!(to_local(&ws, t), wall(2011, 12, 31, 0, 0));
    }

    #[test]
    fn zones_resolve_in_order() {
        assert_eq!(
            effective_zone(Some("Asia/Shanghai"), Some("UTC")).unwrap(),
            Tz::Asia__Shanghai
        );
        assert_eq!(
            effective_zone(None, Some("Europe/Berlin")).unwrap(),
            Tz::Europe__Berlin
        );
        assert_eq!(effective_zone(None, None).unwrap(), system_zone());
        let e = effective_zone(Some("Mars/Olympus"), None).unwrap_err();
        assert!(e.to_string().contains("Mars/Olympus"), "{e}");
    }
}
