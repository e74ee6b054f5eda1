//! A secret string (a password or a token) that cannot show itself by accident.
//!
//! `Debug` prints `Secret(<redacted>)`, there is no `Display`, and the value is read only through
//! [`Secret::expose`], so every place that sends or stores a secret says so where it does.

use std::fmt;

/// A password or token. Cloning copies the value; dropping it does not wipe memory.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself, for the one place that sends or seals it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is the empty string (never a usable secret).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("hunter2-but-longer");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(Secret(<redacted>))");
        assert_eq!(secret.expose(), "hunter2-but-longer");
        assert!(Secret::new("").is_empty());
    }
}
