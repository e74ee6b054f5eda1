//! The secret variables of a turn: read from the agent's env file (`HIVE_AGENT_ENV_FILE`, which
//! hive-c0re writes and replaces atomically when the operator changes a secret) at the start of
//! every turn, so a change reaches the next turn without a restart of the agent, and never
//! reaches hive-agent's own environment, its arguments or its log.
//!
//! - No `HIVE_AGENT_ENV_FILE`, or no file there: no secret variables.
//! - A file that does not parse (something other than hive-c0re changed it): the turn does not
//!   start and counts as failed, like a turn command that cannot start; the error names the file
//!   and the line, never a value. Running it without its secrets would only fail later, less
//!   clearly; handing it back would fail the same way at once, again and again.
//!
//! Format and rules: [`hyperhive_hive_proto::env_secrets`].

use std::path::{Path, PathBuf};

use hyperhive_hive_proto::env_secrets::{self, ENV_FILE_VAR, MAX_FILE_BYTES};

/// The env file this agent was given, if any.
pub fn env_file() -> Option<PathBuf> {
    std::env::var_os(ENV_FILE_VAR).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The variables for the next turn, from the file `HIVE_AGENT_ENV_FILE` names.
///
/// # Errors
/// The file cannot be read or does not parse: the message names the file and where, never a
/// value.
pub fn current() -> std::io::Result<Vec<(String, String)>> {
    match env_file() {
        None => Ok(Vec::new()),
        Some(path) => load(&path),
    }
}

/// The variables in the env file at `path` (none when there is no file).
///
/// # Errors
/// As [`current`].
pub fn load(path: &Path) -> std::io::Result<Vec<(String, String)>> {
    use std::io::Read;
    let refused = |why: String| {
        let message =
            format!("the secret variables file {} ({ENV_FILE_VAR}) {why}; the turn does not start", path.display());
        tracing::error!("{message}");
        std::io::Error::new(std::io::ErrorKind::InvalidData, message)
    };
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(refused(format!("cannot be read: {e}"))),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| refused(format!("cannot be read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(refused(format!("is larger than {MAX_FILE_BYTES} bytes")));
    }
    let vars = env_secrets::parse(&bytes).map_err(|e| refused(format!("is malformed: {e}")))?;
    Ok(vars.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_file_is_read_afresh_and_a_missing_one_means_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.env");
        assert_eq!(load(&path).unwrap(), Vec::new());
        let vars = BTreeMap::from([("TOKEN".to_owned(), "one".to_owned())]);
        std::fs::write(&path, env_secrets::render(&vars)).unwrap();
        assert_eq!(load(&path).unwrap(), vec![("TOKEN".to_owned(), "one".to_owned())]);
        let vars = BTreeMap::from([("TOKEN".to_owned(), "two".to_owned())]);
        std::fs::write(&path, env_secrets::render(&vars)).unwrap();
        assert_eq!(load(&path).unwrap(), vec![("TOKEN".to_owned(), "two".to_owned())]);
    }

    #[test]
    fn a_malformed_file_names_itself_and_the_line_never_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.env");
        std::fs::write(&path, "{\n  \"TOKEN\": \"s3cr3t\",\n  \"OTHER\": s3cr3t\n}\n").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()) && err.contains("line 3"), "{err}");
        assert!(!err.contains("s3cr3t"), "{err}");
        std::fs::write(&path, "{\"PATH\": \"s3cr3t\"}").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("PATH") && !err.contains("s3cr3t"), "{err}");
    }
}
