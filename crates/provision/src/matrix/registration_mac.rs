//! The MAC of Synapse's shared-secret registration (`POST /_synapse/admin/v1/register`):
//! HMAC-SHA1, keyed with `registration_shared_secret`, over
//! `nonce NUL username NUL password NUL ("admin" | "notadmin")`, in lowercase hex.
//!
//! SHA-1 is Synapse's choice, not ours; as an HMAC over a one-use nonce it is still sound.
//! ring's HMAC-SHA1 is used (its name says "for legacy use only", which this is), as ring is
//! already the workspace's crypto provider.

use ring::hmac;

use crate::secret::Secret;

/// The MAC for registering `username` with `password`, as a server admin when `admin`; the
/// flag is inside the MAC, so the body's `"admin"` cannot be changed without the secret.
pub(super) fn registration_mac(
    shared_secret: &Secret,
    nonce: &str,
    username: &str,
    password: &Secret,
    admin: bool,
) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, shared_secret.expose().as_bytes());
    let mut context = hmac::Context::with_key(&key);
    let role = if admin { "admin" } else { "notadmin" };
    for (index, field) in [nonce, username, password.expose(), role].into_iter().enumerate() {
        if index > 0 {
            context.update(b"\0");
        }
        context.update(field.as_bytes());
    }
    context.sign().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_pythons_hmac_sha1_as_synapse_computes_it() {
        // python3: hmac.new(b'shared-secret', b'abcdef\0agent-a\0pass word\0notadmin', hashlib.sha1).hexdigest()
        let mac = |admin| {
            registration_mac(&Secret::new("shared-secret"), "abcdef", "agent-a", &Secret::new("pass word"), admin)
        };
        assert_eq!(mac(false), "15967b75bce0558a6b5fe33c5270bac5264c9aec");
        // The same with b'...\0admin'.
        assert_eq!(mac(true), "e57011c24bb4cfd704ac4efd303ea76395fd8ef1");
    }
}
