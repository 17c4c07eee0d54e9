//! What the regions admitted, counted per aligned window from the upstream's log: the bound
//! checked on every window and key ([`decided`](super::decided)), and the figures printed
//! (admissions per window and region, utilisation, the latencies of the global and the plain
//! policy).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::Duration;

use super::decided::{Span, overfull};
use super::drive::Sent;
use super::upstream::Arrival;
use super::world::{PERIOD_US, World};

/// How much slower than a plain policy's a global policy's p50 may be: a decision is one call
/// to the region's Redis either way, where a round trip to the ledger would add 80 ms at least.
/// Half of that: a busy machine's stalls moved the two p50s apart by up to 15 ms.
const LOCAL: Duration = Duration::from_millis(40);

impl World {
    /// The global policy's admissions per window (by index from time 0) and region, every key
    /// together: `[window][region]`.
    pub(crate) fn admitted(&self) -> Vec<[u64; 3]> {
        let mut windows: Vec<[u64; 3]> = Vec::new();
        for arrival in self
            .upstream
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.global)
        {
            let Some(window) = self.window_of(arrival.at_us) else {
                continue;
            };
            if windows.len() <= window {
                windows.resize(window + 1, [0; 3]);
            }
            windows[window][arrival.region] += 1;
        }
        windows
    }

    /// The window (from time 0) that `at_us` falls in; none before time 0.
    fn window_of(&self, at_us: u64) -> Option<usize> {
        let since = at_us.checked_sub(self.t0_us)?;
        Some(usize::try_from(since / PERIOD_US).unwrap())
    }

    /// Every scenario's checks, its figures printed under `scenario`'s name: from the
    /// upstream's log, no aligned window decided more than `bound` of any key worldwide (the
    /// half window before time 0 included; each admission in the window it arrived in, or,
    /// sent in an earlier one, in either: [`decided`](super::decided)), and the log holds every
    /// request a client was admitted with; no request waited on the ledger: the p50 of the
    /// global policy's admitted requests is within [`LOCAL`] of the plain policy's. Returns the
    /// admissions per window and region.
    pub(crate) fn verdict(&self, scenario: &str, bound: u64) -> Vec<[u64; 3]> {
        let log = self.upstream.log.lock().unwrap();
        let global: Vec<&Arrival> = log.iter().filter(|arrival| arrival.global).collect();
        let mut spans = BTreeMap::<&str, Vec<Span>>::new();
        let mut by_arrival = BTreeMap::<(u64, &str), u64>::new();
        for arrival in &global {
            let span = Span {
                first: arrival.sent_us / PERIOD_US,
                last: arrival.at_us / PERIOD_US,
            };
            spans.entry(&arrival.key).or_default().push(span);
            *by_arrival.entry((span.last, &arrival.key)).or_default() += 1;
        }
        let straddling = global
            .iter()
            .filter(|arrival| arrival.sent_us / PERIOD_US < arrival.at_us / PERIOD_US)
            .count();
        let lag = global
            .iter()
            .map(|arrival| arrival.at_us - arrival.sent_us)
            .max()
            .unwrap_or(0);
        let told = self
            .sent
            .lock()
            .unwrap()
            .iter()
            .filter(|sent| sent.global && sent.status == 200)
            .count();
        let most = by_arrival.values().copied().max().unwrap_or(0);
        let over: Vec<_> = spans
            .into_iter()
            .filter_map(|(key, spans)| {
                let window = overfull(spans, bound)?;
                let arrived = by_arrival.get(&(window, key)).copied().unwrap_or(0);
                Some(format!(
                    "window {window} key {key}: {arrived} arrived in it"
                ))
            })
            .collect();
        let logged = global.len();
        drop(log);
        let windows = self.admitted();
        self.print_figures(scenario, &windows, most, bound);
        eprintln!(
            "{straddling} admissions sent in one window arrived in the next; the slowest took \
             {:.1} ms from its client to the upstream",
            lag as f64 / 1e3
        );
        assert!(over.is_empty(), "above {bound} worldwide: {over:?}");
        assert_eq!(
            logged, told,
            "the upstream logged every admission the clients were told"
        );
        let (global, plain) = (self.p50(true).unwrap(), self.p50(false).unwrap());
        assert!(
            global < plain + LOCAL,
            "p50 {global:?} for the global policy, {plain:?} for the plain one"
        );
        windows
    }

    /// Checks that `regions` were served at least 90 % of what they could have been in window
    /// `window` (from time 0): of the global policy's requests they sent in it (by their
    /// clients' clocks, so that a stalled driver's late requests are not taken for units that
    /// did not come), all, or `capacity` when they were more. A failure names the window's
    /// slowest request: units go unspent on a machine too busy to run the proxies on time too.
    pub(crate) fn assert_served(&self, window: usize, regions: &[usize], capacity: u64) {
        self.assert_served_percent(window, regions, capacity, 90);
    }

    /// As [`assert_served`](Self::assert_served), at least `percent` % of it.
    pub(crate) fn assert_served_percent(
        &self,
        window: usize,
        regions: &[usize],
        capacity: u64,
        percent: u64,
    ) {
        let (mut asked, mut admitted, mut slowest) = (0, 0, Duration::ZERO);
        for sent in self.sent.lock().unwrap().iter() {
            if sent.global
                && regions.contains(&sent.region)
                && self.window_of(sent.at_us) == Some(window)
            {
                asked += 1;
                admitted += u64::from(sent.status == 200);
                slowest = slowest.max(sent.latency);
            }
        }
        let could = asked.min(capacity);
        assert!(
            admitted * 100 >= could * percent,
            "window {window}: regions {regions:?} admitted {admitted} of the {could} they could \
             (asked {asked}); its slowest request took {slowest:?}; per window and region: {:?}",
            self.admitted()
        );
    }

    /// How many of the global policy's requests that region `region` sent from `span.start` to
    /// `span.end` (scenario seconds, by their clients' clocks) were admitted: all decided in
    /// that span or after.
    pub(crate) fn admitted_sent(&self, span: Range<f64>, region: usize) -> usize {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|sent| sent.global && sent.region == region && sent.status == 200)
            .filter(|sent| span.contains(&self.seconds(sent.at_us)))
            .count()
    }

    /// The median latency of the requests admitted on the global policy's route (`global`) or
    /// the plain one's, as their clients measured it (through the proxy, to the upstream and
    /// back), in the windows where the global policy admitted some: the same stretches of time
    /// (a busy machine's stall in the windows after a failover slows only what those admit).
    pub(crate) fn p50(&self, global: bool) -> Option<Duration> {
        let sent = self.sent.lock().unwrap();
        let admitted = |sent: &&Sent| sent.status == 200;
        let windows: BTreeSet<u64> = sent
            .iter()
            .filter(|sent| sent.global)
            .filter(admitted)
            .map(|sent| sent.at_us / PERIOD_US)
            .collect();
        let mut latencies: Vec<Duration> = sent
            .iter()
            .filter(|sent| sent.global == global && windows.contains(&(sent.at_us / PERIOD_US)))
            .filter(admitted)
            .map(|sent| sent.latency)
            .collect();
        latencies.sort_unstable();
        latencies.get(latencies.len() / 2).copied()
    }

    /// Requests sent to the global policy's route per window (from time 0), every region
    /// together.
    fn asked(&self) -> Vec<u64> {
        let mut asked = Vec::new();
        for sent in self.sent.lock().unwrap().iter().filter(|sent| sent.global) {
            let Some(window) = self.window_of(sent.at_us) else {
                continue;
            };
            if asked.len() <= window {
                asked.resize(window + 1, 0);
            }
            asked[window] += 1;
        }
        asked
    }

    /// The per-window table, and a line of docs/regions.md's table: the fullest window of a
    /// key against the bound, and utilisation (admitted over what could be: the demand, at most
    /// the quota of every key) over the windows the drivers ran through.
    fn print_figures(&self, scenario: &str, windows: &[[u64; 3]], most: u64, bound: u64) {
        let capacity = self.quota * self.keys as u64;
        let asked = self.asked();
        let mut table = format!(
            "\n{scenario}: quota {} a window per key, {} key(s)\n\
             window | region-0 | region-1 | region-2 | worldwide | asked | utilisation\n",
            self.quota, self.keys
        );
        // The windows the drivers ran through to their end (a driver stops on a window's
        // edge; a request or two may be sent just after it).
        let last = self
            .sent
            .lock()
            .unwrap()
            .iter()
            .map(|sent| sent.at_us)
            .max();
        let full = last.map_or(0, |last| {
            usize::try_from((last.saturating_sub(self.t0_us) + PERIOD_US / 2) / PERIOD_US).unwrap()
        });
        let (mut admitted, mut possible) = (0, 0);
        for (index, &asked) in asked.iter().enumerate() {
            let counts = windows.get(index).copied().unwrap_or_default();
            let total: u64 = counts.iter().sum();
            let could = asked.min(capacity);
            // After the drivers' end: only the stray requests sent on its edge.
            if index >= full && total == 0 {
                continue;
            }
            if index < full {
                admitted += total;
                possible += could;
            }
            table += &format!(
                "{index:>6} | {:>8} | {:>8} | {:>8} | {total:>9} | {asked:>5} | {}\n",
                counts[0],
                counts[1],
                counts[2],
                percent(total, could),
            );
        }
        let p50 = |global| {
            self.p50(global).map_or("-".to_owned(), |p50| {
                format!("{:.2} ms", p50.as_secs_f64() * 1e3)
            })
        };
        table += &format!(
            "| {scenario} | {} | {most} of {bound} | {} | {} / {} |\n",
            full,
            percent(admitted, possible),
            p50(true),
            p50(false),
        );
        eprint!("{table}");
    }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".to_owned();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}
