//! The formats the forge accepts, checked before a request is sent so that a malformed input
//! fails with a message naming what is wrong (and never reaches a URL path). Each rule is the
//! forge's own, from the field bindings of the v1 API's option types:
//!
//! - user name: `CreateUserOption.username`, `Required;Username;MaxSize(40)`: an ASCII letter or
//!   digit, then letters, digits, `_`, `-`, `.`, never two of `_-.` in a row nor one at the end;
//! - repository name: `GenerateRepoOption.name`, `Required;AlphaDashDot;MaxSize(100)`, and not
//!   `.` or `..`;
//! - email: `CreateUserOption.email`, `Required;Email;MaxSize(254)`;
//! - full name: `MaxSize(100)`; password: `MaxSize(255)`;
//! - token scopes: the forge's scope names (`read:`/`write:` per category, or `all`);
//! - organisation names are user names (one namespace); team names `AlphaDashDot`, labels and
//!   webhook URLs as [`check_team_name`], [`check_label`] and [`check_hook_url`] say.
//!
//! Token names are stricter than the forge's: `DELETE /users/{username}/tokens/{token}` reads a
//! `{token}` that parses as a number as a token *id*, so a name must start with a letter.

/// Every scope name the forge knows (`AccessTokenScope`).
pub const TOKEN_SCOPES: &[&str] = &[
    "all",
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

const MAX_USER_NAME: usize = 40;
const MAX_REPO_NAME: usize = 100;
const MAX_TOKEN_NAME: usize = 255;
const MAX_EMAIL: usize = 254;
const MAX_FULL_NAME: usize = 100;
const MAX_PASSWORD: usize = 255;
const MAX_TEAM_NAME: usize = 255;
const MAX_LABEL_NAME: usize = 50;

fn is_separator(c: char) -> bool {
    matches!(c, '_' | '-' | '.')
}

/// A user (or organisation) name.
pub fn check_user_name(name: &str) -> Result<(), String> {
    let shown = shown(name);
    let Some(first) = name.chars().next() else {
        return Err("user name is empty".into());
    };
    if name.len() > MAX_USER_NAME {
        return Err(format!("user name {shown} is longer than {MAX_USER_NAME} characters"));
    }
    if !first.is_ascii_alphanumeric() {
        return Err(format!("user name {shown} must start with an ASCII letter or digit"));
    }
    if let Some(bad) = name.chars().find(|c| !c.is_ascii_alphanumeric() && !is_separator(*c)) {
        return Err(format!("user name {shown} contains {bad:?}; only letters, digits, '_', '-' and '.' are allowed"));
    }
    let chars: Vec<char> = name.chars().collect();
    if chars.windows(2).any(|w| is_separator(w[0]) && is_separator(w[1])) {
        return Err(format!("user name {shown} has two of '_', '-', '.' in a row"));
    }
    if chars.last().copied().is_some_and(is_separator) {
        return Err(format!("user name {shown} ends with '_', '-' or '.'"));
    }
    Ok(())
}

/// A repository name.
pub fn check_repo_name(name: &str) -> Result<(), String> {
    let shown = shown(name);
    if name.is_empty() {
        return Err("repository name is empty".into());
    }
    if name.len() > MAX_REPO_NAME {
        return Err(format!("repository name {shown} is longer than {MAX_REPO_NAME} characters"));
    }
    if let Some(bad) = name.chars().find(|c| !c.is_ascii_alphanumeric() && !is_separator(*c)) {
        return Err(format!(
            "repository name {shown} contains {bad:?}; only letters, digits, '_', '-' and '.' are allowed"
        ));
    }
    if name == "." || name == ".." {
        return Err(format!("repository name {shown} is not allowed"));
    }
    Ok(())
}

/// A token name.
pub fn check_token_name(name: &str) -> Result<(), String> {
    let shown = shown(name);
    let Some(first) = name.chars().next() else {
        return Err("token name is empty".into());
    };
    if name.len() > MAX_TOKEN_NAME {
        return Err(format!("token name {shown} is longer than {MAX_TOKEN_NAME} characters"));
    }
    if !first.is_ascii_alphabetic() {
        return Err(format!(
            "token name {shown} must start with an ASCII letter (the forge reads a leading number as a token id)"
        ));
    }
    if let Some(bad) = name.chars().find(|c| !c.is_ascii_alphanumeric() && !is_separator(*c)) {
        return Err(format!("token name {shown} contains {bad:?}; only letters, digits, '_', '-' and '.' are allowed"));
    }
    Ok(())
}

/// An email address: one `@`, a local part without spaces, a domain of dot-separated labels
/// made of letters, digits and inner hyphens.
pub fn check_email(email: &str) -> Result<(), String> {
    let shown = shown(email);
    if email.is_empty() {
        return Err("email is empty".into());
    }
    if email.len() > MAX_EMAIL {
        return Err(format!("email {shown} is longer than {MAX_EMAIL} characters"));
    }
    let Some((local, domain)) = email.split_once('@') else {
        return Err(format!("email {shown} has no '@'"));
    };
    if local.is_empty() || local.starts_with('-') {
        return Err(format!("email {shown} has an empty local part or one starting with '-'"));
    }
    const LOCAL_SPECIALS: &str = ".!#$%&'*+-/=?^_`{|}~";
    if let Some(bad) = local.chars().find(|c| !c.is_ascii_alphanumeric() && !LOCAL_SPECIALS.contains(*c)) {
        return Err(format!("email {shown} has {bad:?} before the '@'"));
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if !domain.split('.').all(label_ok) {
        return Err(format!("email {shown} has a malformed domain"));
    }
    Ok(())
}

/// A full name (display name).
pub fn check_full_name(full_name: &str) -> Result<(), String> {
    if full_name.chars().count() > MAX_FULL_NAME {
        return Err(format!("full name is longer than {MAX_FULL_NAME} characters"));
    }
    if full_name.chars().any(char::is_control) {
        return Err("full name contains a control character".into());
    }
    Ok(())
}

/// A password the forge could store. The forge's minimum length is its own setting (8 unless
/// changed), so a short password is left for the forge to refuse.
pub fn check_password(password: &str) -> Result<(), String> {
    if password.is_empty() {
        return Err("password is empty".into());
    }
    if password.len() > MAX_PASSWORD {
        return Err(format!("password is longer than {MAX_PASSWORD} bytes"));
    }
    Ok(())
}

/// Token scopes: at least one, each a name in [`TOKEN_SCOPES`].
pub fn check_scopes(scopes: &[&str]) -> Result<(), String> {
    if scopes.is_empty() {
        return Err("a token needs at least one scope".into());
    }
    if let Some(bad) = scopes.iter().find(|s| !TOKEN_SCOPES.contains(s)) {
        return Err(format!("unknown token scope {}; known scopes: {}", shown(bad), TOKEN_SCOPES.join(", ")));
    }
    Ok(())
}

/// A name as shown in an error: quoted, and cut short so that a huge input cannot flood a log.
fn shown(name: &str) -> String {
    const MAX_SHOWN: usize = 60;
    if name.chars().count() <= MAX_SHOWN {
        format!("{name:?}")
    } else {
        let head: String = name.chars().take(MAX_SHOWN).collect();
        format!("{head:?}...")
    }
}

/// A team name: `CreateTeamOption.name`, `Required;AlphaDashDot;MaxSize(255)`.
pub fn check_team_name(name: &str) -> Result<(), String> {
    let shown = shown(name);
    if name.is_empty() {
        return Err("team name is empty".into());
    }
    if name.len() > MAX_TEAM_NAME {
        return Err(format!("team name {shown} is longer than {MAX_TEAM_NAME} characters"));
    }
    if let Some(bad) = name.chars().find(|c| !c.is_ascii_alphanumeric() && !is_separator(*c)) {
        return Err(format!("team name {shown} contains {bad:?}; only letters, digits, '_', '-' and '.' are allowed"));
    }
    Ok(())
}

/// A label: `CreateLabelOption`, `name` `Required` (the forge keeps it to 50 characters in its
/// table) and `color` `Required`, six hex digits with or without `#` (`label.NormalizeColor`).
pub fn check_label(name: &str, color: &str) -> Result<(), String> {
    let shown = shown(name);
    if name.trim().is_empty() {
        return Err("label name is empty".into());
    }
    if name.chars().count() > MAX_LABEL_NAME {
        return Err(format!("label name {shown} is longer than {MAX_LABEL_NAME} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(format!("label name {shown} contains a control character"));
    }
    let hex = color.strip_prefix('#').unwrap_or(color);
    if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("label colour {:?} is not six hex digits, e.g. 0075ca", color));
    }
    Ok(())
}

/// A webhook's target: an absolute http(s) URL without user info (the forge refuses anything
/// else with 422, and a user info part could hold a password).
pub fn check_hook_url(url: &str) -> Result<(), String> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') && !host.contains('@') => {}
        _ => {
            return Err(
                "webhook URL must be an http(s) URL without user info, e.g. https://swarm.example/api/forge/webhook"
                    .into(),
            );
        }
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("webhook URL contains white space".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn user_names_follow_the_forge_rules() {
        for good in ["a", "agent-7", "Bob.Smith", "x_y-z.w", &"a".repeat(40)] {
            assert_eq!(check_user_name(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("", "empty"),
            ("-lead", "must start"),
            (".lead", "must start"),
            ("a--b", "in a row"),
            ("a._b", "in a row"),
            ("trail-", "ends with"),
            ("has space", "contains ' '"),
            ("slash/y", "contains '/'"),
            ("ünïcode", "must start"),
        ] {
            let err = check_user_name(bad).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
        assert!(check_user_name(&"a".repeat(41)).unwrap_err().contains("longer than 40"));
    }

    #[test]
    fn repo_and_token_names() {
        assert_eq!(check_repo_name("agent-7.config"), Ok(()));
        assert!(check_repo_name("..").is_err());
        assert!(check_repo_name("a/b").unwrap_err().contains("'/'"));
        assert!(check_repo_name("").unwrap_err().contains("empty"));
        assert_eq!(check_token_name("hyperhive-agent"), Ok(()));
        assert!(check_token_name("123").unwrap_err().contains("token id"));
        assert!(check_token_name("0x1f").is_err());
        assert!(check_token_name("-5").is_err());
        assert!(check_token_name("a b").is_err());
    }

    #[test]
    fn emails() {
        for good in ["a@b.org", "agent-7+x@forge.example", "a.b@c-d.e"] {
            assert_eq!(check_email(good), Ok(()), "{good}");
        }
        for bad in ["", "plain", "@b.org", "a@", "a@-b.org", "a@b..org", "a b@c.org", "-a@b.org", "a@b_c.org"] {
            assert!(check_email(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn scopes_and_passwords() {
        assert_eq!(check_scopes(&["write:repository", "read:user"]), Ok(()));
        assert!(check_scopes(&[]).unwrap_err().contains("at least one"));
        assert!(check_scopes(&["repo"]).unwrap_err().contains("\"repo\""));
        assert!(check_password("").is_err());
        assert!(check_password(&"p".repeat(256)).is_err());
        assert_eq!(check_password("short"), Ok(()));
        assert!(check_full_name(&"n".repeat(101)).is_err());
        assert!(check_full_name("tab\there").is_err());
    }

    #[test]
    fn a_huge_name_is_cut_short_in_the_error() {
        let err = check_user_name(&format!("-{}", "a".repeat(10_000))).unwrap_err();
        assert!(err.len() < 200, "{err}");
    }

    proptest! {
        // Whatever a user name is, the rule answers without panicking, and what it accepts is
        // safe in a URL path segment and in a basic-auth user (no '/', ':', '%', '?', '#').
        #[test]
        fn accepted_user_names_are_path_safe(name in "\\PC{0,50}") {
            if check_user_name(&name).is_ok() {
                prop_assert!(!name.contains(['/', ':', '%', '?', '#', ' ']));
                prop_assert!(name != "." && name != "..");
                prop_assert!(name.len() <= 40);
            }
        }

        #[test]
        fn generated_good_user_names_pass(name in "[a-z0-9]([a-z0-9]|[-_.][a-z0-9]){0,19}") {
            prop_assert_eq!(check_user_name(&name), Ok(()));
        }

        #[test]
        fn accepted_token_names_never_read_as_numbers(name in "\\PC{0,40}") {
            if check_token_name(&name).is_ok() {
                prop_assert!(name.parse::<i64>().is_err());
                prop_assert!(!name.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-'));
            }
        }
    }
}
