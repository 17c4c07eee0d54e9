//! [`FleetShares`]: the fleet's capacity and each priority's share of it, as the limits a
//! concurrency limiter is given.

use std::fmt;

use http::request::Parts;

use super::FleetShedRejection;
use crate::admission::Sealed;
use crate::concurrency::{Busy, SlotLimit};
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

impl Sealed for FleetShares {}

impl SlotLimit for FleetShares {
    type Rejection = FleetShedRejection;
    type Class = Priority;

    /// The request's priority: the one an outer layer (a utilisation shedder, say) already
    /// decided, else the classifier's, which is then recorded in the extensions, so every layer of
    /// a stack and the handler see the same answer.
    fn classify(&self, parts: &mut Parts) -> Priority {
        priority_of(parts, &*self.classify)
    }

    fn slot_key(&self, _: Key) -> Key {
        FLEET_KEY
    }

    fn limit(&self, priority: Priority) -> u32 {
        self.limits[priority.index()]
    }

    fn capacity(&self) -> u32 {
        self.capacity
    }

    fn refuse(&self, busy: Busy, priority: Priority) -> FleetShedRejection {
        crate::telemetry::shed("fleet", priority.as_str());
        FleetShedRejection::Shed { busy, priority }
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
