//! Stopping: SIGTERM or Ctrl-C starts a drain (stop accepting, finish what is in flight); the
//! drain deadline then cuts what is left (open tunnels get a WebSocket close frame).

use std::time::Duration;

use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Running,
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

    /// Starts the drain: listeners stop accepting, connections close once their requests end.
    pub fn drain(&self) {
        self.stage
            .send_if_modified(|stage| raise(stage, Stage::Draining));
    }

    /// Ends the drain: what is still open is closed.
    pub fn cut(&self) {
        self.stage
            .send_if_modified(|stage| raise(stage, Stage::Cut));
    }

    /// Drains on SIGTERM or SIGINT (Ctrl-C), and cuts `drain_timeout` later.
    pub fn on_signals(self, drain_timeout: Duration) {
        tokio::spawn(async move {
            terminated().await;
            tracing::info!(
                ?drain_timeout,
                "shutting down: finishing the requests in flight"
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

    /// Whether the drain has started.
    pub fn is_draining(&self) -> bool {
        *self.stage.borrow() >= Stage::Draining
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn terminated() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
}
