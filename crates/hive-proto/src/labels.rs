//! An agent's labels: free key/value pairs an operator puts on it (`team=infra`) to find and
//! group agents. Kept on its roster entry; public, never a secret.

use std::collections::BTreeMap;

/// The labels of one agent, by key.
pub type Labels = BTreeMap<String, String>;

/// At most this many labels on one agent.
pub const MAX_LABELS: usize = 32;

/// A key or a value is at most this many bytes.
pub const MAX_LABEL_BYTES: usize = 63;

/// Why a label is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// The key breaks the key rule.
    #[error(
        "label key {0:?} is not allowed: use 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a \
         letter or digit (e.g. team)"
    )]
    Key(String),
    /// The value breaks the value rule.
    #[error(
        "label {key}'s value {value:?} is not allowed: use at most 63 letters, digits, '.', '_', '-' or ' ' (e.g. \
         team=infra)"
    )]
    Value {
        /// The key.
        key: String,
        /// The refused value.
        value: String,
    },
    /// Too many labels.
    #[error("{0} labels; an agent has at most {MAX_LABELS}")]
    TooMany(usize),
}

/// Checks one key.
///
/// # Errors
/// [`LabelError::Key`].
pub fn check_key(key: &str) -> Result<(), LabelError> {
    let first_ok = key.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if first_ok && rest_ok && key.len() <= MAX_LABEL_BYTES { Ok(()) } else { Err(LabelError::Key(key.to_owned())) }
}

/// Checks one label: its key and its value (which may be empty).
///
/// # Errors
/// [`LabelError::Key`] or [`LabelError::Value`].
pub fn check_label(key: &str, value: &str) -> Result<(), LabelError> {
    check_key(key)?;
    let value_ok = value.len() <= MAX_LABEL_BYTES
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"._- ".contains(&b))
        && value.trim() == value;
    if value_ok { Ok(()) } else { Err(LabelError::Value { key: key.to_owned(), value: value.to_owned() }) }
}

/// Checks every label and their number.
///
/// # Errors
/// The first [`LabelError`] found.
pub fn check_labels(labels: &Labels) -> Result<(), LabelError> {
    if labels.len() > MAX_LABELS {
        return Err(LabelError::TooMany(labels.len()));
    }
    labels.iter().try_for_each(|(key, value)| check_label(key, value))
}

/// `labels` changed by a JSON merge patch (RFC 7396) of labels: each key set to a string is set,
/// each set to `null` is removed, the others stay.
///
/// # Errors
/// A refused key or value, or more than [`MAX_LABELS`] labels after the change.
pub fn merge(labels: &Labels, patch: &BTreeMap<String, Option<String>>) -> Result<Labels, LabelError> {
    let mut merged = labels.clone();
    for (key, value) in patch {
        match value {
            Some(value) => {
                check_label(key, value)?;
                merged.insert(key.clone(), value.clone());
            }
            None => {
                check_key(key)?;
                merged.remove(key);
            }
        }
    }
    check_labels(&merged)?;
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_follow_their_rules() {
        for key in ["team", "a", "k8s.io-zone_2", &"k".repeat(63)] {
            assert_eq!(check_key(key), Ok(()), "{key}");
        }
        for key in ["", "Team", "-x", ".x", "a b", "a=b", "é", &"k".repeat(64)] {
            assert!(matches!(check_key(key), Err(LabelError::Key(_))), "{key}");
        }
        for value in ["", "infra", "Blue Team 2", "v1.2_3-x", &"v".repeat(63)] {
            assert_eq!(check_label("k", value), Ok(()), "{value}");
        }
        for value in [" x", "x ", "a\nb", "a=b", "<b>", &"v".repeat(64)] {
            assert!(matches!(check_label("k", value), Err(LabelError::Value { .. })), "{value:?}");
        }
    }

    #[test]
    fn a_merge_sets_removes_and_keeps_and_refuses_without_changing() {
        let labels = Labels::from([("team".into(), "infra".into()), ("tier".into(), "gold".into())]);
        let patch = BTreeMap::from([
            ("team".to_owned(), Some("web".to_owned())),
            ("tier".to_owned(), None),
            ("zone".to_owned(), Some("eu".to_owned())),
            ("absent".to_owned(), None),
        ]);
        let merged = merge(&labels, &patch).unwrap();
        assert_eq!(merged, Labels::from([("team".into(), "web".into()), ("zone".into(), "eu".into())]));
        let bad = BTreeMap::from([("Team".to_owned(), Some("x".to_owned()))]);
        assert!(merge(&labels, &bad).unwrap_err().to_string().contains("\"Team\""));
        let many: BTreeMap<String, Option<String>> =
            (0..=MAX_LABELS).map(|i| (format!("k{i}"), Some(String::new()))).collect();
        assert_eq!(merge(&Labels::new(), &many), Err(LabelError::TooMany(MAX_LABELS + 1)));
    }
}
