//! `Rate-Limiting-Expires-At`'s instant, RFC 3339 in UTC with whole seconds
//! (`2023-11-14T22:13:20Z`, as Go's `time.RFC3339` prints it), written by hand and kept per thread.
//!
//! Every response of a rate limit carries one, and on a busy server most of them name the same
//! second (a limit's windows end together; fresh keys reset a moment from now), so each thread
//! keeps the last value it made and makes a new one only when the second changes: a clone of a
//! shared buffer then, where formatting through `humantime` and `Display` into a growing `String`
//! took about 800 instructions and three allocations.

use std::cell::RefCell;

use bytes::Bytes;
use http::HeaderValue;

/// The last second RFC 3339 can write: 9999-12-31T23:59:59Z (four-digit years).
const LAST_SECOND: u64 = 253_402_300_799;

thread_local! {
    /// The last instant this thread wrote, in whole seconds since the epoch, and its value.
    static LAST: RefCell<Option<(u64, HeaderValue)>> = const { RefCell::new(None) };
}

/// The instant `seconds` after the Unix epoch as a header value. Instants past the year 9999,
/// which the format cannot write, are written as its last second.
pub(crate) fn rfc3339(seconds: u64) -> HeaderValue {
    let seconds = seconds.min(LAST_SECOND);
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some((second, value)) if *second == seconds => value.clone(),
            _ => {
                // One allocation that holds the bytes and their reference count, so the value
                // kept here and the one handed out share it.
                let value = HeaderValue::from_maybe_shared(Bytes::from_owner(format(seconds)))
                    .unwrap_or(HeaderValue::from_static("9999-12-31T23:59:59Z"));
                *last = Some((seconds, value.clone()));
                value
            }
        }
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` for `seconds` after the Unix epoch, which must not pass
/// [`LAST_SECOND`].
fn format(seconds: u64) -> [u8; 20] {
    let (days, second_of_day) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil(days);
    let mut text = *b"0000-00-00T00:00:00Z";
    let two = |text: &mut [u8; 20], at: usize, value: u64| {
        text[at] = b'0' + (value / 10) as u8;
        text[at + 1] = b'0' + (value % 10) as u8;
    };
    two(&mut text, 0, year / 100);
    two(&mut text, 2, year % 100);
    two(&mut text, 5, month);
    two(&mut text, 8, day);
    two(&mut text, 11, second_of_day / 3_600);
    two(&mut text, 14, second_of_day / 60 % 60);
    two(&mut text, 17, second_of_day % 60);
    text
}

/// The Gregorian (year, month, day) of the day `days` after 1970-01-01: Howard Hinnant's
/// `civil_from_days`, over unsigned days (no instant here is before the epoch).
fn civil(days: u64) -> (u64, u64, u64) {
    // Counted from 0000-03-01, so that a year's leap day is its last day.
    let days = days + 719_468;
    let era = days / 146_097;
    let day_of_era = days % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March: 0 is March, 11 is February.
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn humantime(seconds: u64) -> String {
        let time = UNIX_EPOCH + Duration::from_secs(seconds);
        humantime::format_rfc3339_seconds(time).to_string()
    }

    fn written(seconds: u64) -> String {
        String::from_utf8(format(seconds).to_vec()).unwrap()
    }

    #[test]
    fn instants_are_written_as_humantime_writes_them() {
        // Every second of some days: the turn of a day, of a month, of a leap year's February, of
        // a century that is not a leap year (2100) and of one that is (2000).
        let days = [
            "1970-01-01",
            "1999-12-31",
            "2000-02-28",
            "2000-02-29",
            "2000-12-31",
            "2023-11-14",
            "2024-02-29",
            "2100-02-28",
            "2100-03-01",
            "9999-12-31",
        ];
        for day in days {
            let midnight = humantime::parse_rfc3339(&format!("{day}T00:00:00Z")).unwrap();
            let start = midnight.duration_since(UNIX_EPOCH).unwrap().as_secs();
            for seconds in start.saturating_sub(2)..(start + 86_402).min(LAST_SECOND + 1) {
                assert_eq!(written(seconds), humantime(seconds), "{seconds}");
            }
        }
        // Noon of every day up to the year 9999, and random instants of the whole range.
        for day in 0..=LAST_SECOND / 86_400 {
            let seconds = day * 86_400 + 43_200;
            assert_eq!(written(seconds), humantime(seconds), "{seconds}");
        }
        let mut random = fastrand::Rng::with_seed(3_339);
        for _ in 0..200_000 {
            let seconds = random.u64(..=LAST_SECOND);
            assert_eq!(written(seconds), humantime(seconds), "{seconds}");
        }
    }

    #[test]
    fn the_value_follows_the_second_on_every_thread() {
        let check = |seconds: u64| assert_eq!(rfc3339(seconds), humantime(seconds).as_str());
        // The same second twice (kept), the next (made anew), back (made anew), a second's run.
        for seconds in [1_700_000_000, 1_700_000_000, 1_700_000_001, 1_700_000_000] {
            check(seconds);
        }
        std::thread::spawn(move || (1_700_000_000..1_700_000_100).for_each(check))
            .join()
            .unwrap();
        check(1_700_000_000);
    }

    #[test]
    fn past_the_year_9999_the_last_second_is_written() {
        for seconds in [LAST_SECOND + 1, LAST_SECOND * 2, u64::MAX] {
            assert_eq!(rfc3339(seconds), "9999-12-31T23:59:59Z");
        }
        assert_eq!(rfc3339(LAST_SECOND), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339(LAST_SECOND - 1), "9999-12-31T23:59:58Z");
    }
}
