//! Routes (or groups of routes) in a configuration file: which policy limits them, by which key,
//! in which store, and how.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::key::{ClientIpConfig, KeyConfig};
use super::{duration, error, invalid};
use crate::admission::{FailureMode, LayerSettings, MissingKey};
use crate::error::{ConfigError, KeyConfigError, SettingError};
use crate::key::{Exemptions, KeyExtractor};
use crate::policy::{Policy, Rule};
use crate::respond::HeaderFamilies;

/// One route, or a group of routes that share a limit. In TOML:
///
/// ```toml
/// [routes.api]
/// paths = ["/api/"]              # path prefixes it applies to (for the proxy; optional in code)
/// policy = "api"
/// store = "shared"
/// key = { header = "x-api-key" }
/// failure_mode = "closed"        # or "open" (default)
/// missing_key = "reject"         # or "skip"
/// deadline = "50ms"              # default 100ms
/// headers = ["rate_limiting", "ietf"]   # default; [] for none; "x_ratelimit" too
/// cost = 1
/// max_delay = "500ms"            # smooth bursts: wait up to this long rather than refuse
/// shadow = true                  # decide and count, never refuse (default: the top-level shadow)
/// shadow_headers = false         # true: tell a shadow decision as Rate-Limiting-State: Shadow-...
/// plans = { pro = "api-pro" }    # requests of plan "pro" limited by policy "api-pro"
/// plan_header = "x-plan"         # a request's plan, as your gateway or auth layer sets it
/// allow = { keys = ["internal"], networks = ["10.0.0.0/8"] }   # pass unchecked
/// deny = { networks = ["203.0.113.0/24"] }                      # refused, 403
/// client_ip = { trusted_proxies = ["10.0.0.0/8"] }  # how networks find the client address,
///                                                   # when the key is not it
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Path prefixes this route applies to (the gateway's routing, where it is required; a
    /// layer built in code applies where it is layered). A path belongs to every route with a
    /// prefix it starts with: see [`Limits::routes_for`](super::Limits::routes_for).
    #[serde(default)]
    pub paths: Vec<String>,
    /// The name of a policy under `[policies]`.
    pub policy: String,
    /// The name of a store under `[stores]`; may be left out when there is exactly one (or none:
    /// an in-process memory store).
    #[serde(default)]
    pub store: Option<String>,
    /// Who the limit counts against.
    pub key: KeyConfig,
    /// `open` (default) or `closed`: what to do when the store fails.
    #[serde(default)]
    pub failure_mode: Option<FailureMode>,
    /// `reject` (default: 400) or `skip` (pass unchecked): a request without a key.
    #[serde(default)]
    pub missing_key: Option<MissingKey>,
    /// How long to wait for the store (default `"100ms"`).
    #[serde(default, deserialize_with = "duration::optional")]
    pub deadline: Option<Duration>,
    /// Header families to write (default `["rate_limiting", "ietf"]`).
    #[serde(default)]
    pub headers: Option<HeaderFamilies>,
    /// The cost of each request (default 1).
    #[serde(default)]
    pub cost: Option<u32>,
    /// Smooth bursts rather than refuse them, as nginx's `limit_req` without `nodelay`: a request
    /// that would conform within this long (e.g. `"500ms"`, 1 ms to 60 s) waits, then is served;
    /// one that would wait longer is refused as before. Given to every `gcra` and `token_bucket`
    /// rule of the route's policies (see [`Rule::with_max_delay`](crate::Rule::with_max_delay));
    /// their window rules refuse as they do; a route whose policy has no such rule is refused.
    #[serde(default, deserialize_with = "duration::optional")]
    pub max_delay: Option<Duration>,
    /// Plans: a plan name to the name of the policy its requests are limited by (the request's
    /// [`Plan`](crate::rate::Plan) extension says its plan; `policy` is the default).
    #[serde(default)]
    pub plans: BTreeMap<String, String>,
    /// The header that names a request's plan, for a route whose requests carry no
    /// [`Plan`](crate::rate::Plan) extension (the gateway binary, a service whose gateway
    /// authenticates): its value is the plan's name. Only with `plans`. A client that can send this
    /// header itself chooses its own plan: set it in a component the client cannot bypass, one that
    /// removes what the client sent.
    #[serde(default)]
    pub plan_header: Option<String>,
    /// Keys and networks let through unchecked.
    #[serde(default)]
    pub allow: Option<ListConfig>,
    /// Keys and networks refused with 403.
    #[serde(default)]
    pub deny: Option<ListConfig>,
    /// How the networks of `allow` and `deny` find a request's client address when the route's
    /// key is not one (see [`Exemptions::client_ip`]); a route keyed by client address uses its
    /// key's. Only with networks.
    #[serde(default)]
    pub client_ip: Option<ClientIpConfig>,
    /// Shadow mode: decide and count, never refuse (see
    /// [`RateLimitLayerBuilder::shadow`](crate::rate::RateLimitLayerBuilder::shadow)). `true` or
    /// `false` gives the route a switch of its own, whatever the top-level `shadow` says; left
    /// out, the route follows the top-level `shadow` and its switch.
    #[serde(default)]
    pub shadow: Option<bool>,
    /// In shadow mode, tell the client what the route decided (default `false`; see
    /// [`RateLimitLayerBuilder::shadow_headers`](crate::rate::RateLimitLayerBuilder::shadow_headers)).
    #[serde(default)]
    pub shadow_headers: bool,
}

/// An allow or deny list: keys as the route's key extractor makes them, and networks (CIDRs or
/// addresses) matching the client's address.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ListConfig {
    /// Keys.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Networks.
    #[serde(default)]
    pub networks: Vec<String>,
}

/// The settings a route and a concurrency limit share, applied to their layer's builder.
pub(super) fn admission<R>(
    settings: &mut LayerSettings<R>,
    failure_mode: Option<FailureMode>,
    missing_key: Option<MissingKey>,
    deadline: Option<Duration>,
    headers: Option<HeaderFamilies>,
) {
    if let Some(mode) = failure_mode {
        settings.failure = mode;
    }
    if let Some(missing) = missing_key {
        settings.missing_key = missing;
    }
    if let Some(deadline) = deadline {
        settings.deadline = deadline;
    }
    if let Some(families) = headers {
        settings.headers = families;
    }
}

/// `policy` with `max_delay`, if any, given to each of its GCRA and token-bucket rules (the
/// window rules have no schedule to queue a request in, and refuse as they do). An error when it
/// has none, or the delay does not fit a rule.
pub(super) fn delayed(policy: &Policy, max_delay: Option<Duration>) -> Result<Policy, ConfigError> {
    let Some(max_delay) = max_delay else {
        return Ok(policy.clone());
    };
    let scheduled = |rule: &Rule| rule.algorithm().uses_burst();
    if !policy.rules().iter().any(scheduled) {
        return Err(ConfigError::DelayNotScheduled {
            rule: policy.rules()[0].name().to_owned(),
        });
    }
    let rules = policy.rules().iter().map(|rule| match scheduled(rule) {
        true => rule.clone().with_max_delay(max_delay),
        false => rule.clone(),
    });
    Policy::of(rules.collect(), policy.is_global())
}

/// The error of a route's `max_delay` (at `field`) on its policy named `policy`, in the file's
/// words.
pub(super) fn delay_error(field: &str, policy: &str, error: ConfigError) -> ConfigError {
    let field = format!("{field}.max_delay");
    match error {
        ConfigError::DelayNotScheduled { .. } => invalid(
            field,
            SettingError::NothingToDelay {
                policy: policy.to_owned(),
            },
        ),
        error => error.at(field),
    }
}

/// The allow and deny lists of `route` (at `field`), keyed by `key`; their mistakes named by
/// field.
pub(super) fn exemptions(
    route: &RouteConfig,
    field: &str,
    key: &dyn KeyExtractor,
) -> Result<Exemptions, ConfigError> {
    let mut exemptions = Exemptions::new();
    let mut networks = None;
    for (name, list) in [("allow", &route.allow), ("deny", &route.deny)] {
        let Some(list) = list else { continue };
        let at = format!("{field}.{name}.networks");
        for listed in &list.keys {
            exemptions = match name {
                "allow" => exemptions.allow_key(listed.as_str()),
                _ => exemptions.deny_key(listed.as_str()),
            };
        }
        let listed = list.networks.iter().map(String::as_str);
        exemptions = match name {
            "allow" => exemptions.allow_networks(listed),
            _ => exemptions.deny_networks(listed),
        };
        exemptions
            .validate()
            .map_err(|err| error::at_item(&at, &list.networks, err))?;
        if networks.is_none() && !list.networks.is_empty() {
            networks = Some(at);
        }
    }
    match (networks, &route.client_ip) {
        (Some(_), Some(client)) => {
            Ok(exemptions.client_ip(client.build(&format!("{field}.client_ip"))?))
        }
        (Some(at), None) if key.client_ip().is_none() => {
            Err(invalid(at, KeyConfigError::NetworksWithoutClientIp))
        }
        (None, Some(_)) => Err(invalid(
            format!("{field}.client_ip"),
            KeyConfigError::ClientIpWithoutNetworks,
        )),
        _ => Ok(exemptions),
    }
}
