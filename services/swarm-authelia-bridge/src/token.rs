//! The bearer token every `/v1` request must carry, read once at start from a file.
//!
//! The token is compared in constant time, over SHA-256 digests of both sides, so neither the
//! content nor the length of the real token leaks through response timing. It is never logged,
//! never part of an error and never shown by `Debug`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The shortest token accepted: 16 bytes of text. A token is made with e.g.
/// `head -c 32 /dev/urandom | base64`; anything shorter is guessable over the network.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The bearer token.
#[derive(Clone)]
pub struct BearerToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// Why a token file was refused. The messages name the file, never its content.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file cannot be read.
    #[error("cannot read the token file {path}: {source}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Other users of the machine may read it.
    #[error(
        "the token file {path} is readable by every user (mode {mode:o}); make it readable by the bridge's user only: chmod 600 {path}"
    )]
    WorldReadable {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// Empty, or only whitespace.
    #[error(
        "the token file {path} is empty; write a random token into it, e.g. head -c 32 /dev/urandom | base64 > {path}"
    )]
    Empty {
        /// The file.
        path: String,
    },
    /// Too short to resist guessing.
    #[error(
        "the token in {path} is shorter than {MIN_TOKEN_BYTES} bytes; use a random one, e.g. head -c 32 /dev/urandom | base64 > {path}"
    )]
    TooShort {
        /// The file.
        path: String,
    },
    /// Not UTF-8 text (a header value must be text).
    #[error(
        "the token file {path} does not hold text; write a printable token, e.g. head -c 32 /dev/urandom | base64 > {path}"
    )]
    NotText {
        /// The file.
        path: String,
    },
}

impl BearerToken {
    /// Reads the token from `path`: its text without surrounding whitespace (a trailing newline
    /// is common).
    ///
    /// # Errors
    /// When the file cannot be read, is readable by every user, is empty or short, or is not text.
    pub fn from_file(path: &Path) -> Result<Self, TokenFileError> {
        let shown = path.display().to_string();
        let unreadable = |source| TokenFileError::Unreadable { path: shown.clone(), source };
        let metadata = std::fs::metadata(path).map_err(unreadable)?;
        let mode = metadata.permissions().mode() & 0o7777;
        if mode & 0o004 != 0 {
            return Err(TokenFileError::WorldReadable { path: shown, mode });
        }
        let bytes = std::fs::read(path).map_err(unreadable)?;
        let text = String::from_utf8(bytes).map_err(|_| TokenFileError::NotText { path: shown.clone() })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(TokenFileError::Empty { path: shown });
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenFileError::NotText { path: shown });
        }
        if token.len() < MIN_TOKEN_BYTES {
            return Err(TokenFileError::TooShort { path: shown });
        }
        Ok(Self::new(token))
    }

    /// A token from its text (tests, and [`Self::from_file`]).
    pub fn new(token: &str) -> Self {
        Self { digest: Sha256::digest(token.as_bytes()).into() }
    }

    /// Whether `Authorization` header value `header` is `Bearer <this token>` (the scheme's case
    /// does not matter, as HTTP says), in constant time with respect to the token.
    pub fn admits(&self, header: Option<&[u8]>) -> bool {
        let Some(offered) = header
            .and_then(|h| h.split_at_checked(7))
            .and_then(|(scheme, rest)| scheme.eq_ignore_ascii_case(b"Bearer ").then_some(rest))
        else {
            return false;
        };
        let offered: [u8; 32] = Sha256::digest(offered).into();
        self.digest.ct_eq(&offered).into()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file(content: &[u8], mode: u32) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content).unwrap();
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        f
    }

    #[test]
    fn a_good_file_gives_a_token_that_admits_only_itself() {
        let f = file(b"0123456789abcdef-token\n", 0o600);
        let token = BearerToken::from_file(f.path()).unwrap();
        assert!(token.admits(Some(b"Bearer 0123456789abcdef-token")));
        assert!(!token.admits(Some(b"Bearer 0123456789abcdef-toke")));
        assert!(!token.admits(Some(b"Bearer 0123456789abcdef-token ")));
        assert!(token.admits(Some(b"bearer 0123456789abcdef-token")));
        assert!(!token.admits(Some(b"Bearer  0123456789abcdef-token")));
        assert!(!token.admits(Some(b"Basic 0123456789abcdef-token")));
        assert!(!token.admits(Some(b"Bearer")));
        assert!(!token.admits(Some(b"0123456789abcdef-token")));
        assert!(!token.admits(None));
        assert_eq!(format!("{token:?}"), "BearerToken(<redacted>)");
    }

    #[test]
    fn bad_files_are_refused_without_showing_their_content() {
        let secret = b"0123456789abcdef-secret";
        let world = file(secret, 0o644);
        let err = BearerToken::from_file(world.path()).unwrap_err().to_string();
        assert!(err.contains("readable by every user") && err.contains("chmod 600"), "{err}");
        assert!(!err.contains("0123456789abcdef"), "{err}");

        let empty = file(b" \n", 0o600);
        assert!(BearerToken::from_file(empty.path()).unwrap_err().to_string().contains("is empty"));
        let short = file(b"short", 0o600);
        assert!(BearerToken::from_file(short.path()).unwrap_err().to_string().contains("shorter than 16"));
        let binary = file(&[0xff, 0xfe, 0x00, 0x41], 0o600);
        assert!(BearerToken::from_file(binary.path()).unwrap_err().to_string().contains("does not hold text"));
        let inner_space = file(b"0123456789 abcdef", 0o600);
        assert!(BearerToken::from_file(inner_space.path()).unwrap_err().to_string().contains("does not hold text"));
        let missing = BearerToken::from_file(Path::new("/nonexistent/token")).unwrap_err().to_string();
        assert!(missing.contains("cannot read the token file /nonexistent/token"), "{missing}");
    }
}
