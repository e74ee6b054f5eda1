//! [`Retryable`]: whether a failed call may succeed if it is made again later. It is the one
//! question the controller's job graph asks of every adapter's error, to choose between a retry
//! after a backoff and failing the job at once.
//!
//! The rule every adapter follows: no answer (connection refused, DNS, TLS, a timeout), a 5xx
//! and a 429 are retryable: the server is down, failing or overloaded, and may recover. A
//! refusal (any other 4xx: a name taken by someone else, an admin token the server does not
//! accept, input it rejects), an answer this client does not understand and a setting of its
//! own that is wrong are not: the same call fails the same way until someone changes something.

/// An adapter's error that says whether trying again can help.
pub trait Retryable: std::error::Error {
    /// Whether the same call may succeed later without anyone changing anything.
    fn is_retryable(&self) -> bool;
}

/// Whether an HTTP error status means "try again later": 429 (too many requests) or any 5xx.
pub fn retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_throttling_and_server_failures_are_worth_a_retry() {
        for status in [429, 500, 502, 503, 504, 599] {
            assert!(retryable_status(status), "{status}");
        }
        for status in [200, 400, 401, 403, 404, 409, 422, 428, 499] {
            assert!(!retryable_status(status), "{status}");
        }
    }
}
