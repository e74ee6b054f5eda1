//! Secret environment variables of an agent: the operator sets them through the controller
//! (`PUT /api/agents/{name}/secrets/{VAR}`, or `PUT /api/secrets/{VAR}` for every agent), they
//! travel sealed in the agent's deploy or credentials message ([`crate::deploy::Secrets::env`]),
//! hive-c0re writes them to the agent's **env file** ([`ENV_FILE`], mode 0600 or 0400, owned by
//! the agent), and hive-agent reads that file at the start of every turn and gives its variables
//! to the turn's command, so a change reaches the next turn without a restart
//! (docs/swarm/secrets.md).
//!
//! The rules here are shared by all three, so a name the controller takes is one the hive and
//! the agent take too. Nothing here ever puts a value into an error.

use std::collections::BTreeMap;

/// The environment variable naming the agent's env file (set by hive-c0re for hive-agent).
pub const ENV_FILE_VAR: &str = "HIVE_AGENT_ENV_FILE";
/// The env file's name in the agent's secrets directory. A deploy message's secret files may
/// not take this name.
pub const ENV_FILE: &str = "agent.env";
/// The longest variable name.
pub const MAX_NAME_LEN: usize = 128;
/// The largest value, in bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// The most variables one agent can have (its own and the swarm's defaults together), so an
/// env file stays well under what a process's environment may hold.
pub const MAX_VARS: usize = 256;
/// The largest env file hive-agent reads: every variable at its largest, JSON-escaped.
pub const MAX_FILE_BYTES: u64 = 24 << 20;

/// Names a process, its shell or its loader depend on: setting one would break every turn (or
/// change which code runs in it), so none can be a secret. Every name starting with `LD_` (the
/// dynamic loader's) and `HIVE_` (hyperhive's own settings) is refused as well.
pub const RESERVED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PWD",
    "OLDPWD",
    "IFS",
    "ENV",
    "BASH_ENV",
    "CDPATH",
    "PS4",
    "TMPDIR",
    "TZDIR",
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "RESOLV_HOST_CONF",
    "MALLOC_CHECK_",
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "CREDENTIALS_DIRECTORY",
    "STATE_DIRECTORY",
    "RUNTIME_DIRECTORY",
    "INVOCATION_ID",
];

/// Whether `name` may be a secret variable: `^[A-Z_][A-Z0-9_]*$`, at most [`MAX_NAME_LEN`]
/// characters, not starting with `HIVE_` or `LD_`, not one of [`RESERVED`].
///
/// # Errors
/// What is wrong with it (a name is not secret, so the message quotes it, shortened).
pub fn check_name(name: &str) -> Result<(), String> {
    let shown: String = name.chars().take(MAX_NAME_LEN + 1).collect();
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("a secret's name has 1 to {MAX_NAME_LEN} characters, not {}", name.len()));
    }
    let first_ok = name.starts_with(|c: char| c.is_ascii_uppercase() || c == '_');
    if !first_ok || !name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
        return Err(format!(
            "{shown:?} is not a secret's name: use upper-case letters, digits and '_', not starting with a digit \
             (^[A-Z_][A-Z0-9_]*$)"
        ));
    }
    if name.starts_with("HIVE_") {
        return Err(format!("{shown:?} starts with HIVE_, which names hyperhive's own settings"));
    }
    if name.starts_with("LD_") || RESERVED.contains(&name) {
        return Err(format!(
            "{shown:?} is a variable processes depend on (PATH, HOME, USER, SHELL, LD_*, ...; see docs/swarm/secrets.md), \
             so it cannot be a secret"
        ));
    }
    Ok(())
}

/// Whether `value` may be a secret's value: not empty, at most [`MAX_VALUE_BYTES`], UTF-8
/// without a NUL byte (an environment cannot hold one).
///
/// # Errors
/// What is wrong with it, never quoting it.
pub fn check_value(value: &[u8]) -> Result<(), String> {
    if value.is_empty() {
        return Err("a secret's value is empty; send at least one byte".into());
    }
    if value.len() > MAX_VALUE_BYTES {
        return Err(format!("a secret's value is at most {MAX_VALUE_BYTES} bytes, not {}", value.len()));
    }
    if std::str::from_utf8(value).is_err() {
        return Err("a secret's value must be UTF-8 text (base64-encode binary values)".into());
    }
    if value.contains(&0) {
        return Err("a secret's value cannot hold a NUL byte (an environment cannot)".into());
    }
    Ok(())
}

/// Checks every name and value of `vars` and their number.
///
/// # Errors
/// The first problem, naming the variable, never quoting a value.
pub fn check_all(vars: &BTreeMap<String, String>) -> Result<(), String> {
    if vars.len() > MAX_VARS {
        return Err(format!("an agent has at most {MAX_VARS} secret variables, not {}", vars.len()));
    }
    for (name, value) in vars {
        check_name(name)?;
        check_value(value.as_bytes()).map_err(|e| format!("secret {name}: {e}"))?;
    }
    Ok(())
}

/// The env file's text: a JSON object of name to value, one variable per line.
pub fn render(vars: &BTreeMap<String, String>) -> String {
    let mut text = String::from("{\n");
    let mut first = true;
    for (name, value) in vars {
        if !first {
            text.push_str(",\n");
        }
        first = false;
        let quoted = |s: &str| serde_json::to_string(s).expect("a string serializes");
        text.push_str(&format!("  {}: {}", quoted(name), quoted(value)));
    }
    text.push_str("\n}\n");
    text
}

/// Why an env file was not taken. Says where, never what stood there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not a JSON object of strings.
    #[error("line {line}, column {column}: not a JSON object of variable names to text values")]
    Syntax {
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
    },
    /// A name or value the rules refuse.
    #[error("{0}")]
    Refused(String),
}

/// The variables of an env file's text.
///
/// # Errors
/// [`ParseError`] saying where.
pub fn parse(bytes: &[u8]) -> Result<BTreeMap<String, String>, ParseError> {
    let vars: BTreeMap<String, String> =
        serde_json::from_slice(bytes).map_err(|e| ParseError::Syntax { line: e.line(), column: e.column() })?;
    check_all(&vars).map_err(ParseError::Refused)?;
    Ok(vars)
}

/// The variables of an environment file in systemd's `EnvironmentFile=` syntax (a declared
/// agent's `environmentFile`): `NAME=value` lines, the value optionally in double or single
/// quotes (inside double quotes `\"` and `\\` stand for `"` and `\`); blank lines and lines
/// starting with `#` or `;` are skipped; no line continuations. A line that is not an
/// assignment, or names a variable [`check_name`] refuses, is left out, and reported as
/// `(line, why)`: the why names the variable at most, never a value.
pub fn parse_environment_file(text: &str) -> (BTreeMap<String, String>, Vec<(usize, String)>) {
    let mut vars = BTreeMap::new();
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            problems.push((index + 1, "not a NAME=value line".to_owned()));
            continue;
        };
        let name = name.trim();
        if let Err(why) = check_name(name) {
            problems.push((index + 1, why));
            continue;
        }
        let value = value.trim();
        let value = if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
            value[1..value.len() - 1].replace("\\\\", "\u{0}").replace("\\\"", "\"").replace('\u{0}', "\\")
        } else if value.len() >= 2 && value.starts_with('\'') && value.ends_with('\'') {
            value[1..value.len() - 1].to_owned()
        } else {
            value.to_owned()
        };
        if let Err(why) = check_value(value.as_bytes()) {
            problems.push((index + 1, format!("{name}: {why}")));
            continue;
        }
        vars.insert(name.to_owned(), value);
    }
    (vars, problems)
}

/// The record-key token of a variable's name in the controller's secret store, whose keys are
/// lower case: the name lower-cased (lossless, since a name has no lower-case letter).
pub fn record_token(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// The name a record-key token stands for ([`record_token`] reversed), if it is one.
pub fn name_of_token(token: &str) -> Option<String> {
    let name = token.to_ascii_uppercase();
    (token.bytes().all(|b| !b.is_ascii_uppercase()) && check_name(&name).is_ok()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_pattern_and_spare_what_processes_need() {
        for good in ["GITHUB_TOKEN", "_X", "A1", &"A".repeat(MAX_NAME_LEN)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "1A",
            "a",
            "Ab",
            "A-B",
            "A B",
            "A=B",
            "HIVE_AGENT_CREDS",
            "HIVE_X",
            "PATH",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_ANYTHING",
            "HOME",
            "USER",
            "SHELL",
            "IFS",
            "BASH_ENV",
            &"A".repeat(MAX_NAME_LEN + 1),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn values_are_bounded_text_and_never_quoted() {
        assert_eq!(check_value(b"s3cr3t"), Ok(()));
        assert_eq!(check_value(&vec![b'x'; MAX_VALUE_BYTES]), Ok(()));
        for bad in [&b""[..], &vec![b'x'; MAX_VALUE_BYTES + 1], b"s3cr3t\0", b"\xff\xfe"] {
            let err = check_value(bad).unwrap_err();
            assert!(!err.contains("s3cr3t"), "{err}");
        }
    }

    #[test]
    fn a_rendered_file_parses_back_and_a_bad_one_names_the_line_only() {
        let vars = BTreeMap::from([
            ("A".to_owned(), "multi\nline \"quoted\" value".to_owned()),
            ("B_2".to_owned(), "x".to_owned()),
        ]);
        let text = render(&vars);
        assert_eq!(text.lines().count(), 4, "one variable per line: {text}");
        assert_eq!(parse(text.as_bytes()).unwrap(), vars);
        assert_eq!(parse(render(&BTreeMap::new()).as_bytes()).unwrap(), BTreeMap::new());
        let broken = "{\n  \"A\": \"s3cr3t\",\n  \"B\": s3cr3t\n}\n";
        let err = parse(broken.as_bytes()).unwrap_err();
        assert!(matches!(err, ParseError::Syntax { line: 3, .. }), "{err}");
        assert!(!err.to_string().contains("s3cr3t"), "{err}");
        let refused = parse(b"{\"PATH\": \"s3cr3t\"}").unwrap_err();
        assert!(matches!(refused, ParseError::Refused(_)) && !refused.to_string().contains("s3cr3t"), "{refused}");
    }

    #[test]
    fn an_environment_file_reads_as_systemd_reads_the_common_forms() {
        let text = "# comment\n; also\n\nPLAIN=s3cr3t one\nDOUBLE=\"a \\\"q\\\" \\\\ b\"\nSINGLE='x \"y\"'\n  SPACED = v \nPATH=/evil\nnot an assignment s3cr3t\nEMPTY=\n";
        let (vars, problems) = parse_environment_file(text);
        assert_eq!(vars.get("PLAIN").map(String::as_str), Some("s3cr3t one"));
        assert_eq!(vars.get("DOUBLE").map(String::as_str), Some("a \"q\" \\ b"));
        assert_eq!(vars.get("SINGLE").map(String::as_str), Some("x \"y\""));
        assert_eq!(vars.get("SPACED").map(String::as_str), Some("v"));
        assert_eq!(vars.len(), 4, "{vars:?}");
        let lines: Vec<usize> = problems.iter().map(|(line, _)| *line).collect();
        assert_eq!(lines, vec![8, 9, 10], "{problems:?}");
        assert!(problems.iter().all(|(_, why)| !why.contains("s3cr3t") && !why.contains("/evil")), "{problems:?}");
    }

    #[test]
    fn record_tokens_map_names_both_ways() {
        assert_eq!(record_token("GITHUB_TOKEN"), "github_token");
        assert_eq!(name_of_token("github_token").as_deref(), Some("GITHUB_TOKEN"));
        assert_eq!(name_of_token("GITHUB_TOKEN"), None, "a token is lower case");
        assert_eq!(name_of_token("path"), None);
        assert_eq!(name_of_token("a-b"), None);
    }
}
