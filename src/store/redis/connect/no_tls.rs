//! A build without the `tls` feature: no store can be given certificates, and a `rediss://`
//! address is refused at `build`, naming the feature that reaches it.

use crate::error::{ConfigError, StoreConfigError};

/// Certificates cannot be given without the `tls` feature: no value of this type exists.
pub(in crate::store::redis) enum RedisTls {}

/// `info` itself; a TLS address is refused, naming the feature.
pub(in crate::store::redis) fn secure(
    info: redis::ConnectionInfo,
    _: Option<&RedisTls>,
    shown: &str,
) -> Result<redis::ConnectionInfo, ConfigError> {
    match info.addr() {
        redis::ConnectionAddr::TcpTls { .. } => Err(StoreConfigError::TlsFeature {
            address: shown.to_owned(),
        }
        .into()),
        _ => Ok(info),
    }
}
