//! The limits and the requests of the Envoy benchmarks, shared by `envoy` (requests per second
//! under load) and `envoy_cost` (instructions per request), so that both measure the same work.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;

/// The limits: `allowed` admits everything (a billion an hour per key), `denied` admits one
/// request per user an hour, so all but the first of each user are refused.
pub(crate) const RULES: [(&str, &str); 2] = [
    (
        "allowed.yaml",
        "domain: allowed\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 1000000000 }\n  - key: route\n    rate_limit: { unit: hour, requests_per_unit: 1000000000 }\n  - key: tenant\n    rate_limit: { unit: hour, requests_per_unit: 1000000000 }\n",
    ),
    (
        "denied.yaml",
        "domain: denied\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n  - key: route\n    rate_limit: { unit: hour, requests_per_unit: 1000000000 }\n  - key: tenant\n    rate_limit: { unit: hour, requests_per_unit: 1000000000 }\n",
    ),
];

/// Users the allowed requests cycle through, and the denied ones.
pub(crate) const ALLOWED_USERS: u64 = 10_000;
pub(crate) const DENIED_USERS: u64 = 16;

/// The `n`th request to the domain `denied` (or `allowed`), of `descriptors` descriptors: the
/// user, then a route and a tenant, each a descriptor of one entry.
pub(crate) fn request(denied: bool, descriptors: usize, n: u64) -> RateLimitRequest {
    let (domain, users) = match denied {
        true => ("denied", DENIED_USERS),
        false => ("allowed", ALLOWED_USERS),
    };
    let user = n % users;
    let entries = [
        ("user", format!("user-{user}")),
        ("route", format!("/route/{}", user % 10)),
        ("tenant", format!("tenant-{}", user % 100)),
    ];
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: entries[..descriptors]
            .iter()
            .map(|(key, value)| RateLimitDescriptor {
                entries: vec![Entry {
                    key: (*key).to_owned(),
                    value: value.clone(),
                }],
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend: 0,
    }
}
