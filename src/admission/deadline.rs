//! A bound on how long a store may take, armed only if the store does not answer at once.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep, sleep_until};

use crate::store::StoreError;

pin_project! {
    /// Resolves to the store's answer, or to a [`StoreError::timeout`] once `limit` has passed since
    /// the first poll. The timer is created only when the store is pending, so an in-memory
    /// decision costs no timer registration.
    pub(crate) struct Deadline<F> {
        #[pin]
        future: F,
        #[pin]
        timer: Option<Sleep>,
        limit: Duration,
        // What the store is asked for, in the metric of how long calls that needed I/O took.
        limiting: &'static str,
    }
}

impl<F> Deadline<F> {
    pub(crate) fn new(future: F, limit: Duration, limiting: &'static str) -> Self {
        Self {
            future,
            timer: None,
            limit,
            limiting,
        }
    }
}

impl<F, T> Future for Deadline<F>
where
    F: Future<Output = Result<T, StoreError>>,
{
    type Output = Result<T, StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(result) = this.future.poll(cx) {
            // The timer was armed when the call started waiting on I/O, `limit` before it ends.
            if let Some(timer) = this.timer.as_ref().as_pin_ref() {
                let started = timer.deadline() - *this.limit;
                crate::telemetry::store_call(this.limiting, started.elapsed());
            }
            return Poll::Ready(result);
        }
        if this.timer.is_none() {
            this.timer
                .set(Some(sleep_until(Instant::now() + *this.limit)));
        }
        if let Some(timer) = this.timer.as_pin_mut() {
            ready!(timer.poll(cx));
        }
        Poll::Ready(Err(StoreError::timeout(*this.limit)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_pending_store_times_out_at_the_deadline() {
        let started = Instant::now();
        let never = std::future::pending::<Result<(), StoreError>>();
        let result = Deadline::new(never, Duration::from_millis(100), "test").await;
        assert_eq!(
            result.unwrap_err().to_string(),
            StoreError::timeout(Duration::from_millis(100)).to_string()
        );
        assert_eq!(started.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_before_the_deadline_wins() {
        let answer = async {
            tokio::time::sleep(Duration::from_millis(99)).await;
            Ok::<_, StoreError>(7)
        };
        assert_eq!(
            Deadline::new(answer, Duration::from_millis(100), "test")
                .await
                .unwrap(),
            7
        );
    }
}
