//! Load shedding: the worker-utilisation shedder's control law and layer, and the fleet shedder.

mod control;
mod fleet;
mod utilization;
