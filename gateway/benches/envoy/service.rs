//! Envoy's rate limit service as the Envoy benchmarks run it: over rules written for the run,
//! failing closed with a deadline of a second, the default headers.

use ratelimit_gateway::config::EnvoySettings;
use ratelimit_gateway::envoy::RateLimitService;
use testkit::{BoxError, TempDir};
use tower_redis_ratelimit::HeaderFamilies;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::config::{Format, LimitsConfig};

/// The service over `rules` (file name, YAML), its stores the TOML `stores` (none: in
/// process), and the directory of the files, which must outlive it (a reload reads them).
pub(crate) fn load(
    rules: &[(&str, &str)],
    stores: &str,
) -> Result<(RateLimitService, TempDir), BoxError> {
    let dir = TempDir::new("envoy-bench")?;
    for (name, yaml) in rules {
        std::fs::write(dir.path().join(name), yaml)?;
    }
    let limits = LimitsConfig::parse(stores, Format::Toml)?.build()?;
    let settings = EnvoySettings {
        failure_mode: FailureMode::Closed,
        deadline: std::time::Duration::from_secs(1),
        headers: HeaderFamilies::DEFAULT,
    };
    let service = RateLimitService::load(dir.path(), settings, &limits)?;
    Ok((service, dir))
}
