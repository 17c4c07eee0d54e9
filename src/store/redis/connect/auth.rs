//! [`RedisAuth`]: how a connection authenticates (`AUTH`), where a URL does not say it: the
//! primary of a Sentinel store, whose password is not the sentinels'.

use std::fmt;

/// A user name and password for Redis's `AUTH`, a password alone, or no authentication.
/// Its `Debug` never shows the password.
///
/// ```
/// use tower_redis_ratelimit::store::RedisAuth;
///
/// let auth = RedisAuth::user("limits", "s3cret");
/// assert_eq!(format!("{auth:?}"), r#"RedisAuth { username: Some("limits"), password: "***" }"#);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RedisAuth {
    username: Option<String>,
    password: Option<String>,
}

impl RedisAuth {
    /// No `AUTH`: the server has no password.
    pub fn none() -> Self {
        Self::default()
    }

    /// `AUTH password`: the default user (`requirepass`).
    pub fn password(password: impl Into<String>) -> Self {
        Self {
            username: None,
            password: Some(password.into()),
        }
    }

    /// `AUTH username password`: an ACL user.
    pub fn user(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: Some(username.into()),
            password: Some(password.into()),
        }
    }

    /// `settings` (database and protocol kept) with these credentials in place of theirs.
    pub(in crate::store::redis) fn apply(
        &self,
        settings: &redis::RedisConnectionInfo,
    ) -> redis::RedisConnectionInfo {
        let mut info = redis::RedisConnectionInfo::default()
            .set_db(settings.db())
            .set_protocol(settings.protocol());
        if let Some(username) = &self.username {
            info = info.set_username(username);
        }
        if let Some(password) = &self.password {
            info = info.set_password(password);
        }
        info
    }
}

impl fmt::Debug for RedisAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisAuth")
            .field("username", &self.username)
            .field(
                "password",
                &self.password.as_ref().map_or("none", |_| "***"),
            )
            .finish()
    }
}
