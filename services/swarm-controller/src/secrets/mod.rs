//! The secret store: KV `swarm-secrets` in the swarm account, which only the controller's user
//! reaches. Passwords, tokens, seeds and private keys of provisioned agents live here and in the
//! sealed deploy messages, nowhere else: never in the roster, the job graph, an API answer or a
//! log line.
//!
//! Every value is sealed with XChaCha20-Poly1305 under the key in `SWARM_SECRETS_KEY_FILE`, with
//! the record's key as associated data, so someone who can write the bucket (or read a backup of
//! it) learns nothing, and a sealed value copied under another key, changed by one bit or sealed
//! under another controller's key is refused instead of opened.
//!
//! - [`key`]: the key file (32 random bytes, base64, mode 0600) and making one.
//! - [`seal`]: sealing and opening one value (pure).
//! - [`store`]: the bucket: put, get, delete by [`RecordKey`].

pub mod key;
pub mod seal;
pub mod store;

pub use key::SecretsKey;
pub use seal::{OpenError, Plaintext};
pub use store::{RecordKey, SecretStore, SecretsError};
