//! Checks of the shared upload store that requests arriving together share.
//!
//! A request asks a question of the database (is this upload still stored? which uploads
//! are there?) and must see every change committed before it arrived: the answer of a
//! check that started after the request arrived is as good as one of its own. A check
//! runs one at a time; requests arriving while one runs wait for it to end, and the first
//! of them starts the next, which answers them all. A burst of requests costs the
//! database a few queries, not one each.

use std::future::Future;
use std::time::Instant;

/// One question's checks (see the module's documentation); `T` is the answer, an error
/// included, shared by every request the check answers.
#[derive(Debug)]
pub struct SharedCheck<T> {
    /// When the last check started, and its answer. An async mutex, held across the
    /// check's query on purpose: requests waiting for it are the ones its successor
    /// answers. No thread blocks on it, and it guards nothing else.
    last: tokio::sync::Mutex<Option<(Instant, T)>>,
}

impl<T> Default for SharedCheck<T> {
    fn default() -> Self {
        SharedCheck {
            last: tokio::sync::Mutex::new(None),
        }
    }
}

impl<T: Clone> SharedCheck<T> {
    /// The answer of a check that started after this call: the last one's if it did, else
    /// that of `check`, run now.
    pub async fn answer<F: Future<Output = T>>(&self, check: impl FnOnce() -> F) -> T {
        let asked = Instant::now();
        let mut last = self.last.lock().await;
        if let Some((started, answer)) = &*last {
            if *started >= asked {
                return answer.clone();
            }
        }
        let started = Instant::now();
        let answer = check().await;
        *last = Some((started, answer.clone()));
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_arriving_during_a_check_share_the_next_one() {
        let check = Arc::new(SharedCheck::<usize>::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let ask = |check: Arc<SharedCheck<usize>>, runs: Arc<AtomicUsize>| async move {
            check
                .answer(|| async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    runs.fetch_add(1, Ordering::SeqCst) + 1
                })
                .await
        };
        let first = tokio::spawn(ask(check.clone(), runs.clone()));
        tokio::time::sleep(Duration::from_millis(10)).await;
        let waiting: Vec<_> = (0..20)
            .map(|_| tokio::spawn(ask(check.clone(), runs.clone())))
            .collect();
        assert_eq!(first.await.unwrap(), 1);
        for answer in waiting {
            assert_eq!(answer.await.unwrap(), 2, "answered by the check after the first");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(
            ask(check, runs).await,
            3,
            "a request after the checks ended runs its own"
        );
    }
}
