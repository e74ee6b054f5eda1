//! The hive directory: the swarm's hives, declared once in configuration
//! (`services.hyperhive.swarm.hives.<name>`) and handed to the controller as a JSON file in
//! `SWARM_HIVES_FILE`: `{"<hive>": {"description": "...", "labels": {"k": "v"}, "xkey": "X..."}}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::HiveName;

/// The most hives a directory may hold.
pub const MAX_HIVES: usize = 1024;

/// One hive as the directory declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HiveEntry {
    /// What the hive is for.
    #[serde(default)]
    pub description: String,
    /// Free-form labels (e.g. `gpu = "yes"`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The hive's public curve key (`X...`), to which deploy messages are sealed; absent for a
    /// hive that only runs declared agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xkey: Option<String>,
}

/// Every hive of the swarm, by name.
pub type HiveDirectory = BTreeMap<HiveName, HiveEntry>;

/// Why a directory file is refused.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// Not JSON of the right shape.
    #[error(
        "{0}; the file is a JSON object mapping hive names to {{\"description\": ..., \"labels\": {{...}}, \"xkey\": \"X...\"}}"
    )]
    Shape(String),
    /// A key is not a hive name.
    #[error(transparent)]
    Name(#[from] hyperhive_schedule::NameError),
    /// An xkey is not a public curve key.
    #[error("hive {hive}: xkey {given:?} is not a public curve key (X..., from `hive-c0re keygen`)")]
    BadXkey {
        /// The hive.
        hive: String,
        /// What was given (a public key, so safe to show).
        given: String,
    },
    /// Too many hives.
    #[error("{0} hives; a directory holds at most {MAX_HIVES}")]
    TooMany(usize),
}

/// Parses and checks the content of `SWARM_HIVES_FILE`.
///
/// # Errors
/// [`DirectoryError`] naming the first problem.
pub fn parse_directory(text: &str) -> Result<HiveDirectory, DirectoryError> {
    let raw: BTreeMap<String, HiveEntry> =
        serde_json::from_str(text).map_err(|e| DirectoryError::Shape(e.to_string()))?;
    if raw.len() > MAX_HIVES {
        return Err(DirectoryError::TooMany(raw.len()));
    }
    let mut out = HiveDirectory::new();
    for (name, entry) in raw {
        let hive = HiveName::parse(&name)?;
        if let Some(xkey) = &entry.xkey
            && !crate::deploy::is_public_xkey(xkey)
        {
            return Err(DirectoryError::BadXkey { hive: name, given: xkey.chars().take(80).collect() });
        }
        out.insert(hive, entry);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_parses_and_bad_ones_say_why() {
        let key = nkeys::XKey::new().public_key();
        let text = format!(
            r#"{{"h1": {{"description": "gpu box", "labels": {{"gpu": "yes"}}, "xkey": "{key}"}}, "h2": {{}}}}"#
        );
        let dir = parse_directory(&text).unwrap();
        assert_eq!(dir.len(), 2);
        assert_eq!(dir[&HiveName::parse("h1").unwrap()].xkey.as_deref(), Some(key.as_str()));
        let cases = [
            ("[]".to_owned(), "JSON object"),
            (r#"{"H": {}}"#.to_owned(), "invalid hive name"),
            (r#"{"h": {"xkey": "Xnope"}}"#.to_owned(), "not a public curve key"),
            (
                format!(r#"{{"h": {{"xkey": "{}"}}}}"#, nkeys::KeyPair::new_user().public_key()),
                "not a public curve key",
            ),
            (r#"{"h": {"colour": "red"}}"#.to_owned(), "unknown field"),
        ];
        for (text, needle) in cases {
            let err = parse_directory(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
