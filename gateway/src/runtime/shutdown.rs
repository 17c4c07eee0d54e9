//! Stopping, in the order a load balancer needs: SIGTERM or Ctrl-C first makes the process
//! *leave* (`/readyz` answers 503 while the listeners go on serving, for `drain_delay`, so that
//! load balancers stop sending before anything is refused), then starts the drain (stop
//! accepting, finish what is in flight); the drain deadline then cuts what is left (open
//! tunnels get a WebSocket close frame). The admin address answers until the process exits.

use std::time::Duration;

use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Running,
    /// Still serving, but no longer ready: `/readyz` answers 503.
    Leaving,
    Draining,
    Cut,
}

/// Tells the servers and tunnels of a process when to stop: cheap to clone, one per task.
#[derive(Clone, Debug)]
pub struct Shutdown {
    stage: watch::Receiver<Stage>,
}

/// Moves every [`Shutdown`] made from it on to the next stage.
#[derive(Debug)]
pub struct ShutdownTrigger {
    stage: watch::Sender<Stage>,
}

impl ShutdownTrigger {
    /// A trigger, and the first of its [`Shutdown`]s.
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (sender, receiver) = watch::channel(Stage::Running);
        (
            ShutdownTrigger { stage: sender },
            Shutdown { stage: receiver },
        )
    }

    /// Says the process is leaving: `/readyz` answers 503, the listeners go on serving.
    pub fn leave(&self) {
        self.stage
            .send_if_modified(|stage| raise(stage, Stage::Leaving));
    }

    /// Starts the drain (leaving too, if it was not): listeners stop accepting, connections close once their requests end.
    pub fn drain(&self) {
        self.stage
            .send_if_modified(|stage| raise(stage, Stage::Draining));
    }

    /// Ends the drain: what is still open is closed.
    pub fn cut(&self) {
        self.stage
            .send_if_modified(|stage| raise(stage, Stage::Cut));
    }

    /// On SIGTERM or SIGINT (Ctrl-C): leaves at once, drains `drain_delay` later (at once on a
    /// second signal: an operator who insists), and cuts `drain_timeout` after that.
    ///
    /// The signals are listened for from this call on (not from the task's first poll), so that
    /// a SIGTERM sent as soon as the start-up line is out starts the drain rather than killing
    /// the process: call it before that line.
    pub fn on_signals(self, drain_delay: Duration, drain_timeout: Duration) {
        let mut terminations = Terminations::listen();
        tokio::spawn(async move {
            terminations.next().await;
            tracing::info!(
                ?drain_delay,
                "shutting down: /readyz answers 503, still serving until the drain delay ends"
            );
            self.leave();
            tokio::select! {
                () = tokio::time::sleep(drain_delay) => {}
                () = terminations.next() => {}
            }
            tracing::info!(
                ?drain_timeout,
                "shutting down: no longer accepting, finishing the requests in flight"
            );
            self.drain();
            tokio::time::sleep(drain_timeout).await;
            self.cut();
        });
    }
}

fn raise(stage: &mut Stage, to: Stage) -> bool {
    if *stage < to {
        *stage = to;
        true
    } else {
        false
    }
}

impl Shutdown {
    /// Resolves once the drain has started (at once if it has).
    pub async fn draining(&mut self) {
        self.reach(Stage::Draining).await;
    }

    /// Resolves once the drain is over (at once if it is).
    pub async fn cut(&mut self) {
        self.reach(Stage::Cut).await;
    }

    async fn reach(&mut self, stage: Stage) {
        if self.stage.wait_for(|now| *now >= stage).await.is_err() {
            // The trigger is gone without having reached `stage`: it never will.
            std::future::pending::<()>().await;
        }
    }

    /// Whether the process is leaving (or draining already): not ready for new work.
    pub fn is_leaving(&self) -> bool {
        *self.stage.borrow() >= Stage::Leaving
    }
}

/// SIGTERM and SIGINT (Ctrl-C), listened for from when it is made.
struct Terminations {
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl Terminations {
    /// Listens from now on (within a Tokio runtime). A signal that cannot be listened for is
    /// never heard: the process then ends as the system ends it.
    fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                terminate: signal(SignalKind::terminate()).ok(),
                interrupt: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next SIGTERM or SIGINT.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            let terminate = async {
                match &mut self.terminate {
                    Some(signal) => drop(signal.recv().await),
                    None => std::future::pending().await,
                }
            };
            let interrupt = async {
                match &mut self.interrupt {
                    Some(signal) => drop(signal.recv().await),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = terminate => {}
                () = interrupt => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
