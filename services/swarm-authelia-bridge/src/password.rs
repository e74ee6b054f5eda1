//! argon2id password hashes as Authelia writes them: its default parameters (`argon2id`,
//! version 19, 64 MiB of memory, 3 passes, 4 lanes, a 16-byte salt and a 32-byte key) in the PHC
//! string format, `$argon2id$v=19$m=65536,t=3,p=4$<salt>$<key>`, which Authelia verifies.
//!
//! Each hash costs 64 MiB and a noticeable share of a core, so [`Hasher`] runs at most
//! [`HASHING_AT_ONCE`] of them at a time, on blocking threads, and the rest of the service stays
//! responsive.

use std::sync::Arc;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::RngCore;
use tokio::sync::Semaphore;

/// Authelia's default memory cost, in KiB.
pub const MEMORY_KIB: u32 = 65_536;
/// Authelia's default number of passes.
pub const ITERATIONS: u32 = 3;
/// Authelia's default parallelism.
pub const PARALLELISM: u32 = 4;
/// Authelia's default key length, in bytes.
pub const KEY_BYTES: usize = 32;
/// Authelia's default salt length, in bytes.
pub const SALT_BYTES: usize = 16;
/// Hashes computed at once: two, for the two cores of a small host, and 128 MiB at most.
pub const HASHING_AT_ONCE: usize = 2;

/// Runs hashes and verifications, a bounded number at once.
#[derive(Debug, Clone)]
pub struct Hasher {
    permits: Arc<Semaphore>,
}

impl Default for Hasher {
    fn default() -> Self {
        Self { permits: Arc::new(Semaphore::new(HASHING_AT_ONCE)) }
    }
}

/// Hashing failed (it does not, with the fixed parameters, but the library's API can say so).
#[derive(Debug, thiserror::Error)]
#[error("hashing the password failed: {0}")]
pub struct HashError(String);

impl Hasher {
    /// The PHC string of `password` under a fresh random salt.
    ///
    /// # Errors
    /// When the library refuses (never with these parameters).
    pub async fn hash(&self, password: String) -> Result<String, HashError> {
        let _permit = self.permits.acquire().await.map_err(|e| HashError(e.to_string()))?;
        tokio::task::spawn_blocking(move || hash_now(&password))
            .await
            .map_err(|e| HashError(format!("the hashing task ended: {e}")))?
    }

    /// Whether `password` matches the PHC string `stored`. A hash this library cannot read
    /// (another algorithm, a damaged string) matches nothing.
    pub async fn verify(&self, password: String, stored: String) -> bool {
        let Ok(_permit) = self.permits.acquire().await else {
            return false;
        };
        tokio::task::spawn_blocking(move || verify_now(&password, &stored)).await.unwrap_or(false)
    }
}

fn argon2() -> Argon2<'static> {
    let params = Params::new(MEMORY_KIB, ITERATIONS, PARALLELISM, Some(KEY_BYTES))
        .expect("Authelia's default argon2 parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Hashes now, on this thread.
///
/// # Errors
/// When the library refuses (never with these parameters).
pub fn hash_now(password: &str) -> Result<String, HashError> {
    let mut salt = [0u8; SALT_BYTES];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| HashError(e.to_string()))?;
    argon2()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| HashError(e.to_string()))
}

/// Verifies now, on this thread, with the parameters the stored hash names.
pub fn verify_now(password: &str, stored: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(stored) else {
        return false;
    };
    // The algorithm, version and costs come from the stored string; only the argon2 family is
    // understood here.
    Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_have_autheliass_shape_and_verify() {
        let hash = hash_now("correct horse battery staple").unwrap();
        let parts: Vec<&str> = hash.split('$').collect();
        assert_eq!(parts[..4], ["", "argon2id", "v=19", "m=65536,t=3,p=4"], "{hash}");
        // Unpadded standard base64: 16 bytes are 22 characters, 32 bytes 43.
        assert_eq!(parts[4].len(), 22, "{hash}");
        assert_eq!(parts[5].len(), 43, "{hash}");
        assert!(verify_now("correct horse battery staple", &hash));
        assert!(!verify_now("correct horse battery stapl", &hash));
        assert_ne!(hash, hash_now("correct horse battery staple").unwrap(), "each hash has its own salt");
    }

    #[test]
    fn foreign_or_damaged_hashes_match_nothing() {
        assert!(!verify_now("x", "$2b$12$abcdefghijklmnopqrstuuJxQx6pZ6dY1n2QkqGqK8aB0sKq7mG6"));
        assert!(!verify_now("x", "not a hash"));
        assert!(!verify_now("x", ""));
    }
}
