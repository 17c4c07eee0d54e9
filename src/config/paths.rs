//! Which routes a request path belongs to: every route with a path prefix that the path starts
//! with, the narrowest first. Routes stack as nested layers do: a narrower route adds its limit
//! to a broader one's, it never replaces it, so no route (a shadow route least of all) can lift
//! a limit that another route enforces on the same paths.

use super::SettingError;
use crate::error::ConfigError;

/// Path prefixes and the names of their routes.
#[derive(Clone, Debug)]
pub(super) struct Paths {
    /// What the routes are, in errors: `route`, `concurrency limit`.
    noun: &'static str,
    /// Longest prefix first, once [`Paths::sorted`].
    prefixes: Vec<Prefix>,
}

/// A path prefix and the routes a path under it belongs to.
#[derive(Clone, Debug)]
struct Prefix {
    path: String,
    /// The route that names this prefix.
    owner: String,
    /// Once [`Paths::sorted`]: the routes of every prefix that this one starts with (itself
    /// included), the narrowest first, each route once. A path's matching prefixes are all
    /// prefixes of its longest one, so this is every route of any path under `path` that has no
    /// longer prefix.
    routes: Vec<String>,
}

impl Paths {
    /// No paths yet, for routes called `noun`.
    pub(super) fn new(noun: &'static str) -> Self {
        Self {
            noun,
            prefixes: Vec::new(),
        }
    }

    /// Adds `route`'s prefixes, named `field[index]` in errors: each must start with `/` and
    /// belong to no other route of this table.
    pub(super) fn add(
        &mut self,
        field: &str,
        route: &str,
        prefixes: &[String],
    ) -> Result<(), ConfigError> {
        for (index, path) in prefixes.iter().enumerate() {
            let invalid = |error: SettingError| super::invalid(format!("{field}[{index}]"), error);
            if !path.starts_with('/') {
                return Err(invalid(SettingError::NotAPath { path: path.clone() }));
            }
            if let Some(other) = self.prefixes.iter().find(|prefix| prefix.path == *path) {
                return Err(invalid(SettingError::PathTaken {
                    path: path.clone(),
                    table: self.noun,
                    owner: other.owner.clone(),
                }));
            }
            self.prefixes.push(Prefix {
                path: path.clone(),
                owner: route.to_owned(),
                routes: Vec::new(),
            });
        }
        Ok(())
    }

    /// Ready for lookups: the longest prefixes first, each with the routes its paths belong to.
    pub(super) fn sorted(mut self) -> Self {
        self.prefixes
            .sort_by(|a, b| b.path.len().cmp(&a.path.len()).then(a.path.cmp(&b.path)));
        let stacks: Vec<Vec<String>> = self
            .prefixes
            .iter()
            .map(|prefix| {
                let mut routes: Vec<String> = Vec::new();
                for broader in &self.prefixes {
                    if prefix.path.starts_with(broader.path.as_str())
                        && !routes.contains(&broader.owner)
                    {
                        routes.push(broader.owner.clone());
                    }
                }
                routes
            })
            .collect();
        for (prefix, routes) in self.prefixes.iter_mut().zip(stacks) {
            prefix.routes = routes;
        }
        self
    }

    /// The routes `path` belongs to, the narrowest first (none: no prefix matches).
    pub(super) fn routes_for(&self, path: &str) -> &[String] {
        self.prefixes
            .iter()
            .find(|prefix| path.starts_with(prefix.path.as_str()))
            .map_or(&[], |prefix| prefix.routes.as_slice())
    }

    /// Each prefix, the longest first, with the routes of the paths under it (the narrowest
    /// first).
    pub(super) fn stacks(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.prefixes
            .iter()
            .map(|prefix| (prefix.path.as_str(), prefix.routes.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::Paths;

    fn paths(routes: &[(&str, &[&str])]) -> Paths {
        let mut paths = Paths::new("route");
        for (route, prefixes) in routes {
            let prefixes: Vec<String> = prefixes.iter().map(|&p| p.to_owned()).collect();
            paths.add("routes", route, &prefixes).unwrap();
        }
        paths.sorted()
    }

    #[test]
    fn a_path_belongs_to_every_route_whose_prefix_it_starts_with_the_narrowest_first() {
        let paths = paths(&[
            ("api", &["/api/"]),
            ("search", &["/api/search"]),
            ("site", &["/"]),
            ("admin", &["/admin/", "/api/admin/"]),
        ]);
        assert_eq!(
            paths.routes_for("/api/search?q=1"),
            ["search", "api", "site"]
        );
        assert_eq!(paths.routes_for("/api/x"), ["api", "site"]);
        assert_eq!(
            paths.routes_for("/api/admin/users"),
            ["admin", "api", "site"]
        );
        assert_eq!(paths.routes_for("/admin/"), ["admin", "site"]);
        assert_eq!(paths.routes_for("/other"), ["site"]);
    }

    #[test]
    fn a_route_with_two_matching_prefixes_applies_once_at_its_narrowest() {
        let paths = paths(&[("api", &["/api/", "/api/v2/"]), ("v2", &["/api/v2"])]);
        assert_eq!(paths.routes_for("/api/v2/x"), ["api", "v2"]);
        assert_eq!(paths.routes_for("/api/v2"), ["v2", "api"]);
        assert!(paths.routes_for("/ap").is_empty());
    }
}
