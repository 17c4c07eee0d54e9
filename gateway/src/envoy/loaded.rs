//! The Envoy files loaded: each domain's descriptor tree, and the store of each (one of the
//! configuration file's stores, named by its `extensions.store`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use tower_redis_ratelimit::Store;
use tower_redis_ratelimit::config::Limits;

use super::file;
use super::group_headers::GroupHeaders;
use super::tree::Domains;
use super::unknown::UnknownDomains;
use crate::config::EnvoyFilesError;

/// The domains and the store of each.
pub(super) struct Loaded {
    pub(super) domains: Domains,
    stores: HashMap<String, Arc<dyn Store>>,
    /// The domains asked about that the files do not have, for the warning.
    pub(super) unknown: UnknownDomains,
    /// The headers of the groups of limits decided together so far.
    pub(super) group_headers: GroupHeaders,
}

impl Loaded {
    /// The store of `domain`, when the files have it.
    pub(super) fn store(&self, domain: &str) -> Option<&Arc<dyn Store>> {
        self.stores.get(domain)
    }
}

/// Reads the Envoy files at `files` (a YAML file or a directory of them) and finds each
/// domain's store among `limits`' stores.
pub(super) fn load(files: &Path, limits: &Limits) -> Result<Loaded, EnvoyFilesError> {
    let domains = Domains::build(file::read(files)?)?;
    let stores = domains
        .iter()
        .map(|(name, domain)| {
            let store = limits
                .rate_store("extensions", domain.store.as_deref())
                .map_err(|error| EnvoyFilesError::Store {
                    path: domain.file.clone(),
                    error,
                })?;
            Ok((name.to_owned(), store))
        })
        .collect::<Result<_, EnvoyFilesError>>()?;
    Ok(Loaded {
        domains,
        stores,
        unknown: UnknownDomains::default(),
        group_headers: GroupHeaders::default(),
    })
}
