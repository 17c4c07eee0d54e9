//! [`FleetShares`]: the fleet's capacity and each priority's share of it, as the limits a
//! concurrency limiter is given.

use std::fmt;

use http::request::Parts;

use super::FleetRejection;
use super::builder::Settings;
use crate::admission::NoKeys;
use crate::concurrency::{Busy, Limits};
use crate::key::Key;
use crate::shed::priority::{Classifier, Priority, priority_of};

/// The one slot every request of the fleet shares.
const FLEET_KEY: Key = Key::from_static("fleet");

/// The fleet's capacity, the permits each priority may share, and the classifier.
pub struct FleetShares {
    pub(super) capacity: u32,
    /// Permits each priority may share, by `Priority::index`.
    pub(super) limits: [u32; 4],
    pub(super) classify: Classifier,
}

impl Limits for FleetShares {
    type Rejection = FleetRejection;
    type Keys = NoKeys;
    type Key = ();
    type Class = Priority;
    type Settings = Settings;

    /// The request's priority: the one an outer layer (a utilisation shedder, say) already
    /// decided, else the classifier's, which is then recorded in the extensions, so every layer of
    /// a stack and the handler see the same answer.
    fn classify(&self, parts: &mut Parts) -> Priority {
        priority_of(parts, &*self.classify)
    }

    fn slot_key(&self, (): ()) -> Key {
        FLEET_KEY
    }

    fn limit(&self, priority: Priority) -> u32 {
        self.limits[priority.index()]
    }

    fn capacity(&self) -> u32 {
        self.capacity
    }

    fn refuse(&self, busy: Busy, priority: Priority) -> FleetRejection {
        crate::telemetry::shed("fleet", priority.as_str());
        FleetRejection::Shed { busy, priority }
    }
}

impl fmt::Debug for FleetShares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetShares")
            .field("capacity", &self.capacity)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}
