//! The domains of envoyproxy/ratelimit's files, validated as the reference validates them and
//! built into one tree per domain, each mistake named by its file and field.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::file::{DescriptorFile, DomainFile, Level};
use super::limit::{Limit, limit};
use super::placement::Placement;
use crate::config::{EnvoyFilesError, FieldError};

/// Every domain, by name.
#[derive(Debug, Default)]
pub struct Domains {
    pub(super) domains: HashMap<String, Domain>,
}

/// One domain: its file, its store's name (extension) and its descriptor tree.
#[derive(Debug)]
pub struct Domain {
    /// The file it was read from.
    pub file: PathBuf,
    /// The store it counts in (`extensions.store`), the default one when `None`.
    pub store: Option<String>,
    /// Where its counters live, and how a request's descriptors are decided
    /// (`extensions.placement`).
    pub placement: Placement,
    pub(super) root: Node,
}

/// A level of a descriptor tree: its descriptors by `key` or `key_value`, the wildcard ones in
/// file order, and the limit and flags of the descriptor it belongs to.
#[derive(Debug, Default)]
pub(super) struct Node {
    pub(super) children: HashMap<String, Node>,
    /// `key_value` patterns with a `*`, split on it.
    pub(super) wildcards: Vec<(String, Vec<String>)>,
    /// Whether a descriptor's `key_value` may name a child: some child's name has a `_` (every
    /// `key_value`, and a key that has one). Most levels are keys alone, whose lookup then
    /// skips making the `key_value` of every request's entry.
    pub(super) by_key_value: bool,
    pub(super) limit: Option<Arc<Limit>>,
    pub(super) value_to_metric: bool,
    pub(super) share_threshold: bool,
}

impl Domains {
    /// Validates and builds the domains of `files` (each with its path).
    pub fn build(files: Vec<(PathBuf, DomainFile)>) -> Result<Self, EnvoyFilesError> {
        let mut domains: HashMap<String, Domain> = HashMap::new();
        for (path, file) in files {
            let field_error = |field: &str, message: String| EnvoyFilesError::Field {
                path: path.clone(),
                error: FieldError::new(field, message),
            };
            if file.domain.is_empty() {
                return Err(field_error(
                    "domain",
                    "config file cannot have empty domain".into(),
                ));
            }
            if let Some(other) = domains.get(&file.domain) {
                return Err(field_error(
                    "domain",
                    format!(
                        "duplicate domain '{}' in config file (also {})",
                        file.domain,
                        other.file.display()
                    ),
                ));
            }
            let mut root = Node::default();
            let at = Level {
                path: &path,
                field: String::new(),
                metric_key: vec![file.domain.clone()],
                keys: Vec::new(),
            };
            root.load(&at, &file.descriptors)?;
            domains.insert(
                file.domain.clone(),
                Domain {
                    file: path.clone(),
                    store: file.extensions.store.clone(),
                    placement: file.extensions.placement,
                    root,
                },
            );
        }
        Ok(Domains { domains })
    }

    /// The domain named `name`.
    pub fn get(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// Every domain.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Domain)> {
        self.domains
            .iter()
            .map(|(name, domain)| (name.as_str(), domain))
    }
}

impl Node {
    fn load(
        &mut self,
        at: &Level<'_>,
        descriptors: &[DescriptorFile],
    ) -> Result<(), EnvoyFilesError> {
        for (index, descriptor) in descriptors.iter().enumerate() {
            let field = format!("{}descriptors[{index}]", at.field);
            if descriptor.key.is_empty() {
                return Err(at.error(format!("{field}.key"), "descriptor has empty key"));
            }
            let final_key = if descriptor.value.is_empty() {
                descriptor.key.clone()
            } else {
                format!("{}_{}", descriptor.key, descriptor.value)
            };
            let mut metric_key = at.metric_key.clone();
            metric_key.push(final_key.clone());
            let mut keys = at.keys.clone();
            keys.push(descriptor.key.clone());
            if self.children.contains_key(&final_key) {
                return Err(at.error(
                    field,
                    format!(
                        "duplicate descriptor composite key '{}'",
                        metric_key.join(".")
                    ),
                ));
            }
            if descriptor.quota_mode {
                return Err(at.error(
                    format!("{field}.quota_mode"),
                    "quota mode is not supported by ratelimit-gateway",
                ));
            }
            let wildcard = final_key.contains('*');
            if descriptor.share_threshold && !wildcard {
                return Err(at.error(
                    format!("{field}.share_threshold"),
                    format!(
                        "share_threshold can only be used with wildcard values (containing '*'), \
                         but found key '{final_key}'"
                    ),
                ));
            }
            self.by_key_value |= final_key.contains('_');
            if wildcard {
                let parts = final_key.split('*').map(str::to_owned).collect();
                self.wildcards.push((final_key.clone(), parts));
            }
            let limit = match &descriptor.rate_limit {
                Some(rate_limit) => Some(Arc::new(limit(
                    at,
                    &format!("{field}.rate_limit"),
                    rate_limit,
                    descriptor,
                    metric_key.clone(),
                    &keys,
                )?)),
                None => None,
            };
            let mut node = Node {
                limit,
                value_to_metric: descriptor.value_to_metric,
                share_threshold: descriptor.share_threshold,
                ..Node::default()
            };
            let next = Level {
                path: at.path,
                field: format!("{field}."),
                metric_key,
                keys,
            };
            node.load(&next, &descriptor.descriptors)?;
            self.children.insert(final_key, node);
        }
        Ok(())
    }
}
