//! The load drivers: HTTP clients asking each region's proxies at a rate a scenario sets, in
//! turn, each request sent on its own task so that a slow answer delays no other; every
//! request's outcome and latency, as the client saw it.

use std::time::{Duration, Instant, SystemTime};

use super::upstream::{GLOBAL_PATH, KEY_HEADER, PLAIN_PATH};
use super::world::World;

/// The header that tells the upstream which region a request came through.
pub(crate) const REGION_HEADER: &str = "x-region";
/// The header holding when the client sent the request (µs since the epoch): the proxy decided
/// between then and its arrival upstream.
pub(crate) const SENT_HEADER: &str = "x-sent-us";

/// Requests a second each region sends to the plain policy's route, whatever the scenario.
const PLAIN_RATE: f64 = 10.0;

/// µs since the Unix epoch: the clock every process on the machine reads.
pub(crate) fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap();
    u64::try_from(since.as_micros()).unwrap()
}

/// A request as its client saw it.
#[derive(Clone, Debug)]
pub(crate) struct Sent {
    /// When it was sent, µs since the epoch.
    pub(crate) at_us: u64,
    pub(crate) region: usize,
    pub(crate) global: bool,
    /// The answer's status; 0 when there was none.
    pub(crate) status: u16,
    pub(crate) latency: Duration,
}

impl World {
    /// Asks the global policy's route until `until_s`: region `r` is sent `rate(r, t)` requests
    /// a second at scenario time `t`, its two proxies in turn, the keys in turn. Beside them,
    /// every region asks the plain policy's route [`PLAIN_RATE`] times a second: the latency to
    /// compare with.
    pub(crate) async fn drive(&self, until_s: f64, rate: impl Fn(usize, f64) -> f64) {
        tokio::join!(
            self.drive_path(GLOBAL_PATH, until_s, rate),
            self.drive_path(PLAIN_PATH, until_s, |_, _| PLAIN_RATE),
        );
    }

    async fn drive_path(&self, path: &str, until_s: f64, rate: impl Fn(usize, f64) -> f64) {
        let tick = Duration::from_millis(5);
        let mut owed = [0.0_f64; 3];
        // Each region's requests, counted: its proxies and the keys in turn.
        let mut turns = [0_usize; 3];
        let mut requests = Vec::new();
        let mut last = self.now_s();
        while self.now_s() < until_s {
            tokio::time::sleep(tick).await;
            let now = self.now_s();
            let elapsed = now - last;
            last = now;
            for (region, (owed, turn)) in owed.iter_mut().zip(&mut turns).enumerate() {
                *owed += rate(region, now) * elapsed;
                while *owed >= 1.0 {
                    *owed -= 1.0;
                    *turn += 1;
                    let proxy = &self.sites[region].proxies[*turn % 2].0;
                    // Not `turn % keys`: each key would meet one proxy of the region.
                    let key = format!("customer-{}", (*turn / 2) % self.keys);
                    let request = self
                        .client
                        .get(proxy.url(&format!("{path}r")))
                        .header(KEY_HEADER, key)
                        .header(REGION_HEADER, region.to_string());
                    let global = path == GLOBAL_PATH;
                    requests.push(tokio::spawn(async move {
                        let at_us = now_us();
                        let started = Instant::now();
                        let request = request.header(SENT_HEADER, at_us.to_string());
                        let status = match request.send().await {
                            Ok(response) => response.status().as_u16(),
                            Err(_) => 0,
                        };
                        Sent {
                            at_us,
                            region,
                            global,
                            status,
                            latency: started.elapsed(),
                        }
                    }));
                }
            }
        }
        let mut sent = Vec::with_capacity(requests.len());
        for request in requests {
            sent.push(request.await.expect("a request's task"));
        }
        self.sent.lock().unwrap().extend(sent);
    }
}
