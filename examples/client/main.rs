//! Run with: cargo run --example client -- [URL] [REQUESTS]
//!
//! A client that backs off as a rate-limited service tells it to, so that it is never refused
//! twice in a row. Against the quickstart (`cargo run --example quickstart` in another terminal):
//!
//! ```sh
//! cargo run --example client -- http://127.0.0.1:3000/api/hello 12
//! ```
//!
//! Before each request it waits as the last answer said:
//!
//! - after a 429: `Retry-After` (seconds), or without it the `t` of the `RateLimit` header;
//! - after an admitted request with nothing left (`RateLimit: "name";r=0;t=N`): `t`, the seconds
//!   until quota is available again, so the next request is not refused at all;
//!
//! plus up to 10% of jitter (clients that were told the same instant do not all come back at
//! once), and never more than a cap (`CLIENT_MAX_WAIT_SECS`, default 60): a service that asks for
//! longer is given up on. It prints a line per request with what the headers said
//! (`Rate-Limiting-*` too, for servers that send only those) and a summary; it exits with an error
//! if it was ever refused twice in a row, which a client doing what the headers say never is.
//! `CLIENT_KEY` sends an `x-api-key` header.

use std::time::Duration;

mod told;

use crate::told::Told;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:3000/api/hello".to_owned());
    let requests: u32 = match args.next() {
        Some(count) => count
            .parse()
            .map_err(|_| format!("not a count: {count:?}"))?,
        None => 12,
    };
    let max_wait = Duration::from_secs(match std::env::var("CLIENT_MAX_WAIT_SECS") {
        Ok(secs) => secs.parse()?,
        Err(_) => 60,
    });
    let key = std::env::var("CLIENT_KEY").ok();
    let client = reqwest::Client::new();
    let (mut refused, mut refused_in_a_row, mut last_refused) = (0_u32, 0_u32, false);
    for n in 1..=requests {
        let mut request = client.get(&url);
        if let Some(key) = &key {
            request = request.header("x-api-key", key);
        }
        let response = request.send().await?;
        let status = response.status();
        let told = Told::read(response.headers());
        let is_refused = status == reqwest::StatusCode::TOO_MANY_REQUESTS;
        if is_refused {
            refused += 1;
            if last_refused {
                refused_in_a_row += 1;
            }
        }
        last_refused = is_refused;
        let wait = told.wait(is_refused);
        println!(
            "request {n}: {} state={} remaining={} reset={}s policy={}/{}s retry-after={} -> wait {}",
            status.as_u16(),
            told.state.as_deref().unwrap_or("-"),
            shown(told.remaining),
            shown(told.reset_secs),
            shown(told.quota),
            shown(told.window_secs),
            shown(told.retry_after_secs),
            wait.map_or("none".to_owned(), |wait| format!("{}s", wait.as_secs())),
        );
        if n == requests {
            break;
        }
        if let Some(wait) = wait {
            if wait > max_wait {
                return Err(format!(
                    "the service asks for a wait of {wait:?}, above the cap of {max_wait:?}: giving up"
                )
                .into());
            }
            // Up to 10% later than told, never earlier: earlier would be refused again.
            let jitter = wait.mul_f64(fastrand::f64() * 0.1);
            tokio::time::sleep((wait + jitter).min(max_wait)).await;
        }
    }
    println!(
        "{requests} requests, {refused} refused (429), refused twice in a row: {refused_in_a_row}"
    );
    if refused_in_a_row > 0 {
        return Err("refused twice in a row despite waiting as told".into());
    }
    Ok(())
}

fn shown(value: Option<u64>) -> String {
    value.map_or("-".to_owned(), |value| value.to_string())
}
