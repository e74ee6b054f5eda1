//! The MAC of Synapse's shared-secret registration (`POST /_synapse/admin/v1/register`):
//! HMAC-SHA1, keyed with `registration_shared_secret`, over
//! `nonce NUL username NUL password NUL "notadmin"`, in lowercase hex.
//!
//! SHA-1 is Synapse's choice, not ours; as an HMAC over a one-use nonce it is still sound.
//! ring's HMAC-SHA1 is used (its name says "for legacy use only", which this is), as ring is
//! already the workspace's crypto provider.

use ring::hmac;

use crate::secret::Secret;

/// The MAC for registering `username` with `password` as a non-admin user.
pub(super) fn registration_mac(shared_secret: &Secret, nonce: &str, username: &str, password: &Secret) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, shared_secret.expose().as_bytes());
    let mut context = hmac::Context::with_key(&key);
    for (index, field) in [nonce, username, password.expose(), "notadmin"].into_iter().enumerate() {
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
        let mac = registration_mac(&Secret::new("shared-secret"), "abcdef", "agent-a", &Secret::new("pass word"));
        assert_eq!(mac, "15967b75bce0558a6b5fe33c5270bac5264c9aec");
    }
}
