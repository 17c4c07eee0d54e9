//! The caller's time budget: how long Envoy waits for an answer (its filter's `timeout`, sent as
//! the request's `grpc-timeout` header), and the store deadline it leaves.
//!
//! When Envoy gives up first, Envoy's own `failure_mode_deny` decides, not the service's
//! `failure_mode`: a service failing closed would let every request through while its store
//! hangs, behind an Envoy failing open. So the store gets at most half of the caller's
//! budget, the other half left for the answer to travel back (and for the time the request
//! spent travelling here, which the header does not count): `failure_mode` is applied, and its
//! answer arrives, before the caller stops waiting, whatever either side was configured with.

use std::time::Duration;

/// The header of gRPC's deadline ("gRPC over HTTP2": `TimeoutValue TimeoutUnit`).
pub(super) const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The store deadline of a request: the configured one, or half of the caller's `grpc-timeout`
/// when that is shorter.
pub(super) fn store_deadline(configured: Duration, grpc_timeout: Option<Duration>) -> Duration {
    match grpc_timeout {
        Some(budget) => configured.min(budget / 2),
        None => configured,
    }
}

/// A `grpc-timeout` value: at most eight digits, then a unit (`H`ours, `M`inutes, `S`econds,
/// `m`illiseconds, `u` microseconds, `n`anoseconds). Anything else is no budget at all (`None`),
/// as gRPC servers treat a value they cannot read: the configured deadline applies.
pub(super) fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let digits = value.get(..value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Eight digits at most: no unit below overflows a u64.
    let amount: u64 = digits.parse().ok()?;
    Some(match &value[digits.len()..] {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_of_the_grpc_spec_is_read() {
        for (value, duration) in [
            ("2H", Duration::from_secs(7200)),
            ("3M", Duration::from_secs(180)),
            ("4S", Duration::from_secs(4)),
            ("250m", Duration::from_millis(250)),
            ("20m", Duration::from_millis(20)),
            ("1500u", Duration::from_micros(1500)),
            ("99999999n", Duration::from_nanos(99_999_999)),
            ("0m", Duration::ZERO),
            ("00000007S", Duration::from_secs(7)),
        ] {
            assert_eq!(parse_grpc_timeout(value), Some(duration), "{value}");
        }
    }

    #[test]
    fn a_bad_value_is_no_budget() {
        for value in [
            "",
            "m",
            "250",
            "250ms",
            "2.5S",
            "-1S",
            "+1S",
            " 1S",
            "1S ",
            "1s",
            "1h",
            "1x",
            // Nine digits: over the spec's eight.
            "123456789m",
            "1 m",
            "１S",
            "é",
        ] {
            assert_eq!(parse_grpc_timeout(value), None, "{value:?}");
        }
    }

    #[test]
    fn the_store_gets_at_most_half_of_the_callers_budget() {
        let configured = Duration::from_millis(100);
        // Envoy's documented 0.25 s: the configured deadline is already under half of it.
        let envoy = Some(Duration::from_millis(250));
        assert_eq!(store_deadline(configured, envoy), configured);
        // A filter timeout equal to the deadline, and Envoy's default of 20 ms: half.
        let same = Some(Duration::from_millis(100));
        assert_eq!(store_deadline(configured, same), Duration::from_millis(50));
        let default = Some(Duration::from_millis(20));
        assert_eq!(
            store_deadline(configured, default),
            Duration::from_millis(10)
        );
        assert_eq!(store_deadline(configured, None), configured);
    }
}
