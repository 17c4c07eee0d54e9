//! Run with: cargo bench --bench accuracy
//!
//! How far the approximate window algorithms stray from the exact sliding log. The sliding window
//! counter (1 sub-interval: Cloudflare's weighted previous window; 4 and 10 sub-intervals) and the
//! fixed window, for reference, run on the same seeded traces as the sliding log, through the real
//! [`MemoryStore`] with a [`ManualClock`]. The Redis store decides identically (the conformance
//! and property tests hold the two stores to it), so the memory store's numbers are the Redis
//! store's too.
//!
//! Every algorithm sees every request of a trace and is fed its own admissions, as in production
//! (Cloudflare measured the same way). For each request the approximation's decision is compared
//! with the log's: an *over-admission* is a request the approximation allowed and the log denied,
//! a *false denial* the reverse. Once the two have decided differently their states differ, so
//! later disagreements include that drift; the table is the end-to-end effect a client sees.
//!
//! The markdown table it prints is the one in `docs/algorithms.md`.

use std::collections::VecDeque;
use std::time::Duration;

use testkit::traces::{Request, START_MICROS, Trace};
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Decision, MemoryStore, Policy, Quota, Rule, Store};

/// The quota of every run: 100 requests per minute, a typical API limit.
const LIMIT: u32 = 100;
const PERIOD: Duration = Duration::from_secs(60);
/// The limit's rate, in requests per second.
const LIMIT_RATE: f64 = LIMIT as f64 / 60.0;
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// A named trace.
struct Scenario {
    name: &'static str,
    requests: Vec<Request>,
    clients: u32,
}

fn scenarios() -> Vec<Scenario> {
    let mut rng = fastrand::Rng::with_seed(2024);
    let mut many = Trace::new();
    let clients = 500;
    for client in 0..clients {
        // Clients from a tenth of the limit's rate to three times it.
        let rate = LIMIT_RATE * (0.1 + 2.9 * rng.f64());
        many.poisson(&mut rng, client, Duration::ZERO, HOUR, rate);
    }
    // Most clients far below the limit, a few abusive ones: the population Cloudflare measured.
    let mut quiet = Trace::new();
    let quiet_clients = 1_000;
    for client in 0..quiet_clients {
        let rate = if client % 20 == 0 {
            LIMIT_RATE * (1.0 + 4.0 * rng.f64())
        } else {
            LIMIT_RATE * (0.01 + 0.49 * rng.f64())
        };
        quiet.poisson(&mut rng, client, Duration::ZERO, HOUR, rate);
    }
    vec![
        Scenario {
            name: "steady: Poisson at the limit rate, 24 h",
            requests: Trace::new()
                .poisson(&mut rng, 0, Duration::ZERO, DAY, LIMIT_RATE)
                .finish(),
            clients: 1,
        },
        Scenario {
            name: "steady: Poisson at 2x the limit rate, 24 h",
            requests: Trace::new()
                .poisson(&mut rng, 0, Duration::ZERO, DAY, 2.0 * LIMIT_RATE)
                .finish(),
            clients: 1,
        },
        Scenario {
            name: "bursty: on/off, 5x the limit rate for ~20 s every ~2 min, 24 h",
            requests: Trace::new()
                .on_off(
                    &mut rng,
                    0,
                    Duration::ZERO,
                    DAY,
                    5.0 * LIMIT_RATE,
                    Duration::from_secs(20),
                    Duration::from_secs(100),
                )
                .finish(),
            clients: 1,
        },
        Scenario {
            name: "adversarial: 100 in the last second of every minute, 100 in the first, 24 h",
            requests: Trace::new()
                .window_edges(&mut rng, 0, PERIOD, 24 * 60, LIMIT, Duration::from_secs(1))
                .finish(),
            clients: 1,
        },
        Scenario {
            name: "many clients: 500, each Poisson at 0.1x to 3x the limit rate, 1 h",
            requests: many.finish(),
            clients,
        },
        Scenario {
            name: "mostly quiet: 1,000 clients, 95% at 0.01x to 0.5x the limit rate, 5% at 1x to 5x, 1 h",
            requests: quiet.finish(),
            clients: quiet_clients,
        },
    ]
}

/// The limit of a shadow rule: high enough that it admits everything it is fed.
const SHADOW_LIMIT: u32 = 1_000_000;

fn keys(scenario: &Scenario) -> Vec<Key> {
    (0..scenario.clients)
        .map(|client| Key::from(format!("client-{client}")))
        .collect()
}

fn store_at_start() -> (ManualClock, MemoryStore) {
    let clock = ManualClock::new(START_MICROS);
    let store = MemoryStore::builder().clock(clock.clone()).build();
    (clock, store)
}

fn decide(
    store: &MemoryStore,
    key: &Key,
    policy: &Policy,
    cost: u32,
) -> Result<Decision, Box<dyn std::error::Error>> {
    Ok(store
        .check(key, policy, cost)
        .take_ready()
        .ok_or("the memory store answers synchronously")??)
}

/// Each request's decision when the algorithm is fed its own admissions, as in production.
fn own_history(rule: Rule, scenario: &Scenario) -> Result<Vec<bool>, Box<dyn std::error::Error>> {
    let (clock, store) = store_at_start();
    let policy = Policy::new([rule])?;
    let keys = keys(scenario);
    let mut allowed = Vec::with_capacity(scenario.requests.len());
    for request in &scenario.requests {
        clock.set(request.at);
        let decision = decide(&store, &keys[request.client as usize], &policy, 1)?;
        allowed.push(decision.is_allowed());
    }
    Ok(allowed)
}

/// The algorithm's decisions on the exact log's history: what it would decide for each request
/// if it had admitted exactly what the log admitted.
struct SameHistory {
    allowed: Vec<bool>,
    /// Mean of |estimate - true count| / true count over requests whose key had a true count > 0.
    estimate_error: f64,
}

/// Feeds a shadow of the algorithm (the same algorithm and period, a limit so high that it admits
/// everything) the log's admissions only, and reads its usage estimate before each request with a
/// cost-0 check. The estimate is computed exactly as under the real limit (same integer weights),
/// and the request would pass iff `estimate + 1 <= limit`: the rule's own test.
fn same_history(
    rule: &Rule,
    scenario: &Scenario,
    exact: &[bool],
) -> Result<SameHistory, Box<dyn std::error::Error>> {
    let (clock, store) = store_at_start();
    let shadow = Rule::new("q", rule.algorithm(), Quota::new(SHADOW_LIMIT, PERIOD));
    let policy = Policy::new([shadow])?;
    let keys = keys(scenario);
    let period = micros(PERIOD);
    // Each key's admissions by the log within the last period: the true count.
    let mut admitted: Vec<VecDeque<u64>> = vec![VecDeque::new(); keys.len()];
    let (mut error_sum, mut samples) = (0.0, 0u64);
    let mut allowed = Vec::with_capacity(scenario.requests.len());
    for (request, &log_admits) in scenario.requests.iter().zip(exact) {
        clock.set(request.at);
        let key = &keys[request.client as usize];
        let estimate = decide(&store, key, &policy, 0)?.used();
        let own = &mut admitted[request.client as usize];
        while own.front().is_some_and(|&at| at + period <= request.at) {
            own.pop_front();
        }
        let truth = own.len() as f64;
        if truth > 0.0 {
            error_sum += (estimate as f64 - truth).abs() / truth;
            samples += 1;
        }
        allowed.push(estimate < u64::from(rule.quota().limit()));
        if log_admits {
            own.push_back(request.at);
            if !decide(&store, key, &policy, 1)?.is_allowed() {
                return Err("the shadow rule must admit everything the log admits".into());
            }
        }
    }
    Ok(SameHistory {
        allowed,
        estimate_error: 100.0 * error_sum / samples.max(1) as f64,
    })
}

/// Requests one decided `true` and the other `false`, in percent of all requests.
fn disagreements(first: &[bool], second: &[bool]) -> f64 {
    let count = first.iter().zip(second).filter(|&(&a, &b)| a && !b).count();
    100.0 * count as f64 / first.len().max(1) as f64
}

/// The mean over (key, minute of the trace) with exact admissions > 0 of
/// |admitted by the approximation - admitted by the log| / admitted by the log, in percent, each
/// fed its own admissions. Minutes are aligned to the trace start.
fn rate_error(scenario: &Scenario, approximate: &[bool], exact: &[bool]) -> f64 {
    let minutes = scenario
        .requests
        .last()
        .map_or(0, |last| (last.at - START_MICROS) / micros(PERIOD) + 1) as usize;
    let mut per_minute = vec![(0u64, 0u64); minutes * scenario.clients as usize];
    for (i, request) in scenario.requests.iter().enumerate() {
        let minute = ((request.at - START_MICROS) / micros(PERIOD)) as usize;
        let counts = &mut per_minute[request.client as usize * minutes + minute];
        counts.0 += u64::from(approximate[i]);
        counts.1 += u64::from(exact[i]);
    }
    let (mut error_sum, mut windows) = (0.0, 0u64);
    for &(a, e) in per_minute.iter().filter(|&&(_, e)| e > 0) {
        error_sum += a.abs_diff(e) as f64 / e as f64;
        windows += 1;
    }
    100.0 * error_sum / windows.max(1) as f64
}

fn admitted_share(allowed: &[bool]) -> f64 {
    100.0 * allowed.iter().filter(|&&a| a).count() as f64 / allowed.len().max(1) as f64
}

/// The most requests one key had admitted within any interval of one period: at most the limit
/// for an exact algorithm.
fn peak_in_any_period(scenario: &Scenario, allowed: &[bool]) -> u64 {
    let mut per_client: Vec<Vec<u64>> = vec![Vec::new(); scenario.clients as usize];
    for (request, &allowed) in scenario.requests.iter().zip(allowed) {
        if allowed {
            per_client[request.client as usize].push(request.at);
        }
    }
    let period = micros(PERIOD);
    let mut peak = 0;
    for times in &per_client {
        let mut first = 0;
        for (last, &at) in times.iter().enumerate() {
            while times[first] + period <= at {
                first += 1;
            }
            peak = peak.max(last - first + 1);
        }
    }
    peak as u64
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if !testkit::run_by_cargo_bench("accuracy") {
        return Ok(());
    }
    let quota = Quota::new(LIMIT, PERIOD);
    let approximations = [
        (
            "sliding window, 1 sub-interval",
            Rule::sliding_window("q", quota, 1),
        ),
        (
            "sliding window, 4 sub-intervals",
            Rule::sliding_window("q", quota, 4),
        ),
        (
            "sliding window, 10 sub-intervals",
            Rule::sliding_window("q", quota, 10),
        ),
        ("fixed window", Rule::fixed_window("q", quota)),
    ];
    println!("Quota: {LIMIT} requests per {} s.\n", PERIOD.as_secs());
    println!(
        "| trace | requests | algorithm | over-admissions | false denials | estimate error | admitted | rate error per minute | most admitted in any 60 s |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for scenario in scenarios() {
        let exact = own_history(Rule::sliding_log("q", quota), &scenario)?;
        println!(
            "| {} | {} | sliding log (exact) | - | - | - | {:.1}% | - | {} |",
            scenario.name,
            scenario.requests.len(),
            admitted_share(&exact),
            peak_in_any_period(&scenario, &exact),
        );
        for (name, rule) in &approximations {
            let same = same_history(rule, &scenario, &exact)?;
            let own = own_history(rule.clone(), &scenario)?;
            println!(
                "| | | {name} | {:.3}% | {:.3}% | {:.2}% | {:.1}% | {:.2}% | {} |",
                disagreements(&same.allowed, &exact),
                disagreements(&exact, &same.allowed),
                same.estimate_error,
                admitted_share(&own),
                rate_error(&scenario, &own, &exact),
                peak_in_any_period(&scenario, &own),
            );
        }
    }
    Ok(())
}
