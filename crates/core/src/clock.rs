//! The wall clock, behind a trait so tools and the scheduler read time from their context and a
//! test can fix it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// Now, as a `SystemTime`.
    fn now(&self) -> SystemTime;

    /// Now, in whole Unix seconds (UTC); 0 for a clock before 1970.
    fn unix_secs(&self) -> i64 {
        self.unix_millis() / 1000
    }

    /// Now, in Unix milliseconds (UTC); 0 for a clock before 1970.
    fn unix_millis(&self) -> i64 {
        self.now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told (tests).
#[derive(Debug)]
pub struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    pub fn new(t: impl Into<SystemTime>) -> Self {
        Self(Mutex::new(t.into()))
    }
    pub fn set(&self, t: impl Into<SystemTime>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = t.into();
    }
    /// Move forward by `d`.
    pub fn advance(&self, d: Duration) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) += d;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A shared clock handle.
pub type ClockRef = Arc<dyn Clock>;

/// The system clock as a shared handle.
pub fn system() -> ClockRef {
    Arc::new(SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::new(UNIX_EPOCH + Duration::from_millis(1_700_000_000_500));
        assert_eq!(c.unix_secs(), 1_700_000_000);
        assert_eq!(c.unix_millis(), 1_700_000_000_500);
        c.advance(Duration::from_secs(60));
        assert_eq!(c.unix_secs(), 1_700_000_060);
        c.set(UNIX_EPOCH - Duration::from_secs(5));
        assert_eq!(c.unix_secs(), 0);
    }
}
