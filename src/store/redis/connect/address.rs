//! How a Redis address is shown (without its password) and how bad ones are reported.

use deadpool_redis::{ConnectionAddr, ConnectionInfo, ProtocolVersion};

use crate::error::{ConfigError, StoreConfigError};

/// The connection settings of `url` (`setting` names it in errors). A `rediss://` URL in a build
/// without the `tls` feature is told so, rather than as redis-rs's "feature is not enabled".
pub(in crate::store::redis) fn parse(
    url: &str,
    setting: &'static str,
) -> Result<redis::ConnectionInfo, ConfigError> {
    use redis::IntoConnectionInfo;

    url.into_connection_info()
        .map_err(|err| refusal(url, setting, err.to_string(), cfg!(feature = "tls")))
}

/// Why `url` (of `setting`) does not parse, redis-rs saying `reason`: in a build without the
/// `tls` feature (`tls_built` false), a `rediss://` URL is told the feature it needs.
pub(in crate::store::redis) fn refusal(
    url: &str,
    setting: &'static str,
    reason: String,
    tls_built: bool,
) -> ConfigError {
    let shown = redact_url(url);
    let tls = url
        .get(..9)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("rediss://"));
    if tls && !tls_built {
        return StoreConfigError::TlsFeature { address: shown }.into();
    }
    StoreConfigError::InvalidUrl {
        setting,
        url: shown,
        reason,
    }
    .into()
}

/// The connection settings of every URL of `urls` (the nodes of a cluster, the sentinels of a
/// primary: `setting` names them in errors), with `tls`'s certificates, and how to show them
/// all without passwords.
#[cfg(any(feature = "cluster", feature = "sentinel"))]
pub(in crate::store::redis) fn parse_all(
    urls: &[String],
    setting: &'static str,
    tls: Option<&super::tls::RedisTls>,
) -> Result<(Vec<redis::ConnectionInfo>, String), ConfigError> {
    if urls.is_empty() {
        return Err(StoreConfigError::NoUrls { setting }.into());
    }
    let infos = urls
        .iter()
        .map(|url| super::tls::secure(parse(url, setting)?, tls, &redact_url(url)))
        .collect::<Result<Vec<_>, _>>()?;
    let shown = urls
        .iter()
        .map(|url| redact_url(url))
        .collect::<Vec<_>>()
        .join(",");
    Ok((infos, shown))
}

/// `url` without its password, for logs, errors and anything else printed: the password of
/// the user information, and the `pass` (or `password`) parameter of a Unix socket URL, become
/// `***`. One function for every URL shown, so that none is shown another way.
///
/// ```
/// use tower_redis_ratelimit::store::redact_url;
///
/// assert_eq!(redact_url("redis://app:s3cret@redis:6379/2"), "redis://app:***@redis:6379/2");
/// assert_eq!(redact_url("redis+unix:///run/redis.sock?pass=s3cret"), "redis+unix:///run/redis.sock?pass=***");
/// assert_eq!(redact_url("http://127.0.0.1:3000"), "http://127.0.0.1:3000");
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let shown = match rest.rfind('@') {
        Some(at) => match rest[..at].split_once(':') {
            Some((user, _)) => format!("{scheme}{user}:***{}", &rest[at..]),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    };
    let Some((base, query)) = shown.split_once('?') else {
        return shown;
    };
    let (query, fragment) = match query.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (query, None),
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key @ ("pass" | "password"), _)) => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    let mut redacted = format!("{base}?{}", query.join("&"));
    if let Some(fragment) = fragment {
        redacted = format!("{redacted}#{fragment}");
    }
    redacted
}

/// Connection settings as a URL for logs, the password shown as `***`:
/// `redis://[user:***@]host:port/db`, `rediss://…` for TLS, `redis+unix:///path?db=N…`.
pub(in crate::store::redis) fn describe(info: &ConnectionInfo) -> String {
    let redis = &info.redis;
    let resp3 = redis.protocol == ProtocolVersion::RESP3;
    let host_port = |host: &str, port: u16| {
        if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        }
    };
    let credentials = match (&redis.username, &redis.password) {
        (Some(user), Some(_)) => format!("{user}:***@"),
        (Some(user), None) => format!("{user}@"),
        (None, Some(_)) => ":***@".to_owned(),
        (None, None) => String::new(),
    };
    let protocol = if resp3 { "?protocol=resp3" } else { "" };
    match &info.addr {
        ConnectionAddr::Tcp(host, port) => format!(
            "redis://{credentials}{}/{}{protocol}",
            host_port(host, *port),
            redis.db
        ),
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
        } => format!(
            "rediss://{credentials}{}/{}{protocol}{}",
            host_port(host, *port),
            redis.db,
            if *insecure { "#insecure" } else { "" }
        ),
        ConnectionAddr::Unix(path) => {
            let mut url = format!("redis+unix://{}?db={}", path.display(), redis.db);
            if let Some(user) = &redis.username {
                url.push_str(&format!("&user={user}"));
            }
            if redis.password.is_some() {
                url.push_str("&pass=***");
            }
            if resp3 {
                url.push_str("&protocol=resp3");
            }
            url
        }
    }
}
