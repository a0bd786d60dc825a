//! Spawning a task on the runtime with its future boxed, so that tokio's code for a task (its
//! poll, completion, join and cancel paths: some 1.3 KB for each future type) is built once for
//! each output type rather than once for each `async` block spawned (BENCHMARKS.md,
//! "Dependency code cut from the binary"). The future itself is unchanged; it costs one more
//! allocation when spawned and a call through a pointer when polled.

use std::future::Future;
use std::pin::Pin;
use tokio::task::JoinHandle;

/// `tokio::spawn`, the future boxed.
#[track_caller]
pub fn spawn<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> JoinHandle<T> {
    let boxed: Pin<Box<dyn Future<Output = T> + Send>> = Box::pin(future);
    tokio::spawn(boxed)
}

/// `tokio::task::spawn_blocking`, the closure boxed.
#[track_caller]
pub fn spawn_blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let boxed: Box<dyn FnOnce() -> T + Send> = Box::new(f);
    tokio::task::spawn_blocking(boxed)
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_spawned_future_and_closure_give_their_output() {
        assert_eq!(super::spawn(async { 6 * 7 }).await.unwrap(), 42);
        assert_eq!(super::spawn_blocking(|| "done").await.unwrap(), "done");
    }
}
