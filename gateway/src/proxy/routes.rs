//! [`Routes`]: the services of one loaded configuration, built when it is loaded, and the one
//! a request goes through.

use axum::body::Body;
use http::Request;

use super::forward::Forward;
use super::headers::is_upgrade;
use super::load::Loaded;
use crate::config::StartOnlyField;
use crate::runtime::{Boxed, PathServices, Stack, StartOnly, behind};

/// The services of one configuration: the upstream behind each path's limits.
pub(crate) struct Routes {
    pub(crate) loaded: Loaded,
    plain: PathServices,
    /// For an upgrade (a WebSocket) when the file limits them: the upstream behind the
    /// WebSocket limit, behind each path's limits.
    upgrades: Option<PathServices>,
}

impl Routes {
    /// The upstream behind each path prefix's routes and concurrency limits (rate limits
    /// outermost: refusing is cheapest there).
    ///
    /// For an upgrade, the WebSocket limit is innermost so that its permit is the one the
    /// request carries to [`Forward`], which holds it for the tunnel's life (the request
    /// extensions keep one permit, the last inserted); a path's concurrency slots end with the
    /// `101` answer.
    pub(crate) fn new(loaded: Loaded, forward: &Forward) -> Self {
        let upstream = Boxed::new(forward.clone());
        let build = |base: &Boxed| PathServices::build(&loaded.limits, &loaded.keys, base, true);
        let plain = build(&upstream);
        let upgrades = loaded
            .websockets
            .as_ref()
            .map(|limit| build(&behind(limit, upstream.clone())));
        Self {
            loaded,
            plain,
            upgrades,
        }
    }

    /// The stack `request` (its path normalised) goes through.
    pub(crate) fn stack(&self, request: &Request<Body>) -> &Stack {
        let services = match &self.upgrades {
            Some(upgrades) if is_upgrade(request) => upgrades,
            _ => &self.plain,
        };
        services.for_path(request.uri().path())
    }
}

impl StartOnly for Routes {
    fn start_only(&self) -> Vec<StartOnlyField> {
        self.loaded.table.start_only()
    }
}
