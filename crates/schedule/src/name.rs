//! Agent and hive names: `^[a-z][a-z0-9-]{0,31}$`. A name is used as one NATS subject token, a
//! KV key, a NATS account name and a unix user name, so nothing outside that set may get through.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest name: 32 characters (a unix user name limit).
pub const MAX_NAME_LEN: usize = 32;

/// Why a string is not an agent or hive name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {kind} name {given:?}: {reason}; a {kind} name is a lowercase letter followed by up \
     to 31 lowercase letters, digits or '-' (^[a-z][a-z0-9-]{{0,31}}$)"
)]
pub struct NameError {
    kind: &'static str,
    given: String,
    reason: &'static str,
}

/// Checks `s` against `^[a-z][a-z0-9-]{0,31}$`.
fn check(kind: &'static str, s: &str) -> Result<(), NameError> {
    let reject = |reason| Err(NameError { kind, given: s.chars().take(64).collect(), reason });
    let mut chars = s.chars();
    match chars.next() {
        None => return reject("it is empty"),
        Some(c) if !c.is_ascii_lowercase() => return reject("it must start with a-z"),
        Some(_) => {}
    }
    if s.len() > MAX_NAME_LEN {
        return reject("it is longer than 32 characters");
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return reject("it may only contain a-z, 0-9 and '-'");
    }
    Ok(())
}

/// A checked name type: parsing, display and serde as a checked string.
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Checks `s` against `^[a-z][a-z0-9-]{0,31}$`.
            ///
            /// # Errors
            /// [`NameError`] naming the rule that `s` breaks.
            pub fn parse(s: &str) -> Result<Self, NameError> {
                check($kind, s).map(|()| Self(s.to_owned()))
            }

            /// The name as written.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = String::deserialize(deserializer)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

name_type!(
    /// A valid agent name. Construct it with [`AgentName::parse`] or [`str::parse`].
    AgentName,
    "agent"
);
name_type!(
    /// A valid hive name (a host of the swarm). Construct it with [`HiveName::parse`].
    HiveName,
    "hive"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_shapes() {
        for ok in ["a", "agent-1", "x0", &format!("a{}", "b".repeat(31))] {
            assert_eq!(AgentName::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn rejects_everything_else_with_the_reason() {
        let cases = [
            ("", "empty"),
            ("1a", "start with a-z"),
            ("-a", "start with a-z"),
            ("Agent", "start with a-z"),
            ("aB", "only contain"),
            ("a.b", "only contain"),
            ("a*", "only contain"),
            ("a>", "only contain"),
            ("a b", "only contain"),
            ("a_b", "only contain"),
            ("aé", "only contain"),
        ];
        for (bad, why) in cases {
            let err = AgentName::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
            assert!(err.contains("^[a-z][a-z0-9-]{0,31}$"), "{err}");
        }
        let long = format!("a{}", "b".repeat(32));
        assert!(AgentName::parse(&long).unwrap_err().to_string().contains("longer than 32"));
    }

    #[test]
    fn serde_is_a_checked_string() {
        let name: AgentName = serde_json::from_str("\"bee\"").unwrap();
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"bee\"");
        assert!(serde_json::from_str::<AgentName>("\"b.e\"").is_err());
        let hive = HiveName::parse("Hive").unwrap_err().to_string();
        assert!(hive.starts_with("invalid hive name"), "{hive}");
        assert_eq!("bee".parse::<AgentName>().unwrap().to_string(), "bee");
    }
}
