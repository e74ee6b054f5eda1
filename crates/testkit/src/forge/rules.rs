//! The forge's input rules, written from its field bindings and name checks (not shared with
//! the adapter, so that a mistake in one shows up against the other).

/// `[Username]`: `^[\da-zA-Z][\w.-]*$` with no two of `_-.` in a row and none at the end
/// (dots allowed, the default `ALLOW_DOTS_IN_USERNAMES`).
pub(super) fn valid_username(name: &str) -> bool {
    let bytes = name.as_bytes();
    let special = |b: u8| matches!(b, b'_' | b'-' | b'.');
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || special(*b))
        && !bytes.windows(2).any(|w| special(w[0]) && special(w[1]))
        && !special(bytes[bytes.len() - 1])
}

/// `AlphaDashDot`: letters, digits, `_`, `-`, `.`.
pub(super) fn alpha_dash_dot(name: &str) -> bool {
    name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The forge's reserved user names and name patterns (`reservedUsernames`,
/// `reservedUserPatterns`); `Err` carries its message.
pub(super) fn usable_user_name(name: &str) -> Result<(), String> {
    const RESERVED: &[&str] = &[
        ".",
        "..",
        ".well-known",
        "admin",
        "api",
        "assets",
        "attachments",
        "avatar",
        "avatars",
        "captcha",
        "commits",
        "debug",
        "error",
        "explore",
        "favicon.ico",
        "ghost",
        "issues",
        "login",
        "manifest.json",
        "metrics",
        "milestones",
        "new",
        "notifications",
        "org",
        "pulls",
        "raw",
        "repo",
        "repo-avatars",
        "robots.txt",
        "search",
        "serviceworker.js",
        "ssh_info",
        "swagger.v1.json",
        "user",
        "v2",
        "gitea-actions",
    ];
    const PATTERNS: &[&str] = &[".keys", ".gpg", ".rss", ".atom", ".png"];
    let lower = name.to_ascii_lowercase();
    if RESERVED.contains(&lower.as_str()) {
        return Err(format!("name is reserved [name: {name}]"));
    }
    if let Some(suffix) = PATTERNS.iter().find(|p| lower.ends_with(*p)) {
        return Err(format!("name pattern is not allowed [pattern: *{suffix}]"));
    }
    Ok(())
}

/// `IsUsableRepoName`: reserved names and name patterns of repositories.
pub(super) fn usable_repo_name(name: &str) -> Result<(), String> {
    let lower = name.to_ascii_lowercase();
    if [".", "..", "-"].contains(&lower.as_str()) {
        return Err(format!("name is reserved [name: {name}]"));
    }
    if let Some(suffix) = [".git", ".wiki", ".rss", ".atom"].iter().find(|p| lower.ends_with(*p)) {
        return Err(format!("name pattern is not allowed [pattern: *{suffix}]"));
    }
    Ok(())
}

/// `[Email]` and `ValidateEmail`: one `@`, a local part of the allowed characters not
/// starting with `-`, and a domain of labels of letters, digits and inner hyphens.
pub(super) fn valid_email(email: &str) -> bool {
    let Some((local, domain)) = email.rsplit_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && !local.starts_with('-')
        && local.chars().all(|c| c.is_ascii_alphanumeric() || ".!#$%&'*+-/=?^_`{|}~".contains(c));
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    local_ok && domain.split('.').all(label_ok)
}

/// `AccessTokenScope.Normalize`: every listed scope known; `Err` carries the forge's message.
pub(super) fn normalize_scopes(scopes: &[String]) -> Result<Vec<String>, String> {
    const KNOWN: &[&str] = &[
        "all",
        "public-only",
        "read:activitypub",
        "write:activitypub",
        "read:admin",
        "write:admin",
        "read:issue",
        "write:issue",
        "read:misc",
        "write:misc",
        "read:notification",
        "write:notification",
        "read:organization",
        "write:organization",
        "read:package",
        "write:package",
        "read:repository",
        "write:repository",
        "read:user",
        "write:user",
    ];
    let mut out: Vec<String> = Vec::new();
    for scope in scopes.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        if !KNOWN.contains(&scope) {
            return Err(format!("invalid access token scope provided: invalid access token scope: {scope}"));
        }
        if !out.iter().any(|s| s == scope) {
            out.push(scope.to_owned());
        }
    }
    Ok(out)
}

/// Whether a token's scopes reach `category` at `write` (or only read) level: `all`, the
/// category's `write:`, or for reading its `read:`.
pub(super) fn scopes_allow(scopes: &[String], category: &str, write: bool) -> bool {
    scopes
        .iter()
        .any(|s| s == "all" || *s == format!("write:{category}") || (!write && *s == format!("read:{category}")))
}

/// Go's `strconv.ParseInt(s, 0, 64)`, which the token delete route uses to tell an id from a
/// name: an optional sign, then decimal, `0x` hex, `0o`/leading-`0` octal or `0b` binary.
pub(super) fn go_parse_int(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest.to_owned())
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest.to_owned())
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest.to_owned())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_owned())
    } else {
        (10, lower)
    };
    if body.is_empty() || body.starts_with(['+', '-']) {
        return None;
    }
    let value = i64::from_str_radix(&body, radix).ok()?;
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(valid_username("agent-7"));
        assert!(!valid_username("a..b") && !valid_username("_a") && !valid_username("a_") && !valid_username(""));
        assert!(usable_user_name("Admin").is_err() && usable_user_name("bob.keys").is_err());
        assert!(usable_repo_name("x.git").is_err() && usable_repo_name("config").is_ok());
        assert!(valid_email("a@b.org") && valid_email("a@b") && !valid_email("nope") && !valid_email("-a@b.org"));
        assert_eq!(normalize_scopes(&["read:user, write:repository".into()]).unwrap().len(), 2);
        assert!(normalize_scopes(&["repo".into()]).is_err());
        assert!(scopes_allow(&["write:user".into()], "user", false));
        assert!(!scopes_allow(&["read:user".into()], "user", true));
        assert_eq!(go_parse_int("12"), Some(12));
        assert_eq!(go_parse_int("0x1f"), Some(31));
        assert_eq!(go_parse_int("-0b11"), Some(-3));
        assert_eq!(go_parse_int("017"), Some(15));
        assert_eq!(go_parse_int("agent"), None);
        assert_eq!(go_parse_int("1a"), None);
    }
}
