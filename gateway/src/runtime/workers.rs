//! [`Workers`]: threads that each run an event loop of their own (a current-thread Tokio
//! runtime) and serve the connections handed to them, as nginx's worker processes do.
//!
//! A connection lives on one worker from its accept to its close, and so do the tasks it
//! spawns (hyper's upstream connections, tunnels): a request handed from the client's
//! connection to the upstream's and back wakes a task on the same thread, where on a shared
//! multi-thread runtime each hand-over is a wake-up of another thread, a system call and a
//! context switch. Profiles of the proxy put half its time there.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::{Builder, Handle};
use tokio::sync::watch;

thread_local! {
    /// The index of the worker this thread is, on a worker's thread.
    static WORKER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The index of the worker whose thread calls this, `None` off the workers: what keeps a
/// per-worker resource (an upstream connection pool) on its own worker.
pub fn current_worker() -> Option<usize> {
    WORKER.with(Cell::get)
}

/// Worker threads, each with its event loop: cloned to share them between listeners; stopped
/// when the last clone is dropped (the tasks still on them are dropped).
#[derive(Clone)]
pub struct Workers(Arc<Threads>);

struct Threads {
    handles: Vec<Handle>,
    next: AtomicUsize,
    stop: watch::Sender<bool>,
}

impl Workers {
    /// Starts `count` workers; `0` starts none: [`Workers::spawn`] then spawns on the caller's
    /// runtime.
    pub fn start(count: usize) -> io::Result<Workers> {
        let (stop, stopped) = watch::channel(false);
        let mut handles = Vec::with_capacity(count);
        for index in 0..count {
            let runtime = Builder::new_current_thread().enable_all().build()?;
            handles.push(runtime.handle().clone());
            let mut stopped = stopped.clone();
            std::thread::Builder::new()
                .name(format!("worker-{index}"))
                .spawn(move || {
                    WORKER.with(|worker| worker.set(Some(index)));
                    runtime.block_on(async move {
                        // Ends when told to, or when the `Workers` is gone.
                        let _ = stopped.wait_for(|stop| *stop).await;
                    });
                })?;
        }
        Ok(Workers(Arc::new(Threads {
            handles,
            next: AtomicUsize::new(0),
            stop,
        })))
    }

    /// No workers: tasks run on the caller's runtime.
    pub fn none() -> Workers {
        Workers(Arc::new(Threads {
            handles: Vec::new(),
            next: AtomicUsize::new(0),
            stop: watch::channel(false).0,
        }))
    }

    /// Runs `task` on the next worker in turn (on the caller's runtime when there are none).
    /// What `task` creates once running (a socket registered with an event loop) belongs to
    /// the worker it runs on.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let threads = &self.0;
        if threads.handles.is_empty() {
            tokio::spawn(task);
            return;
        }
        let index = threads.next.fetch_add(1, Ordering::Relaxed) % threads.handles.len();
        threads.handles[index].spawn(task);
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
