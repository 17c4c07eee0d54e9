//! The shadow switches of built limits, and what a rebuild keeps of them.

use std::collections::BTreeMap;

use super::LimitsConfig;
use crate::rate::ShadowSwitch;

/// The shadow switches of built limits, each with the file's setting it was built from: the
/// top-level `shadow`, whose switch every route that does not set its own follows, and one
/// switch per route that sets `shadow` itself.
///
/// A rebuild (a reload of the file) keeps a switch whose setting the file did not change, in
/// whatever position it was turned to at run time, and starts the others as the file now says:
/// an operator's run-time choice lasts until the file itself says otherwise.
#[derive(Clone, Debug)]
pub(super) struct Shadows {
    all: (bool, ShadowSwitch),
    routes: BTreeMap<String, (bool, ShadowSwitch)>,
}

impl Shadows {
    /// The switches of `config`, keeping those of `previous` whose setting is unchanged.
    pub(super) fn new(config: &LimitsConfig, previous: Option<&Shadows>) -> Self {
        let switch = |setting: bool, previous: Option<&(bool, ShadowSwitch)>| {
            let switch = match previous {
                Some((was, switch)) if *was == setting => switch.clone(),
                _ => ShadowSwitch::new(setting),
            };
            (setting, switch)
        };
        let all = switch(config.shadow, previous.map(|previous| &previous.all));
        let routes = config
            .routes
            .iter()
            .filter_map(|(name, route)| {
                let setting = route.shadow?;
                let kept = previous.and_then(|previous| previous.routes.get(name));
                Some((name.clone(), switch(setting, kept)))
            })
            .collect();
        Self { all, routes }
    }

    /// The switch of the routes that do not set their own `shadow`.
    pub(super) fn all(&self) -> &ShadowSwitch {
        &self.all.1
    }

    /// The switch of the route named `name`: its own, or the one of all the others.
    pub(super) fn route(&self, name: &str) -> &ShadowSwitch {
        self.routes
            .get(name)
            .map_or(self.all(), |(_, switch)| switch)
    }
}
