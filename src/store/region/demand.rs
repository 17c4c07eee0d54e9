//! [`Demand`]: the global keys this instance was asked about, and the units asked since its last
//! report, which the mover reports to the region (and, if it moves the region's allotments,
//! acts on).

use std::collections::HashMap;
use std::sync::Mutex;

use super::global_key::{GlobalKey, KeyId};
use super::window::Window;
use crate::sync::lock;

/// Keys asked about, by `GlobalKey::id`.
#[derive(Default)]
pub(crate) struct Demand {
    keys: Mutex<HashMap<KeyId, Asked>>,
}

/// A key and what was asked of it in its latest window.
pub(crate) struct Asked {
    pub(crate) key: GlobalKey,
    pub(crate) window: Window,
    /// Units asked (admitted or refused) in `window` since the last report.
    pub(crate) units: u64,
    /// When this instance was first asked about the key in `window` (µs).
    pub(crate) first_us: u64,
}

impl Demand {
    /// Counts a request of `cost` units of `key` in `window`, at `now_us`.
    pub(crate) fn record(&self, key: &GlobalKey, window: Window, cost: u32, now_us: u64) {
        let mut keys = lock(&self.keys);
        let asked = keys.entry(key.id()).or_insert_with(|| Asked {
            key: key.clone(),
            window,
            units: 0,
            first_us: now_us,
        });
        if asked.window != window {
            // What was asked of the window before and not reported yet is of no use any more.
            asked.window = window;
            asked.units = 0;
            asked.first_us = now_us;
        }
        asked.units += u64::from(cost);
    }

    /// Every key asked about in its window of `now_us` or the one before, with the units asked
    /// since the last report, which start again from zero; keys not asked about since are
    /// forgotten.
    pub(crate) fn report(&self, now_us: u64) -> Vec<Asked> {
        let mut keys = lock(&self.keys);
        keys.retain(|_, asked| {
            asked.window.index + 1 >= Window::at(now_us, asked.window.period_us).index
        });
        keys.values_mut()
            .map(|asked| Asked {
                key: asked.key.clone(),
                window: asked.window,
                units: std::mem::take(&mut asked.units),
                first_us: asked.first_us,
            })
            .collect()
    }
}
