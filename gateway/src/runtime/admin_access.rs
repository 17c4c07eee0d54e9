//! Who may reset limits on the admin address: whoever reaches a loopback address (a process on
//! the same host, as for a Unix socket), or, on an address beyond loopback, only a caller that
//! sends the file's `admin_token` as `Authorization: Bearer`. The probes (`/healthz`,
//! `/readyz`, `/metrics`) stay open: load balancers and Prometheus send no token, and they
//! change nothing.

use std::net::SocketAddr;

use http::HeaderMap;
use http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

use crate::config::FieldError;

/// The shortest token taken: one that cannot be guessed in the requests an attacker can send.
const MIN_TOKEN_LENGTH: usize = 16;

/// The admin address's rule for `POST /reset`.
#[derive(Clone)]
pub struct AdminAccess {
    /// The token's digest: compared with the digest of what a caller sends, so that the
    /// comparison takes the same time whatever the token's length and however much matches.
    token: Option<[u8; 32]>,
}

impl std::fmt::Debug for AdminAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token, nor its digest (a digest of a short token can be reversed).
        f.debug_struct("AdminAccess")
            .field("token", &self.token.map(|_| "***"))
            .finish()
    }
}

impl AdminAccess {
    /// The rule of the admin address `admin` of the table `table` (`proxy`, `serve`) with its
    /// `admin_token`; an address beyond loopback without a token is refused, naming the field.
    pub fn new(
        table: &str,
        admin: Option<SocketAddr>,
        token: Option<&str>,
    ) -> Result<AdminAccess, FieldError> {
        let field = || format!("{table}.admin_token");
        if let Some(token) = token
            && token.trim().len() < MIN_TOKEN_LENGTH
        {
            return Err(FieldError::new(
                field(),
                format!(
                    "at least {MIN_TOKEN_LENGTH} characters (e.g. `openssl rand -hex 32`), given \
                     from the environment as \"${{RATELIMIT_ADMIN_TOKEN}}\""
                ),
            ));
        }
        if let Some(admin) = admin
            && !admin.ip().is_loopback()
            && token.is_none()
        {
            return Err(FieldError::new(
                field(),
                format!(
                    "required because `{table}.admin` ({admin}) listens beyond loopback, where \
                     anyone who reaches it could reset limits: set `admin_token = \
                     \"${{RATELIMIT_ADMIN_TOKEN}}\"` (at least {MIN_TOKEN_LENGTH} characters, \
                     from the environment), or listen on 127.0.0.1"
                ),
            ));
        }
        Ok(AdminAccess {
            token: token.map(|token| Sha256::digest(token.trim().as_bytes()).into()),
        })
    }

    /// Who may `POST /reset`, in words for `check`.
    pub fn describe(&self) -> &'static str {
        if self.token.is_some() {
            "POST /reset with the admin_token as a bearer token"
        } else {
            "POST /reset by anyone who reaches this loopback address (no admin_token)"
        }
    }

    /// Whether a request with `headers` may reset: any, without a token; with one, only a
    /// request that sends it as `Authorization: Bearer <token>`.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        // The scheme's name is case-insensitive (RFC 9110, section 11.1).
        let sent = headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map_or("", |(_, token)| token);
        let sent: [u8; 32] = Sha256::digest(sent.trim().as_bytes()).into();
        // Every byte compared, whatever differs first.
        sent.iter()
            .zip(token)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, authorization.parse().unwrap());
        headers
    }

    #[test]
    fn beyond_loopback_a_token_is_required_and_then_only_it_is_taken() {
        let loopback = "127.0.0.1:9000".parse().ok();
        let open = AdminAccess::new("proxy", loopback, None).unwrap();
        assert!(open.allows(&HeaderMap::new()));

        let everywhere = "0.0.0.0:9000".parse().ok();
        let refused = AdminAccess::new("proxy", everywhere, None).unwrap_err();
        assert_eq!(refused.field, "proxy.admin_token");
        let short = AdminAccess::new("serve", loopback, Some("secret")).unwrap_err();
        assert_eq!(short.field, "serve.admin_token");

        let token = "0123456789abcdef0123";
        let guarded = AdminAccess::new("proxy", everywhere, Some(token)).unwrap();
        assert!(guarded.allows(&headers(&format!("Bearer {token}"))));
        assert!(guarded.allows(&headers(&format!("bearer {token}"))));
        for wrong in [
            String::new(),
            format!("Bearer {token}x"),
            format!("Basic {token}"),
            token.to_owned(),
            "Bearer ".to_owned(),
        ] {
            let sent = if wrong.is_empty() {
                HeaderMap::new()
            } else {
                headers(&wrong)
            };
            assert!(!guarded.allows(&sent), "{wrong:?}");
        }
        assert!(!format!("{guarded:?}").contains(token));
    }
}
