//! The standard `.creds` file (a user JWT and its nkey seed between markers) and 0600 files.

use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nkeys::{KeyPair, KeyPairType};

use crate::error::CredsError;

const JWT_BEGIN: &str = "-----BEGIN NATS USER JWT-----";
const JWT_END: &str = "------END NATS USER JWT------";
const SEED_BEGIN: &str = "-----BEGIN USER NKEY SEED-----";
const SEED_END: &str = "------END USER NKEY SEED------";

/// Secret files (seeds, creds) are readable by their owner only.
pub const SECRET_MODE: u32 = 0o600;

/// The text of a `.creds` file as `nsc` writes it.
pub fn format_creds(jwt: &str, seed: &str) -> String {
    format!(
        "{JWT_BEGIN}\n{jwt}\n{JWT_END}\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\
         NKEYs are sensitive and should be treated as secrets.\n\n\
         {SEED_BEGIN}\n{seed}\n{SEED_END}\n\n\
         *************************************************************\n"
    )
}

/// The user JWT in a `.creds` file (to inspect what it grants).
///
/// # Errors
/// [`CredsError::Io`] or [`CredsError::BadCreds`].
pub fn read_creds_jwt(path: &Path) -> Result<String, CredsError> {
    let text = fs::read_to_string(path).map_err(CredsError::io("read", path))?;
    let jwt = section(&text, JWT_MARKERS).map_err(|why| CredsError::BadCreds { path: path.to_path_buf(), why })?;
    Ok(jwt.to_owned())
}

/// A user credential: the JWT of a `.creds` file and the key pair of its seed, to sign a
/// server's nonce with. Its `Debug` shows the public key only, so it can be logged.
pub struct UserCreds {
    jwt: String,
    key: KeyPair,
}

impl UserCreds {
    /// The user JWT.
    pub fn jwt(&self) -> &str {
        &self.jwt
    }

    /// The public key of the seed (a user JWT's `sub` must be this key).
    pub fn public_key(&self) -> String {
        self.key.public_key()
    }

    /// Signs `data` (a server's nonce) with the seed.
    ///
    /// # Errors
    /// [`CredsError::Key`], naming no part of the seed.
    pub fn sign(&self, data: &[u8]) -> Result<Vec<u8>, CredsError> {
        self.key.sign(data).map_err(|_| CredsError::Key("cannot sign with the credential's seed".to_owned()))
    }
}

impl fmt::Debug for UserCreds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserCreds").field("public_key", &self.key.public_key()).finish_non_exhaustive()
    }
}

/// Reads a `.creds` file: its user JWT and its user seed.
///
/// # Errors
/// [`CredsError::Io`] or [`CredsError::BadCreds`]; neither holds any part of the seed.
pub fn read_creds(path: &Path) -> Result<UserCreds, CredsError> {
    let text = fs::read_to_string(path).map_err(CredsError::io("read", path))?;
    parse_creds(path, &text)
}

/// Parses the text of a `.creds` file (`path` only names it in errors). The JWT is not verified
/// here; [`crate::jwt::verified_claims`] does that.
///
/// # Errors
/// [`CredsError::BadCreds`], holding no part of the seed.
pub fn parse_creds(path: &Path, text: &str) -> Result<UserCreds, CredsError> {
    let bad = |why| CredsError::BadCreds { path: path.to_path_buf(), why };
    let jwt = section(text, JWT_MARKERS).map_err(bad)?;
    let seed = section(text, SEED_MARKERS).map_err(bad)?;
    // The nkeys error is not passed on: it might quote the text it could not decode.
    let key = KeyPair::from_seed(seed).map_err(|_| bad("the seed is not a valid nkey seed"))?;
    if key.key_pair_type() != KeyPairType::User {
        return Err(bad("the seed is not a user seed"));
    }
    Ok(UserCreds { jwt: jwt.to_owned(), key })
}

/// A section's markers and what is said when it is missing or empty.
struct Markers {
    begin: &'static str,
    end: &'static str,
    no_begin: &'static str,
    no_end: &'static str,
    empty: &'static str,
}

const JWT_MARKERS: Markers = Markers {
    begin: JWT_BEGIN,
    end: JWT_END,
    no_begin: "no BEGIN NATS USER JWT marker",
    no_end: "no END NATS USER JWT marker",
    empty: "the JWT is empty",
};

const SEED_MARKERS: Markers = Markers {
    begin: SEED_BEGIN,
    end: SEED_END,
    no_begin: "no BEGIN USER NKEY SEED marker",
    no_end: "no END USER NKEY SEED marker",
    empty: "the seed is empty",
};

/// The trimmed text between a section's markers.
fn section(text: &str, markers: Markers) -> Result<&str, &'static str> {
    let after = text.split_once(markers.begin).ok_or(markers.no_begin)?.1;
    let inside = after.split_once(markers.end).ok_or(markers.no_end)?.0.trim();
    if inside.is_empty() {
        return Err(markers.empty);
    }
    Ok(inside)
}

/// Creates `path` with `contents`; refuses if it exists. The file appears whole or not at all:
/// a process killed mid-write (the controller during an agent's queue-credential step) must not
/// leave an empty seed that every later run refuses to read. Secrets are 0600 from creation on,
/// so they are never readable by others, not even briefly.
pub(crate) fn create_new(path: &Path, contents: &str, secret: bool) -> Result<(), CredsError> {
    let tmp = written_temp(path, contents, secret)?;
    tmp.persist_noclobber(path).map_err(|e| match e.error.kind() {
        std::io::ErrorKind::AlreadyExists => CredsError::Exists(path.to_path_buf()),
        _ => CredsError::io("create", path)(e.error),
    })?;
    Ok(())
}

/// Writes a file, replacing any old one atomically (a rotated credential replaces the previous
/// one; a reader sees the old or the new file, never half of one). A secret is 0600 throughout.
pub(crate) fn replace_file(path: &Path, contents: &str, secret: bool) -> Result<(), CredsError> {
    let tmp = written_temp(path, contents, secret)?;
    tmp.persist(path).map_err(|e| CredsError::io("write", path)(e.error))?;
    Ok(())
}

/// A synced temp file beside `path` holding `contents`, with its final mode.
fn written_temp(path: &Path, contents: &str, secret: bool) -> Result<tempfile::NamedTempFile, CredsError> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // tempfile creates its files 0600.
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(CredsError::io("create a file in", dir))?;
    tmp.write_all(contents.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(CredsError::io("write", tmp.path()))?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(if secret { SECRET_MODE } else { 0o644 }))
        .map_err(CredsError::io("set the mode of", tmp.path()))?;
    Ok(tmp)
}

/// The key pair of the seed file `path`, which must be of `kind` (`expected` names it in the
/// error, which never holds the seed).
pub(crate) fn read_seed(path: &Path, kind: KeyPairType, expected: &'static str) -> Result<KeyPair, CredsError> {
    let text = fs::read_to_string(path).map_err(CredsError::io("read", path))?;
    let bad = || CredsError::BadSeed { path: path.to_path_buf(), expected };
    let key = KeyPair::from_seed(text.trim()).map_err(|_| bad())?;
    if key.key_pair_type() != kind {
        return Err(bad());
    }
    Ok(key)
}

/// The seed of `key`, to write to a secret file.
pub(crate) fn seed(key: &KeyPair) -> Result<String, CredsError> {
    key.seed().map_err(|e| CredsError::Key(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creds_round_trip_and_bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.creds");
        replace_file(&path, &format_creds("eyJ.x.y", "SUAXXX"), true).unwrap();
        assert_eq!(read_creds_jwt(&path).unwrap(), "eyJ.x.y");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);

        fs::write(&path, "hello").unwrap();
        let err = read_creds_jwt(&path).unwrap_err().to_string();
        assert!(err.contains("a.creds") && err.contains("BEGIN NATS USER JWT"), "{err}");
    }

    #[test]
    fn creds_parse_to_a_signing_key_and_bad_seeds_are_named_without_the_seed() {
        let user = KeyPair::new_user();
        let seed = user.seed().unwrap();
        let path = Path::new("a.creds");
        let creds = parse_creds(path, &format_creds("eyJ.x.y", &seed)).unwrap();
        assert_eq!((creds.jwt(), creds.public_key()), ("eyJ.x.y", user.public_key()));
        let signature = creds.sign(b"nonce").unwrap();
        assert!(user.verify(b"nonce", &signature).is_ok());
        assert!(!format!("{creds:?}").contains(&seed));

        let account_seed = KeyPair::new_account().seed().unwrap();
        let corrupted = format!("{}X", &seed[..seed.len() - 1]);
        let half = format_creds("eyJ.x.y", &seed);
        let half = &half[..half.find(SEED_END).unwrap()];
        for (text, why) in [
            (format_creds("eyJ.x.y", &account_seed), "not a user seed"),
            (format_creds("eyJ.x.y", &corrupted), "not a valid nkey seed"),
            (format_creds("eyJ.x.y", " "), "the seed is empty"),
            (half.to_owned(), "no END USER NKEY SEED marker"),
            (format!("{JWT_BEGIN}\neyJ.x.y\n{JWT_END}\n"), "no BEGIN USER NKEY SEED marker"),
        ] {
            let err = parse_creds(path, &text).unwrap_err().to_string();
            assert!(err.contains("a.creds") && err.contains(why), "{err}");
            assert!(!err.contains(&seed[..20]) && !err.contains(&account_seed[..20]), "{err}");
        }
    }

    #[test]
    fn create_new_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.seed");
        create_new(&path, "one", true).unwrap();
        let err = create_new(&path, "two", true).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "one");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn racing_creators_leave_one_whole_file_and_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.seed");
        let contents: Vec<String> = (0..8).map(|i| format!("{i}").repeat(4096)).collect();
        let won: Vec<bool> = std::thread::scope(|s| {
            let racers: Vec<_> = contents.iter().map(|c| s.spawn(|| create_new(&path, c, true).is_ok())).collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        assert_eq!(won.iter().filter(|w| **w).count(), 1, "exactly one creator wins: {won:?}");
        let winner = won.iter().position(|w| *w).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), contents[winner], "the winner's file, whole");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("k.seed")], "no temp file is left behind");
    }
}
