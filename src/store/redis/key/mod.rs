//! How the Redis store names what it keeps: a client key's storage form ([`StorageKey`], the
//! hash tag of every key of that client), and each rule's state name ([`StateNames`], the part of
//! its keys that a quota change renames). A key reads `<prefix>:<rule>:<state code>:{<client>}`.

pub(in crate::store::redis) mod names;
mod storage;

pub(in crate::store) use self::names::StateNames;
pub(in crate::store) use self::storage::StorageKey;

#[cfg(test)]
mod tests;
