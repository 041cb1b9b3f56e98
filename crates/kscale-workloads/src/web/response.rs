//! What the load generator reads of a server's answers: an HTTP/1.1
//! response's length from its head, the bytes a throttled connection is
//! credited within a window, and SPECweb99's conformance of a connection.
//! Apart from the event loop (load.rs), which calls them per response, so
//! that the rules stand on their own and `target` can share the parser.

use anyhow::{bail, Context, Result};
use std::time::Instant;

/// A connection conforms at 80 % of the throttle (SPECweb99's 320 of 400
/// kbit/s) with errors under 1 % of its operations.
const CONFORM_SHARE: f64 = 0.8;
const CONFORM_MAX_ERRORS: f64 = 0.01;
/// Where reading a response stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes are needed.
    Partial,
    /// The head is complete: the response has this status and is `len`
    /// bytes long, head and body (which may still be on its way).
    Done { status: u16, len: usize },
}

/// Parses the head of one HTTP/1.1 response at the start of `buf` with
/// httparse and returns the response's length from its `Content-Length`. Chunked bodies are not expected
/// from a server of static files and fixed responses, and are an error.
pub fn parse_response(buf: &[u8]) -> Result<Parsed> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut headers);
    let head = match r.parse(buf).context("malformed HTTP response")? {
        httparse::Status::Partial => return Ok(Parsed::Partial),
        httparse::Status::Complete(n) => n,
    };
    let status = r.code.unwrap_or(0);
    let mut body = None;
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .context("bad Content-Length")?;
            body = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            bail!("chunked responses are not supported");
        }
    }
    let body = match (body, status) {
        (Some(b), _) => b,
        (None, 204 | 304) => 0,
        (None, s) if (100..200).contains(&s) => 0,
        (None, _) => bail!("response without Content-Length"),
    };
    Ok(Parsed::Done {
        status,
        len: head + body,
    })
}

/// SPECweb99's conformance of one connection over a window.
pub fn conforms(bits: f64, window_s: f64, ops: u64, errors: u64, rate_kbps: u64) -> bool {
    if window_s <= 0.0 {
        return false;
    }
    // A connection may spend a whole window on one large file's throttle
    // span (a 921,600-byte class-3 file lasts 18 s at 400 kbit/s) and
    // complete nothing in it: its credited bits decide.
    let total = ops + errors;
    if errors > 0 && errors as f64 >= CONFORM_MAX_ERRORS * total as f64 {
        return false;
    }
    // Unthrottled runs keep SPECweb99's 400 kbit/s as the yardstick.
    let rate = if rate_kbps == 0 { 400 } else { rate_kbps };
    bits / window_s >= CONFORM_SHARE * rate as f64 * 1000.0
}

/// The share of `bytes`, spread evenly over `from..to`, that falls inside
/// `lo..hi`. A throttled connection receives a response at once and then
/// waits; counting the bytes over the span it paid for them keeps a short
/// window from crediting a large file's whole wait-to-come.
pub fn credit(bytes: u64, from: Instant, to: Instant, lo: Instant, hi: Option<Instant>) -> f64 {
    let span = to.saturating_duration_since(from).as_secs_f64();
    let a = from.max(lo);
    let b = hi.map_or(to, |h| to.min(h));
    if span <= 0.0 {
        let inside = match hi {
            Some(h) => from >= lo && from <= h,
            None => from >= lo,
        };
        return if inside { bytes as f64 } else { 0.0 };
    }
    bytes as f64 * b.saturating_duration_since(a).as_secs_f64() / span
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn responses_parse_in_pieces() {
        let r = b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 5\r\n\r\nhello";
        let head = r.len() - 5;
        for cut in 0..head {
            assert_eq!(parse_response(&r[..cut]).unwrap(), Parsed::Partial, "{cut}");
        }
        for cut in head..=r.len() {
            assert_eq!(
                parse_response(&r[..cut]).unwrap(),
                Parsed::Done {
                    status: 200,
                    len: r.len()
                }
            );
        }
        let nf = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(
            parse_response(nf).unwrap(),
            Parsed::Done {
                status: 404,
                len: nf.len()
            }
        );
        assert!(parse_response(b"garbage\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
    }

    #[test]
    fn conformance_rule() {
        // 400 kbit/s for 10 s is 4 Mbit: conforming down to 320 kbit/s.
        assert!(conforms(4e6, 10.0, 100, 0, 400));
        assert!(conforms(3.2e6, 10.0, 100, 0, 400));
        assert!(!conforms(3.19e6, 10.0, 100, 0, 400));
        // Errors: under 1 % conforms, 1 % does not.
        assert!(conforms(4e6, 10.0, 1000, 9, 400));
        assert!(!conforms(4e6, 10.0, 990, 10, 400));
        assert!(!conforms(0.0, 10.0, 0, 0, 400));
        assert!(!conforms(4e6, 0.0, 10, 0, 400));
        // A window spent on one large file at the throttle's rate conforms.
        assert!(conforms(4e6, 10.0, 0, 0, 400));
        assert!(!conforms(4e6, 10.0, 0, 1, 400));
        // Unthrottled: judged against 400 kbit/s.
        assert!(conforms(4e6, 10.0, 100, 0, 0));
    }

    #[test]
    fn bytes_are_credited_over_their_throttle_span() {
        let t = Instant::now();
        let s = |ms| t + Duration::from_millis(ms);
        // 1000 bytes over 0..100 ms; window 50..: half of them.
        assert!((credit(1000, s(0), s(100), s(50), None) - 500.0).abs() < 1e-6);
        // Window 50..75: a quarter.
        assert!((credit(1000, s(0), s(100), s(50), Some(s(75))) - 250.0).abs() < 1e-6);
        // Entirely before or after the window: nothing.
        assert_eq!(credit(1000, s(0), s(100), s(200), None), 0.0);
        assert_eq!(credit(1000, s(100), s(200), s(0), Some(s(50))), 0.0);
        // An instantaneous response inside the window counts whole.
        assert_eq!(credit(1000, s(10), s(10), s(0), None), 1000.0);
    }
}
