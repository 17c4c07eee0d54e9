//! `ratelimit-gateway check CONFIG`: validates a file without starting anything (as `nginx -t`
//! does) and says what it would run.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use tower_redis_ratelimit::config::{
    KeyConfig, Limits, LimitsConfig, PolicyConfig, RouteConfig, RuleConfig, StoreConfig,
};
use tower_redis_ratelimit::policy::Algorithm;
use tower_redis_ratelimit::store::redact_url;
use tower_redis_ratelimit::store::region::PartitionMode;

use crate::config::{AccessLogFormat, Connections, DEFAULT_GATEWAYS, File, FileError};
use crate::envoy::placement::Placement;
use crate::runtime::AdminAccess;
use crate::{proxy, serve};

/// Reads and builds the file at `path` as `proxy` and `serve` would (stores are built, not
/// connected), and returns what they would run; or the first mistake, named by its field or its
/// line.
pub fn check(path: &Path) -> Result<String, FileError> {
    let file = File::read(path)?;
    // The limits are built either way: a file of neither table has mistakes in them too.
    let limits = file.limits.build().map_err(|err| file.limits_error(err))?;
    let proxy = match &file.tables.proxy {
        Some(_) => Some(proxy::load(&file, None)?),
        None => None,
    };
    let serve = match &file.tables.serve {
        Some(_) => Some(serve::load(&file, None)?),
        None => None,
    };
    Ok(describe(&file, &limits, proxy.as_ref(), serve.as_ref()))
}

fn describe(
    file: &File,
    limits: &Limits,
    proxy: Option<&proxy::Loaded>,
    serve: Option<&serve::Loaded>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: the configuration is valid", file.path.display());
    match proxy {
        Some(proxy) => describe_proxy(&mut out, proxy),
        None => out.push_str("proxy: none (no [proxy] table)\n"),
    }
    match serve {
        Some(serve) => describe_serve(&mut out, serve),
        None => out.push_str("serve: none (no [serve] table)\n"),
    }
    describe_limits(&mut out, &file.limits, limits);
    describe_paths(&mut out, limits);
    out
}

/// Which limits a path's request meets, by the longest prefix it starts with: every route
/// (and concurrency limit) of that prefix and of the shorter ones it starts with, in the order
/// they decide.
fn describe_paths(out: &mut String, limits: &Limits) {
    let mut stacks = limits.route_paths().peekable();
    if stacks.peek().is_some() {
        out.push_str("paths (a request meets every route of its path, in this order):\n");
        for (prefix, routes) in stacks {
            let _ = writeln!(out, "  {prefix}: {}", routes.join(", "));
        }
    }
    let mut stacks = limits.concurrency_paths().peekable();
    if stacks.peek().is_some() {
        out.push_str("concurrency paths (a request holds a slot of each):\n");
        for (prefix, names) in stacks {
            let _ = writeln!(out, "  {prefix}: {}", names.join(", "));
        }
    }
}

fn describe_serve(out: &mut String, serve: &serve::Loaded) {
    let table = &serve.table;
    let mut listeners = Vec::new();
    if let Some(listen) = table.listen {
        let scheme = if table.tls.is_some() { "https" } else { "http" };
        listeners.push(format!("{scheme}://{listen}"));
    }
    if let Some(socket) = &table.socket {
        listeners.push(format!("unix:{}", socket.display()));
    }
    let _ = writeln!(
        out,
        "serve: listen {}, endpoints /auth_request (nginx) and /forward_auth (Traefik, Caddy)",
        listeners.join(" and "),
    );
    let gateways = table
        .gateways
        .clone()
        .unwrap_or_else(|| DEFAULT_GATEWAYS.map(str::to_owned).to_vec());
    let _ = writeln!(
        out,
        "  client address: {} from gateways {}{}",
        table.client_header.as_deref().unwrap_or("x-forwarded-for"),
        gateways.join(", "),
        if table.socket.is_some() {
            " and the Unix socket"
        } else {
            ""
        },
    );
    if let (Some(table), Some(envoy)) = (&table.envoy, &serve.envoy) {
        let settings = table.settings();
        let _ = writeln!(
            out,
            "  envoy: {}, failure mode {:?}, deadline {:?}",
            crate::envoy::PATH_PREFIX,
            settings.failure_mode,
            settings.deadline,
        );
        for (domain, file) in envoy.domains() {
            let placement = match envoy.placement(&domain).unwrap_or_default() {
                Placement::PerDescriptor => {
                    "per_descriptor: each descriptor decided on its own, its counter in a slot of \
                     its own"
                }
                Placement::AllOrNothing => {
                    "all_or_nothing: a request's descriptors decided together, every counter in \
                     the domain's slot"
                }
            };
            let _ = writeln!(
                out,
                "    domain {domain} ({}), placement {placement}",
                file.display()
            );
        }
    }
    if let Some(quota) = &serve.quota {
        describe_quota(out, quota);
    }
    describe_listener(
        out,
        &serve.connections,
        table.access_log,
        table.admin,
        &serve.admin_access,
    );
}

/// The quota service's domains, each with its file and how many bucket rules it has.
fn describe_quota(out: &mut String, quota: &crate::envoy::quota::QuotaService) {
    let _ = writeln!(
        out,
        "  envoy quota service: {}",
        crate::envoy::quota::QUOTA_PATH_PREFIX
    );
    for (domain, file, rules) in quota.domains() {
        let _ = writeln!(
            out,
            "    domain {domain} ({}): {rules} bucket rules",
            file.display()
        );
    }
}

fn describe_listener(
    out: &mut String,
    connections: &Connections,
    access_log: AccessLogFormat,
    admin: Option<std::net::SocketAddr>,
    admin_access: &AdminAccess,
) {
    let _ = writeln!(
        out,
        "  connections: at most {} on {} workers, header timeout {}, idle timeout {}, drain delay {}, drain timeout {}",
        connections.max,
        connections.workers,
        human(connections.header_timeout),
        human(connections.idle_timeout),
        human(connections.drain_delay),
        human(connections.drain_timeout),
    );
    let access_log = format!("{access_log:?}").to_lowercase();
    let _ = writeln!(out, "  access log: {access_log}");
    match admin {
        Some(admin) => {
            let _ = writeln!(
                out,
                "  admin: http://{admin} (/healthz, /readyz, /metrics; {})",
                admin_access.describe()
            );
        }
        None => out.push_str("  admin: none\n"),
    }
}

fn describe_proxy(out: &mut String, proxy: &proxy::Loaded) {
    let table = &proxy.table;
    let connections = &proxy.connections;
    let _ = writeln!(
        out,
        "proxy: listen http://{}, upstream {}, upstream timeout {}",
        table.listen,
        redact_url(&table.upstream),
        human(proxy.upstream_timeout),
    );
    describe_listener(
        out,
        connections,
        table.access_log,
        table.admin,
        &proxy.admin_access,
    );
    if let Some(websockets) = &table.websockets {
        let _ = writeln!(
            out,
            "  websockets: at most {} open per key, key {}",
            websockets.max_per_key,
            key(&websockets.key)
        );
    }
}

fn describe_limits(out: &mut String, limits: &LimitsConfig, built: &Limits) {
    if limits.stores.is_empty() {
        out.push_str("stores: none named: counts are kept in process (one instance)\n");
    } else {
        out.push_str("stores:\n");
        for (name, store) in &limits.stores {
            let _ = writeln!(out, "  {name}: {}", self::store(store));
        }
    }
    out.push_str("policies:\n");
    for (name, policy) in &limits.policies {
        let rules: Vec<String> = policy.rules.iter().map(rule).collect();
        let global = if policy.global {
            // The windows it is allotted in, from a route's layer of it (none: no route uses it).
            let windows = limits
                .routes
                .iter()
                .filter(|(_, route)| route.policy == *name)
                .find_map(|(route, _)| built.layer(route)?.policy().global_windows());
            global(policy, windows)
        } else {
            String::new()
        };
        let _ = writeln!(out, "  {name}: {}{global}", rules.join("; "));
    }
    out.push_str("routes (matched on the normalised path):\n");
    for (name, route) in &limits.routes {
        let _ = writeln!(out, "  {name}: {}", self::route(route, limits.shadow));
    }
    if !limits.concurrency.is_empty() {
        out.push_str("concurrency limits:\n");
        for (name, limit) in &limits.concurrency {
            let _ = writeln!(
                out,
                "  {name}: paths {:?}, at most {} in flight per key, key {}",
                limit.paths,
                limit.max_in_flight,
                key(&limit.key)
            );
        }
    }
}

/// A route in the file's words: its paths, policy and key, then every setting it runs with that
/// is not the default.
fn route(route: &RouteConfig, shadow_by_default: bool) -> String {
    let mut text = format!(
        "paths {:?}, policy {}, key {}",
        route.paths,
        route.policy,
        key(&route.key)
    );
    if let Some(store) = &route.store {
        let _ = write!(text, ", store {store}");
    }
    if !route.plans.is_empty() {
        let plans: Vec<String> = route
            .plans
            .iter()
            .map(|(plan, policy)| format!("{plan} = {policy}"))
            .collect();
        let _ = write!(text, ", plans {{ {} }}", plans.join(", "));
    }
    if let Some(header) = &route.plan_header {
        let _ = write!(text, ", plan_header {header}");
    }
    if let Some(mode) = route.failure_mode {
        let _ = write!(
            text,
            ", failure_mode {}",
            format!("{mode:?}").to_lowercase()
        );
    }
    if let Some(deadline) = route.deadline {
        let _ = write!(text, ", deadline {}", human(deadline));
    }
    if let Some(cost) = route.cost {
        let _ = write!(text, ", cost {cost}");
    }
    if let Some(max_delay) = route.max_delay {
        let _ = write!(text, ", max_delay {}", human(max_delay));
    }
    // A route's own `shadow` wins over the top-level one.
    match (route.shadow, shadow_by_default) {
        (Some(true), _) => text.push_str(", shadow (its own switch)"),
        (None, true) => text.push_str(", shadow (the top-level switch)"),
        _ => {}
    }
    if route.shadow_headers {
        text.push_str(", shadow_headers");
    }
    text
}

fn store(store: &StoreConfig) -> String {
    let mut text = store.kind.to_string();
    let urls: Vec<String> = [
        store.url.iter().cloned().collect::<Vec<_>>(),
        store.nodes.clone().unwrap_or_default(),
        store.sentinels.clone().unwrap_or_default(),
    ]
    .concat()
    .iter()
    .map(|url| redact_url(url))
    .collect();
    if !urls.is_empty() {
        let _ = write!(text, " {}", urls.join(", "));
    }
    if let Some(master) = &store.master {
        let _ = write!(text, ", master {master}");
    }
    if let Some(tls) = &store.tls {
        let _ = write!(text, ", tls: {}", tls.describe());
    }
    if let Some(region) = &store.region {
        let ledger = &region.ledger;
        let urls: Vec<String> = [
            ledger.url.iter().cloned().collect::<Vec<_>>(),
            ledger.sentinels.clone().unwrap_or_default(),
        ]
        .concat()
        .iter()
        .map(|url| redact_url(url))
        .collect();
        let partition = match region.partition.unwrap_or_default() {
            PartitionMode::Refuse => "refuse".to_owned(),
            PartitionMode::Emergency { fraction } => format!("emergency {fraction}"),
            _ => "other".to_owned(),
        };
        let _ = write!(
            text,
            ", region {} (ledger {}, partition {partition}, max_skew {})",
            region.name,
            urls.join(", "),
            region
                .max_skew
                .map_or_else(|| "the default".to_owned(), human)
        );
    }
    text
}

/// A rule in the file's words: `api: gcra, limit 10 per 1s, burst 20`, with every setting the
/// store runs (a sliding window's sub-intervals, default or not).
/// What a global policy of one rule is held to worldwide, allotted in `windows` a period (see
/// `docs/regions.md`).
fn global(policy: &PolicyConfig, windows: Option<u32>) -> String {
    let bound = match (policy.rules.first(), windows) {
        (Some(rule), Some(windows)) => {
            let window = human(rule.period / windows);
            match rule.algorithm {
                Algorithm::FixedWindow => format!("at most {} a window", rule.limit),
                Algorithm::SlidingWindow { .. } => format!(
                    "allotted in windows of {window}: at most {} in any {windows} consecutive",
                    rule.limit
                ),
                _ => {
                    let burst = rule.burst.unwrap_or(rule.limit);
                    let refill = if rule.limit % windows == 0 {
                        (rule.limit / windows).to_string()
                    } else {
                        format!("{}/{windows}", rule.limit)
                    };
                    format!(
                        "allotted in {windows} windows of {window}: at most {burst} + {refill} × m in \
                         any m consecutive"
                    )
                }
            }
        }
        _ => "used by no route".to_owned(),
    };
    format!(", global (one quota across regions, {bound}; fails closed whatever the failure_mode)")
}

fn rule(rule: &RuleConfig) -> String {
    let mut text = format!(
        "{}: {}, limit {} per {}",
        rule.name,
        rule.algorithm.name(),
        rule.limit,
        human(rule.period)
    );
    if let Some(burst) = rule.burst {
        let _ = write!(text, ", burst {burst}");
    }
    if let Algorithm::SlidingWindow { sub_intervals } = rule.algorithm {
        let sub_intervals = rule.sub_intervals.unwrap_or(sub_intervals);
        let _ = write!(text, ", sub_intervals {sub_intervals}");
    }
    text
}

fn key(key: &KeyConfig) -> String {
    let mut text = if let Some(header) = &key.header {
        format!("header {header}")
    } else if let Some(headers) = &key.headers {
        format!("headers {}", headers.join(" + "))
    } else if let Some(client_ip) = &key.client_ip {
        if client_ip.trusted_proxies.is_empty() {
            "client address".to_owned()
        } else {
            format!(
                "client address behind {}",
                client_ip.trusted_proxies.join(", ")
            )
        }
    } else if key.user_id.is_some() {
        "user id".to_owned()
    } else if let Some(global) = &key.global {
        format!("global {global}")
    } else {
        "none".to_owned()
    };
    if let Some(or) = &key.or {
        let _ = write!(text, ", or {}", self::key(or));
    }
    text
}

fn human(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}
