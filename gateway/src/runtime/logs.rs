//! The messages on standard error (the start-up line, warnings, reloads), as text or one JSON
//! object per line; standard output belongs to the access log alone, so that a program reading
//! it never meets a line of another kind.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::config::LogFormat;

/// Sends the process's messages to standard error in `format`, filtered by `RUST_LOG` (default
/// `info`). Once per process: a second call changes nothing (an embedding program's own
/// subscriber stays).
pub fn init(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        // Colours for a terminal only: escape codes in a log file or a pipe are noise.
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder.event_format(Json).try_init(),
    };
}

/// One JSON object per message: `time`, `level`, `target`, `message`, then its fields, each
/// written as its `Display` (`error = %err`) or as the number or boolean it is.
struct Json;

impl<S, N> FormatEvent<S, N> for Json
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        let mut object = Map::new();
        object.insert(
            "time".to_owned(),
            humantime::format_rfc3339_millis(std::time::SystemTime::now())
                .to_string()
                .into(),
        );
        object.insert("level".to_owned(), metadata.level().as_str().into());
        object.insert("target".to_owned(), metadata.target().into());
        event.record(&mut Fields(&mut object));
        writeln!(writer, "{}", Value::Object(object))
    }
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%value` fields arrive here as a Debug that writes their Display.
        self.0
            .insert(field.name().to_owned(), format!("{value:?}").into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
}

/// `err` and its sources as one sentence (`error: source: source`), each cause's own words
/// rather than its Debug (`Connection refused (os error 111)`, never `Os { code: 111, .. }`);
/// a source whose words the message already holds is not said twice.
pub fn sentence(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let words = cause.to_string();
        if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::sentence;

    #[test]
    fn an_error_is_said_with_its_causes_in_words() {
        let refused = std::io::Error::from_raw_os_error(111);
        let outer = std::io::Error::other(refused);
        let said = sentence(&outer);
        assert!(!said.contains("Os {"), "{said}");
        assert!(said.contains("os error 111"), "{said}");
    }
}
