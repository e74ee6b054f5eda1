//! The checks made before anything is sent, so a bad input fails here with a clear reason
//! instead of as a server's terse 400 (or, for a NUL byte, as a MAC over ambiguous fields).

use super::MatrixError;
use crate::secret::Secret;

/// Synapse refuses longer usernames and passwords in shared-secret registration.
const MAX_LOCALPART_LEN: usize = 255;
const MAX_PASSWORD_LEN: usize = 512;
/// Synapse's limit on display names.
const MAX_DISPLAYNAME_LEN: usize = 256;
/// The Matrix spec's limit on a whole user id.
const MAX_USER_ID_LEN: usize = 255;

/// A localpart of the Matrix user id grammar: `a-z`, `0-9`, and `. _ = - / +`.
pub(super) fn check_localpart(localpart: &str) -> Result<(), MatrixError> {
    let reject = |reason: String| Err(MatrixError::InvalidInput { what: "localpart", reason });
    if localpart.is_empty() {
        return reject("it is empty".to_owned());
    }
    if localpart.len() > MAX_LOCALPART_LEN {
        return reject(format!("it is longer than {MAX_LOCALPART_LEN} bytes"));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._=-/+".contains(c);
    if let Some(bad) = localpart.chars().find(|&c| !allowed(c)) {
        return reject(format!(
            "{:?} has the character {bad:?}; a localpart may only contain a-z, 0-9 and . _ = - / +",
            localpart.chars().take(64).collect::<String>()
        ));
    }
    Ok(())
}

/// A password the homeserver accepts; never echoed in the error.
pub(super) fn check_password(password: &Secret) -> Result<(), MatrixError> {
    let reject = |reason: &str| Err(MatrixError::InvalidInput { what: "password", reason: reason.to_owned() });
    let text = password.expose();
    if text.is_empty() {
        return reject("it is empty");
    }
    if text.chars().count() > MAX_PASSWORD_LEN {
        return reject("it is longer than 512 characters");
    }
    // The registration MAC separates its fields with NUL bytes.
    if text.contains('\0') {
        return reject("it contains a NUL byte");
    }
    Ok(())
}

/// A user id `@localpart:server`. The localpart may be a historical one (any printable ASCII
/// but `:`), as the admin API is asked about accounts the controller did not name; the server
/// name is printable ASCII (it may hold a port, or an IPv6 address in brackets).
pub(super) fn check_user_id(user_id: &str) -> Result<(), MatrixError> {
    let reject = |reason: &str| {
        Err(MatrixError::InvalidInput {
            what: "user id",
            reason: format!("{:?} {reason}", user_id.chars().take(64).collect::<String>()),
        })
    };
    if user_id.len() > MAX_USER_ID_LEN {
        return reject("is longer than 255 bytes");
    }
    let Some((localpart, server)) = user_id.strip_prefix('@').and_then(|rest| rest.split_once(':')) else {
        return reject("is not of the form @localpart:server");
    };
    if localpart.is_empty() || server.is_empty() {
        return reject("has an empty localpart or server name");
    }
    if !user_id.chars().all(|c| c.is_ascii_graphic()) {
        return reject("has a character outside printable ASCII");
    }
    Ok(())
}

/// A display name: at most 256 characters, no control characters.
pub(super) fn check_displayname(displayname: &str) -> Result<(), MatrixError> {
    let reject = |reason: String| Err(MatrixError::InvalidInput { what: "display name", reason });
    if displayname.chars().count() > MAX_DISPLAYNAME_LEN {
        return reject(format!("it is longer than {MAX_DISPLAYNAME_LEN} characters"));
    }
    if displayname.chars().any(char::is_control) {
        return reject("it contains a control character".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(result: Result<(), MatrixError>) -> String {
        result.expect_err("refused").to_string()
    }

    #[test]
    fn localparts_follow_the_user_id_grammar() {
        for good in ["agent-a", "a", "x.y_z=1/2+3", &"a".repeat(255)] {
            check_localpart(good).unwrap_or_else(|err| panic!("{good}: {err}"));
        }
        assert!(reason(check_localpart("")).contains("empty"));
        assert!(reason(check_localpart("Agent")).contains("'A'"));
        assert!(reason(check_localpart("a b")).contains("' '"));
        assert!(reason(check_localpart("@a:b")).contains("'@'"));
        assert!(reason(check_localpart("ä")).contains("a-z"));
        assert!(reason(check_localpart(&"a".repeat(256))).contains("longer"));
    }

    #[test]
    fn passwords_are_checked_without_being_shown() {
        check_password(&Secret::new("correct horse")).expect("fine");
        assert!(reason(check_password(&Secret::new(""))).contains("empty"));
        let text = reason(check_password(&Secret::new("sec\0ret")));
        assert!(text.contains("NUL") && !text.contains("sec"), "{text}");
        assert!(reason(check_password(&Secret::new("p".repeat(513)))).contains("longer"));
    }

    #[test]
    fn user_ids_are_at_localpart_colon_server() {
        for good in ["@agent-a:matrix.example", "@Old_Name!:localhost:8008", "@a:[::1]", "@a/b:x"] {
            check_user_id(good).unwrap_or_else(|err| panic!("{good}: {err}"));
        }
        for (bad, needle) in [
            ("agent-a:x", "form"),
            ("@agent-a", "form"),
            ("@:x", "empty"),
            ("@a:", "empty"),
            ("@a b:x", "printable"),
            ("@ä:x", "printable"),
            ("@a:x\n", "printable"),
        ] {
            let text = reason(check_user_id(bad));
            assert!(text.contains(needle) && text.contains("user id"), "{bad}: {text}");
        }
        assert!(reason(check_user_id(&format!("@{}:x", "a".repeat(253)))).contains("longer"));
    }

    #[test]
    fn display_names_are_bounded() {
        check_displayname("Agent A (builds)").expect("fine");
        check_displayname("").expect("empty is allowed");
        assert!(reason(check_displayname("a\nb")).contains("control"));
        assert!(reason(check_displayname(&"d".repeat(257))).contains("longer"));
    }
}
