//! What a ledger holds, per key and window, for an operator to read
//! (`ratelimit-gateway ledger show FILE`): [`Ledger::holdings`].

use std::collections::BTreeMap;

use super::ledger::Ledger;
use crate::key::Key;
use crate::store::StoreError;
use crate::store::redis::wrapped::StorageKey;

/// One key's window on the ledger: the units no region holds, and what each region holds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holding {
    /// The rule's state name (`<rule>:<code>`), as in the keys of the Redis store; followed by
    /// `:w<k>` for a rule allotted in `k` windows a period (a sliding window, GCRA, a token
    /// bucket).
    pub rule: String,
    /// The client key in its storage form: verbatim, or `#` and a digest for a long or binary
    /// key.
    pub key: String,
    /// The window's index: window `w` of a rule allotted in windows of `σ` (its period, or the
    /// period over its windows) is `[w·σ, (w+1)·σ)` since the Unix epoch.
    pub window: u64,
    /// Units of the quota that no region holds: of a fixed window, what is left of it; of a
    /// metered rule, what its meter left free after the window's last take or credit.
    pub free: u64,
    /// What each region holds, by region name.
    pub regions: Vec<RegionHolding>,
}

/// What one region holds of a key's window on the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegionHolding {
    /// The region's name.
    pub region: String,
    /// Units granted to it and not credited back (spent or not: what it spends is the
    /// region's to count).
    pub holds: u64,
    /// The demand it last reported for the window, in units per window.
    pub demand: u64,
}

impl Ledger {
    /// What the ledger holds now, per key and window (those not expired: the current, the next
    /// and the last), ordered by rule, key and window; only `key`'s when given. Reads with
    /// `SCAN` (on every primary of a cluster), a few keys at a time: for an operator, not for a
    /// request's path.
    pub async fn holdings(&self, key: Option<&Key>) -> Result<Vec<Holding>, StoreError> {
        let prefix = format!("{}:ledger:", self.store.prefix());
        let pattern = format!("{}*", glob_escaped(&prefix));
        let mut holdings = Vec::new();
        for name in self.store.scan(&pattern).await? {
            let Some((rule, client, window)) = parse(&name[prefix.len()..]) else {
                continue;
            };
            if key.is_some_and(|key| !StorageKey::names(client, key)) {
                continue;
            }
            let fields: BTreeMap<String, u64> =
                self.store.query(redis::cmd("HGETALL").arg(&name)).await?;
            holdings.push(holding(rule, client, window, &fields));
        }
        holdings.sort_by(|a, b| (&a.rule, &a.key, a.window).cmp(&(&b.rule, &b.key, b.window)));
        Ok(holdings)
    }
}

/// The rule, client and window of a window's hash `<rule>:<code>:{<client>}:<index>` (after the
/// ledger's prefix); `None` for its other keys (the birth, a window's moves).
fn parse(name: &str) -> Option<(&str, &str, u64)> {
    let (rest, index) = name.rsplit_once(':')?;
    let window = index.parse().ok()?;
    let (rule, tagged) = rest.split_once(":{")?;
    let client = tagged.strip_suffix('}')?;
    Some((rule, client, window))
}

fn holding(rule: &str, client: &str, window: u64, fields: &BTreeMap<String, u64>) -> Holding {
    let mut regions: BTreeMap<&str, RegionHolding> = BTreeMap::new();
    for (field, &units) in fields {
        let (side, region) = match field.split_once(':') {
            Some(split) => split,
            None => continue,
        };
        let entry = regions.entry(region).or_insert_with(|| RegionHolding {
            region: region.to_owned(),
            holds: 0,
            demand: 0,
        });
        match side {
            "g" => entry.holds = units,
            "n" => entry.demand = units,
            _ => {}
        }
    }
    Holding {
        rule: rule.to_owned(),
        key: client.to_owned(),
        window,
        free: fields.get("f").copied().unwrap_or(0),
        regions: regions.into_values().collect(),
    }
}

/// `text` with the glob characters of `SCAN MATCH` escaped.
fn glob_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn only_a_window_hash_is_a_holding() {
        assert_eq!(
            parse("api:fw1:{customer-1}:442352"),
            Some(("api:fw1", "customer-1", 442352))
        );
        assert_eq!(
            parse("api:gcra-10/1s:w4:{customer-1}:442352"),
            Some(("api:gcra-10/1s:w4", "customer-1", 442352))
        );
        assert_eq!(parse("api:gcra-10/1s:w4:{customer-1}:meter"), None);
        assert_eq!(parse("api:fw1:{customer-1}:442352:moves"), None);
        assert_eq!(parse("birth"), None);
        assert_eq!(parse("birth:{3560}"), None);
    }
}
