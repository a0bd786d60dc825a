//! How fast the gateway token can be guessed at sign-in: every guess, right or wrong, waits
//! its turn and is compared only then, at least [`SPACING`] after the previous comparison, so
//! the gateway decides at most one guess a second in all, however many come at once. A right
//! guess is answered no sooner than a wrong one would be, so a guesser learns nothing from
//! the answers it does not wait for.
//!
//! The time of a comparison is taken when it starts, under the lock that orders the guesses:
//! a client that hangs up while it waits is dropped before it is compared (it learns nothing,
//! and the next guess still waits a full [`SPACING`] after the last comparison), and one that
//! hangs up during its comparison has already pushed the next one back.
//!
//! When guesses pile up, the newest [`MAX_WAITING`] are kept: a guess that finds, when its turn
//! comes, that that many arrived after it is refused (`429`) without being compared. So a
//! flood keeps only a few guesses sleeping, and whoever signs in after a burst of guesses is
//! decided within about [`MAX_WAITING`] seconds. A guesser that never stops sending can keep
//! anyone from signing in (never a session already signed in), and still learns at most one
//! answer a second.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// The least time between two comparisons of a token.
pub const SPACING: Duration = Duration::from_secs(1);
/// How many of the newest guesses are kept waiting.
pub const MAX_WAITING: u64 = 3;

/// The queue of sign-in guesses (one per gateway).
pub struct Guesses {
    /// When the last comparison started; the lock is taken in arrival order.
    last: Mutex<Option<Instant>>,
    /// Guesses that have arrived so far (each one's ticket is the count at its arrival).
    arrived: AtomicU64,
    spacing: Duration,
    max_waiting: u64,
}

impl Default for Guesses {
    fn default() -> Self {
        Guesses::new(SPACING, MAX_WAITING)
    }
}

impl Guesses {
    /// Comparisons `spacing` apart; the newest `max_waiting` guesses kept.
    pub fn new(spacing: Duration, max_waiting: u64) -> Guesses {
        Guesses {
            last: Mutex::new(None),
            arrived: AtomicU64::new(0),
            spacing,
            max_waiting,
        }
    }

    /// Run `compare` when this guess's turn comes; `None` (never compared) when
    /// [`MAX_WAITING`] newer guesses arrived while it waited.
    pub async fn decide<T>(&self, compare: impl Future<Output = T>) -> Option<T> {
        let ticket = self.arrived.fetch_add(1, Ordering::SeqCst) + 1;
        let mut last = self.last.lock().await;
        if self.arrived.load(Ordering::SeqCst) - ticket >= self.max_waiting {
            return None;
        }
        if let Some(at) = *last {
            tokio::time::sleep_until(at + self.spacing).await;
        }
        *last = Some(Instant::now());
        Some(compare.await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const GAP: Duration = Duration::from_millis(100);

    /// `n` guesses arriving at once; when each was compared (`None`: refused).
    async fn burst(g: &Arc<Guesses>, n: usize) -> Vec<Option<Duration>> {
        let t0 = Instant::now();
        let mut all = Vec::new();
        for _ in 0..n {
            let g = g.clone();
            // Each comparison takes a moment, so the first is still running when the rest
            // arrive.
            let compare = async move {
                let t = Instant::now();
                tokio::time::sleep(GAP / 10).await;
                t - t0
            };
            all.push(tokio::spawn(async move { g.decide(compare).await }));
        }
        let mut at = Vec::new();
        for a in all {
            at.push(a.await.unwrap());
        }
        at
    }

    #[tokio::test]
    async fn guesses_are_compared_apart_and_the_newest_are_kept() {
        let g = Arc::new(Guesses::new(GAP, 3));
        let at = burst(&g, 20).await;
        let compared: Vec<Duration> = at.iter().flatten().copied().collect();
        // The first (its turn came at once) and the newest three.
        assert_eq!(compared.len(), 4, "{at:?}");
        assert!(
            at[0].is_some() && at[17..].iter().all(Option::is_some),
            "{at:?}"
        );
        for (i, t) in compared.iter().enumerate() {
            assert!(*t >= GAP * i as u32, "{at:?}");
        }
        assert!(compared[3] < GAP * 5, "the newest waited too long: {at:?}");
    }

    #[tokio::test]
    async fn a_guess_given_up_while_waiting_does_not_shorten_the_next_wait() {
        let g = Arc::new(Guesses::new(GAP, 3));
        g.decide(async {}).await.unwrap();
        let t0 = Instant::now();
        let waiting = {
            let g = g.clone();
            tokio::spawn(async move { g.decide(async {}).await })
        };
        tokio::time::sleep(GAP / 3).await;
        waiting.abort();
        let _ = waiting.await;
        g.decide(async {}).await.unwrap();
        assert!(t0.elapsed() >= GAP, "{:?}", t0.elapsed());
    }
}
