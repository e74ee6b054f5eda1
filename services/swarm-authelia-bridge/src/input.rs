//! The rules every value from a request must pass before it reaches the users file. Each error
//! says what is wrong and what is accepted; none repeats a password.

use std::fmt;

/// A user name: `[a-z0-9][a-z0-9._-]{0,63}`. Authelia accepts more, but these are safe as YAML
/// keys, URL path segments, log fields and the user names of the systems behind the SSO.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserName(String);

/// The longest user name.
pub const MAX_NAME_CHARS: usize = 64;
/// The most groups one user may be given (the managed group included).
pub const MAX_GROUPS: usize = 32;
/// The longest group name.
pub const MAX_GROUP_CHARS: usize = 64;
/// The longest display name, in characters.
pub const MAX_DISPLAYNAME_CHARS: usize = 128;
/// The longest e-mail address (RFC 5321's path limit).
pub const MAX_EMAIL_CHARS: usize = 254;
/// The shortest password, in characters: the controller's are random and long; a short one is a
/// mistake.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// The longest password, in characters: argon2 takes any length, but a request has a size cap.
pub const MAX_PASSWORD_CHARS: usize = 1024;

/// A value that breaks a rule; the text is the whole message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl UserName {
    /// Checks `name`.
    ///
    /// # Errors
    /// When it breaks the rule; the message quotes it (names are not secret) shortened.
    pub fn parse(name: &str) -> Result<Self, Invalid> {
        let mut chars = name.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
        if first_ok && rest_ok && name.len() <= MAX_NAME_CHARS {
            Ok(Self(name.to_owned()))
        } else {
            Err(Invalid(format!(
                "user name {} is not accepted: use 1 to {MAX_NAME_CHARS} characters, lowercase letters, digits, \
                 '.', '_' or '-', starting with a letter or digit (e.g. agent-alpha)",
                shown(name)
            )))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks a group name: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`.
///
/// # Errors
/// When it breaks the rule.
pub fn group(name: &str) -> Result<(), Invalid> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if first_ok && rest_ok && name.len() <= MAX_GROUP_CHARS {
        Ok(())
    } else {
        Err(Invalid(format!(
            "group {} is not accepted: use 1 to {MAX_GROUP_CHARS} characters, letters, digits, '.', '_' or '-', \
             starting with a letter or digit",
            shown(name)
        )))
    }
}

/// Checks a display name: 1 to 128 characters, no control characters, not only spaces.
///
/// # Errors
/// When it breaks the rule.
pub fn displayname(name: &str) -> Result<(), Invalid> {
    if name.trim().is_empty() {
        return Err(Invalid("displayname is empty; give the name people see, e.g. \"Agent alpha\"".into()));
    }
    if name.chars().count() > MAX_DISPLAYNAME_CHARS {
        return Err(Invalid(format!("displayname is longer than {MAX_DISPLAYNAME_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(Invalid("displayname holds a control character (newline, tab...); use one line of text".into()));
    }
    Ok(())
}

/// Checks the shape of an e-mail address: `local@domain`, one `@`, a local part of printable
/// characters without spaces or quotes, a domain of dot-separated labels of letters, digits and
/// '-'. Deliverability is not this service's business.
///
/// # Errors
/// When it does not have that shape.
pub fn email(address: &str) -> Result<(), Invalid> {
    let bad = || {
        Invalid(format!(
            "email {} is not an e-mail address: write it as local@domain, e.g. agent-alpha@example.com",
            shown(address)
        ))
    };
    if address.chars().count() > MAX_EMAIL_CHARS {
        return Err(Invalid(format!("email is longer than {MAX_EMAIL_CHARS} characters")));
    }
    let (local, domain) = address.split_once('@').ok_or_else(bad)?;
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && local.chars().all(|c| {
            c.is_ascii_graphic() && !matches!(c, '@' | '"' | '(' | ')' | ',' | ':' | ';' | '<' | '>' | '[' | '\\' | ']')
        });
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if local_ok && domain.split('.').all(label_ok) { Ok(()) } else { Err(bad()) }
}

/// Checks a password's length (never its content, never shown).
///
/// # Errors
/// When it is shorter than 12 or longer than 1024 characters.
pub fn password(password: &str) -> Result<(), Invalid> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD_CHARS {
        Err(Invalid(format!("password is shorter than {MIN_PASSWORD_CHARS} characters; use a long random one")))
    } else if chars > MAX_PASSWORD_CHARS {
        Err(Invalid(format!("password is longer than {MAX_PASSWORD_CHARS} characters")))
    } else {
        Ok(())
    }
}

/// `value` quoted for a message, cut to 80 characters so an error stays one readable line.
fn shown(value: &str) -> String {
    const LIMIT: usize = 80;
    if value.chars().count() > LIMIT {
        let cut: String = value.chars().take(LIMIT).collect();
        format!("{cut:?}...")
    } else {
        format!("{value:?}")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn names_follow_the_rule() {
        for good in ["a", "0", "agent-alpha", "a.b_c-d", &"a".repeat(64)] {
            assert!(UserName::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "-a", ".a", "_a", "Alice", "a b", "a/b", "a%2f", "ä", &"a".repeat(65), "a\n", "a:b"] {
            let err = UserName::parse(bad).unwrap_err().0;
            assert!(err.contains("is not accepted"), "{err}");
        }
    }

    #[test]
    fn groups_emails_displaynames_and_passwords_follow_their_rules() {
        assert!(group("Admins").is_ok() && group("hyperhive-agents").is_ok());
        assert!(group("").is_err() && group("a b").is_err() && group("-x").is_err() && group(&"g".repeat(65)).is_err());
        for good in ["a@b", "agent.alpha+tag@mail.example.com", "x@localhost", "a_b@x-y.z"] {
            assert!(email(good).is_ok(), "{good}");
        }
        for bad in ["", "a", "@b", "a@", "a@b@c", "a b@c", "a@b..c", "a@-b.c", "a@b_c", "\"a\"@b", "a@b.c\n"] {
            assert!(email(bad).is_err(), "{bad}");
        }
        assert!(displayname("Agent α").is_ok());
        assert!(displayname(" ").is_err() && displayname("a\nb").is_err() && displayname(&"d".repeat(129)).is_err());
        assert!(password(&"p".repeat(12)).is_ok() && password(&"p".repeat(1024)).is_ok());
        let short = password("hunter2-abc").unwrap_err().0;
        assert!(short.contains("shorter than 12") && !short.contains("hunter2"), "{short}");
        assert!(password(&"p".repeat(1025)).is_err());
    }

    proptest! {
        #[test]
        fn every_accepted_name_is_safe_in_a_path_and_as_a_yaml_key(name in "\\PC{0,70}") {
            if let Ok(parsed) = UserName::parse(&name) {
                prop_assert!(parsed.as_str().len() <= MAX_NAME_CHARS);
                prop_assert!(parsed.as_str().bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b)));
            }
        }

        #[test]
        fn no_input_makes_a_validator_panic(s in "\\PC{0,300}") {
            let _ = (UserName::parse(&s), group(&s), email(&s), displayname(&s), password(&s));
        }
    }
}
