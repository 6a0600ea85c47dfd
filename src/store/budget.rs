//! The render budget: a bound, in bytes, on the memory of renders that are not served from
//! the cache, from the moment they start until their body is sent.
//!
//! A render reserves an estimate of what it will hold before it starts. When the budget has
//! no room within a short wait, the request is refused ([`StoreError::Busy`], a 503 with
//! `Retry-After`) instead of queueing without bound. The wait is one per request
//! ([`Admission`]): a request that waited for another's render of the same body, then
//! finds it failed, does not start a wait of its own. A render larger than the whole
//! budget waits for all of it and runs alone. The reservation lives as long as its
//! [`BudgetPermit`], which the response body keeps until it is sent or dropped.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::StoreError;

/// Bytes per permit of the semaphore (`acquire_many` counts in `u32`).
const UNIT: usize = 1024;

/// How long a render may wait for room before it is refused.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(1);

/// The default budget.
pub const DEFAULT_BYTES: usize = 512 << 20;

/// The budget shared by every render of a store.
#[derive(Debug)]
pub struct RenderBudget {
    permits: Arc<Semaphore>,
    units: u32,
    wait: Duration,
}

/// A request's use of a [`RenderBudget`]: its reservations wait for room until one
/// deadline, set when the request began.
#[derive(Debug, Clone, Copy)]
pub struct Admission<'b> {
    budget: &'b RenderBudget,
    by: tokio::time::Instant,
}

/// Bytes reserved in a [`RenderBudget`], given back when dropped.
#[derive(Debug)]
pub struct BudgetPermit {
    _permit: OwnedSemaphorePermit,
}

impl RenderBudget {
    /// A budget of `bytes` (at least one unit), refusing renders that find no room within
    /// `wait`.
    pub fn new(bytes: usize, wait: Duration) -> RenderBudget {
        let units = u32::try_from(bytes / UNIT).unwrap_or(u32::MAX).max(1);
        let units = units.min(u32::try_from(Semaphore::MAX_PERMITS).unwrap_or(u32::MAX));
        RenderBudget {
            permits: Arc::new(Semaphore::new(units as usize)),
            units,
            wait,
        }
    }

    /// The whole budget, in bytes.
    pub fn total_bytes(&self) -> usize {
        self.units as usize * UNIT
    }

    /// Bytes not reserved now.
    pub fn available_bytes(&self) -> usize {
        self.permits.available_permits() * UNIT
    }

    /// The budget for a request beginning now.
    pub fn admission(&self) -> Admission<'_> {
        Admission {
            budget: self,
            by: tokio::time::Instant::now() + self.wait,
        }
    }
}

impl Admission<'_> {
    /// Reserves `bytes` (all of the budget when it is larger), waiting for room until the
    /// request's deadline (room there is now is taken even past it).
    pub async fn reserve(&self, bytes: usize) -> Result<BudgetPermit, StoreError> {
        let budget = self.budget;
        let units = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, budget.units);
        let acquire = budget.permits.clone().acquire_many_owned(units);
        match tokio::time::timeout_at(self.by, acquire).await {
            Ok(Ok(permit)) => Ok(BudgetPermit { _permit: permit }),
            // The semaphore is never closed; a closed one has no room either.
            Ok(Err(_)) | Err(_) => Err(StoreError::Busy {
                retry_after: budget.wait.max(Duration::from_secs(1)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reservations_past_the_budget_are_refused_and_dropping_gives_room_back() {
        let budget = RenderBudget::new(10 * UNIT, Duration::from_millis(20));
        let first = budget.admission().reserve(6 * UNIT).await.expect("room");
        assert_eq!(budget.available_bytes(), 4 * UNIT);
        assert!(matches!(
            budget.admission().reserve(6 * UNIT).await,
            Err(StoreError::Busy { .. })
        ));
        let small = budget.admission().reserve(1).await.expect("one unit fits");
        drop(first);
        drop(small);
        assert_eq!(budget.available_bytes(), budget.total_bytes());
        // Larger than the whole budget: it runs alone.
        let alone = budget
            .admission()
            .reserve(100 * UNIT)
            .await
            .expect("the whole budget");
        assert_eq!(budget.available_bytes(), 0);
        assert!(budget.admission().reserve(1).await.is_err());
        drop(alone);
        assert_eq!(budget.available_bytes(), 10 * UNIT);
    }

    #[tokio::test]
    async fn a_request_waits_once_however_many_reservations_it_makes() {
        let budget = RenderBudget::new(4 * UNIT, Duration::from_millis(50));
        let held = budget.admission().reserve(4 * UNIT).await.expect("room");
        let request = budget.admission();
        assert!(request.reserve(UNIT).await.is_err(), "waited until the deadline");
        let started = tokio::time::Instant::now();
        assert!(
            request.reserve(UNIT).await.is_err(),
            "past the deadline: no new wait"
        );
        assert!(started.elapsed() < Duration::from_millis(50));
        drop(held);
        assert!(
            request.reserve(UNIT).await.is_ok(),
            "room now is taken even past it"
        );
    }
}
