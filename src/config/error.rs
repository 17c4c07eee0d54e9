//! How an error is pinned to the field of a configuration file it is about.

use crate::error::ConfigError;

/// `error` as the error of `field`, or of its setting that `setting` finds the error is about
/// (`routes.api` and a deadline out of range: `routes.api.deadline`).
pub(super) fn at(
    field: &str,
    error: ConfigError,
    setting: impl FnOnce(&ConfigError) -> Option<&'static str>,
) -> ConfigError {
    match setting(&error) {
        Some(setting) => error.at(format!("{field}.{setting}")),
        None => error.at(field),
    }
}

/// `error` as the error of the item of the list at `field` that it names (an invalid network
/// among several), or of the list.
pub(super) fn at_item(field: &str, list: &[String], error: ConfigError) -> ConfigError {
    let named = match &error {
        ConfigError::KeyExtractor(crate::error::KeyConfigError::InvalidNetwork { network }) => {
            list.iter().position(|item| item == network)
        }
        _ => None,
    };
    match named {
        Some(index) => error.at(format!("{field}[{index}]")),
        None => error.at(field),
    }
}

/// The setting of a route or concurrency limit that an error of its layer's builder is about.
pub(super) fn layer_setting(error: &ConfigError) -> Option<&'static str> {
    use crate::error::ConcurrencyConfigError as Concurrency;
    Some(match error {
        ConfigError::DeadlineOutOfRange(_) | ConfigError::FallbackAfterDeadline { .. } => {
            "deadline"
        }
        ConfigError::Concurrency(
            Concurrency::PermitTtlOutOfRange { .. } | Concurrency::RenewalOutOfRange { .. },
        ) => "permit_ttl",
        ConfigError::Concurrency(Concurrency::NoMaxInFlight) => "max_in_flight",
        _ => return None,
    })
}
