//! [`Entry`]: the entry points of `lua/`, and the scripts composed of them for the scripts
//! dialect.

use std::sync::OnceLock;

/// The shared helpers every algorithm and most entry points use (`lua/common.lua`).
pub(super) const COMMON: &str = include_str!("../../../../lua/common.lua");

/// Each algorithm (`lua/<algorithm>.lua`), defining its entry of `ALGORITHMS`, in the order of
/// their script ids (`Params::script_id`: bit `id - 1` of an algorithm set).
pub(super) const ALGORITHMS: [&str; 5] = [
    include_str!("../../../../lua/fixed_window.lua"),
    include_str!("../../../../lua/gcra.lua"),
    include_str!("../../../../lua/sliding_log.lua"),
    include_str!("../../../../lua/sliding_window.lua"),
    include_str!("../../../../lua/token_bucket.lua"),
];

/// Every algorithm, as an algorithm set.
pub(super) const EVERY_ALGORITHM: u8 = 0b1_1111;

/// An entry point: one kind of call, with the KEYS/ARGV/reply contract its file opens with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::store) enum Entry {
    /// Rate-limit decisions of one policy (`lua/decide.lua`).
    Decide,
    /// A quota lease (`lua/grant.lua`).
    Grant,
    /// Unspent units of a quota lease given back (`lua/refund.lua`).
    Refund,
    /// A client's state deleted, and the reset published (`lua/reset.lua`).
    Reset,
    /// A concurrency permit acquired, released or renewed (`lua/concurrency.lua`).
    Concurrency,
    /// A region's allotments of a global policy spent, applied, surrendered or read
    /// (`lua/region.lua`).
    Region,
    /// The ledger of global policies: allotments taken and credited, a ledger declared
    /// (`lua/ledger.lua`).
    Ledger,
    /// A quota service's shares of a bucket settled or left (`lua/shares.lua`).
    Shares,
}

/// An entry point's script: its code (what `SCRIPT LOAD` is sent) and its SHA-1 (what
/// `EVALSHA` names).
pub(super) struct Composed {
    pub(super) hash: String,
    pub(super) code: String,
}

impl Entry {
    /// Every entry point, in the library's order.
    pub(super) const ALL: [Entry; 8] = [
        Entry::Decide,
        Entry::Grant,
        Entry::Refund,
        Entry::Reset,
        Entry::Concurrency,
        Entry::Region,
        Entry::Ledger,
        Entry::Shares,
    ];

    /// The entry point's file.
    pub(super) fn source(self) -> &'static str {
        match self {
            Entry::Decide => include_str!("../../../../lua/decide.lua"),
            Entry::Grant => include_str!("../../../../lua/grant.lua"),
            Entry::Refund => include_str!("../../../../lua/refund.lua"),
            Entry::Reset => include_str!("../../../../lua/reset.lua"),
            Entry::Concurrency => include_str!("../../../../lua/concurrency.lua"),
            Entry::Region => include_str!("../../../../lua/region.lua"),
            Entry::Ledger => include_str!("../../../../lua/ledger.lua"),
            Entry::Shares => include_str!("../../../../lua/shares.lua"),
        }
    }

    /// The last word of its function's name in the library.
    pub(super) fn name(self) -> &'static str {
        match self {
            Entry::Decide => "decide",
            Entry::Grant => "grant",
            Entry::Refund => "refund",
            Entry::Reset => "reset",
            Entry::Concurrency => "concurrency",
            Entry::Region => "region",
            Entry::Ledger => "ledger",
            Entry::Shares => "shares",
        }
    }

    /// Whether its script needs the helpers and the algorithms before it (the others stand
    /// alone).
    fn calls_algorithms(self) -> bool {
        matches!(self, Entry::Decide | Entry::Grant | Entry::Refund)
    }

    /// The script of this entry point for calls whose rules use the algorithm set `algorithms`
    /// (bit `id - 1` per algorithm; ignored by entry points that call none), made on first use.
    /// A decision's script holds only its policy's algorithms: at most 31 sets. A grant may be
    /// sent any leasable policy, and holds them all.
    pub(super) fn script(self, algorithms: u8) -> &'static Composed {
        static DECIDE: [OnceLock<Composed>; 32] = [const { OnceLock::new() }; 32];
        static OTHERS: [OnceLock<Composed>; 7] = [const { OnceLock::new() }; 7];
        let (slot, algorithms) = match self {
            Entry::Decide => (
                &DECIDE[usize::from(algorithms & EVERY_ALGORITHM)],
                algorithms,
            ),
            Entry::Grant => (&OTHERS[0], EVERY_ALGORITHM),
            Entry::Refund => (&OTHERS[1], EVERY_ALGORITHM),
            Entry::Reset => (&OTHERS[2], 0),
            Entry::Concurrency => (&OTHERS[3], 0),
            Entry::Region => (&OTHERS[4], 0),
            Entry::Ledger => (&OTHERS[5], 0),
            Entry::Shares => (&OTHERS[6], 0),
        };
        slot.get_or_init(|| {
            let code = self.compose(algorithms);
            Composed {
                hash: redis::Script::new(&code).get_hash().to_owned(),
                code,
            }
        })
    }

    /// This entry point's script: the helpers and algorithms it calls, then its file.
    fn compose(self, algorithms: u8) -> String {
        let mut source = String::new();
        if self.calls_algorithms() {
            source.push_str(COMMON);
            for (index, algorithm) in ALGORITHMS.iter().enumerate() {
                if algorithms & (1 << index) != 0 {
                    source.push('\n');
                    source.push_str(algorithm);
                }
            }
        }
        source.push('\n');
        source.push_str(self.source());
        source
    }
}
