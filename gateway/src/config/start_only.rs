//! The fields a command reads at start only (the addresses it binds, its threads, its logs'
//! formats, whether its listener speaks TLS): a reload cannot apply them, so it names those
//! that changed rather than let an operator believe them in force.

use std::fmt::Display;
use std::time::Duration;

use super::{ConnectionsConfig, ProxyConfig, ServeConfig, TlsConfig};

/// A field read at start only: its name in the file and its value as written in a message.
pub type StartOnlyField = (String, String);

impl ProxyConfig {
    /// Its fields read at start only.
    pub fn start_only(&self) -> Vec<StartOnlyField> {
        let mut fields = vec![
            field("proxy.listen", self.listen.to_string()),
            field("proxy.admin", optional(self.admin)),
            field(
                "proxy.access_log",
                format!("{:?}", self.access_log).to_lowercase(),
            ),
            field("proxy.log_format", debug(self.log_format)),
            field("proxy.tls", tls(self.tls.as_ref())),
        ];
        fields.extend(connections("proxy.connections", &self.connections));
        fields
    }
}

impl ServeConfig {
    /// Its fields read at start only.
    pub fn start_only(&self) -> Vec<StartOnlyField> {
        let mut fields = vec![
            field("serve.listen", optional(self.listen)),
            field(
                "serve.socket",
                optional(self.socket.as_ref().map(|socket| socket.display())),
            ),
            field("serve.admin", optional(self.admin)),
            field(
                "serve.access_log",
                format!("{:?}", self.access_log).to_lowercase(),
            ),
            field("serve.log_format", debug(self.log_format)),
            field("serve.tls", tls(self.tls.as_ref())),
        ];
        fields.extend(connections("serve.connections", &self.connections));
        fields
    }
}

/// Each field of `after` whose value differs from `before`'s, as `name (old → new)`.
pub fn changed(before: &[StartOnlyField], after: &[StartOnlyField]) -> Vec<String> {
    after
        .iter()
        .filter_map(|(name, new)| {
            let (_, old) = before.iter().find(|(before, _)| before == name)?;
            (old != new).then(|| format!("{name} ({old} → {new})"))
        })
        .collect()
}

fn connections(table: &str, connections: &ConnectionsConfig) -> Vec<StartOnlyField> {
    let duration = |value: Option<Duration>| optional(value.map(humantime::format_duration));
    vec![
        field(format!("{table}.max"), optional(connections.max)),
        field(
            format!("{table}.header_timeout"),
            duration(connections.header_timeout),
        ),
        field(
            format!("{table}.idle_timeout"),
            duration(connections.idle_timeout),
        ),
        field(
            format!("{table}.drain_timeout"),
            duration(connections.drain_timeout),
        ),
        field(format!("{table}.workers"), optional(connections.workers)),
    ]
}

/// Whether the listener speaks TLS is bound at start; which certificate it serves is not (a
/// reload reads the files again).
fn tls(tls: Option<&TlsConfig>) -> String {
    if tls.is_some() { "on" } else { "off" }.to_owned()
}

fn field(name: impl Into<String>, value: String) -> StartOnlyField {
    (name.into(), value)
}

fn optional(value: Option<impl Display>) -> String {
    value.map_or_else(|| "unset".to_owned(), |value| value.to_string())
}

fn debug(value: Option<impl std::fmt::Debug>) -> String {
    value.map_or_else(
        || "unset".to_owned(),
        |value| format!("{value:?}").to_lowercase(),
    )
}

#[cfg(test)]
mod tests {
    use super::changed;

    #[test]
    fn only_the_fields_that_changed_are_named() {
        let before = vec![
            ("proxy.listen".to_owned(), "127.0.0.1:8080".to_owned()),
            ("proxy.admin".to_owned(), "unset".to_owned()),
        ];
        let mut after = before.clone();
        after[0].1 = "127.0.0.1:9090".to_owned();
        assert_eq!(
            changed(&before, &after),
            ["proxy.listen (127.0.0.1:8080 → 127.0.0.1:9090)"]
        );
        assert!(changed(&before, &before).is_empty());
    }
}
