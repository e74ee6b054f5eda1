//! An agent's secrets in the secret store: which records there are, making a password once
//! (sealed before anything is created with it), and the bundle a deploy or credentials message
//! carries to the hive.

use std::collections::BTreeMap;

use hyperhive_hive_proto::AgentName;
use hyperhive_hive_proto::deploy::Secrets;
use hyperhive_provision::Secret;
use rand::Rng;
use rand::distr::Alphanumeric;

use super::error::StepError;
use crate::secrets::{Plaintext, RecordKey, SecretStore};

/// One kind of secret an agent has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The SSO user's password.
    SsoPassword,
    /// The forge user's password (the controller signs in with it to mint tokens).
    ForgePassword,
    /// The forge API token the agent uses.
    ForgeToken,
    /// The matrix account's password.
    MatrixPassword,
    /// The matrix access token the agent uses.
    MatrixToken,
    /// The store certificate (PEM; public, kept with its key).
    StoreCert,
    /// The store certificate's private key (PEM).
    StoreKey,
    /// The NATS `.creds` text.
    QueueCreds,
}

impl Kind {
    fn record_name(self) -> &'static str {
        match self {
            Kind::SsoPassword => "sso-password",
            Kind::ForgePassword => "forge-password",
            Kind::ForgeToken => "forge-token",
            Kind::MatrixPassword => "matrix-password",
            Kind::MatrixToken => "matrix-token",
            Kind::StoreCert => "store-cert",
            Kind::StoreKey => "store-key",
            Kind::QueueCreds => "queue-creds",
        }
    }

    /// The file the hive writes it to in the agent's secrets directory (`None`: the agent does
    /// not get it; the NATS credential has a place of its own).
    fn agent_file(self) -> Option<&'static str> {
        match self {
            Kind::ForgeToken => Some("forge-token"),
            Kind::MatrixToken => Some("matrix-token"),
            Kind::StoreCert => Some("store-cert.pem"),
            Kind::StoreKey => Some("store-key.pem"),
            Kind::SsoPassword | Kind::ForgePassword | Kind::MatrixPassword | Kind::QueueCreds => None,
        }
    }
}

/// The file holding the store CA's certificate in the agent's secrets directory, so the agent
/// can check the store server's certificate if it is issued by the same CA.
pub const STORE_CA_FILE: &str = "store-ca.pem";

/// Length of a generated password: 32 alphanumerics, about 190 bits.
const PASSWORD_LEN: usize = 32;

/// An agent's view of the secret store.
#[derive(Debug, Clone)]
pub struct Vault {
    store: SecretStore,
}

impl Vault {
    /// Wraps the store.
    pub fn new(store: SecretStore) -> Self {
        Self { store }
    }

    fn record(agent: &AgentName, kind: Kind) -> RecordKey {
        RecordKey::agent(agent.as_str(), kind.record_name()).expect("an agent name and a kind make a record key")
    }

    /// The secret, if stored.
    ///
    /// # Errors
    /// The store's error (a value that does not open is a permanent error, never returned).
    pub async fn get(&self, agent: &AgentName, kind: Kind) -> Result<Option<Secret>, StepError> {
        self.get_at(&Self::record(agent, kind)).await
    }

    async fn get_at(&self, record: &RecordKey) -> Result<Option<Secret>, StepError> {
        let value = self.store.get(record).await?;
        value
            .map(|plain| {
                String::from_utf8(plain.expose().to_vec()).map(Secret::new).map_err(|_| {
                    StepError::permanent(format!(
                        "the secret {record} is not text, so this controller did not write it"
                    ))
                })
            })
            .transpose()
    }

    /// Stores the secret, replacing what was there.
    ///
    /// # Errors
    /// The store's error.
    pub async fn put(&self, agent: &AgentName, kind: Kind, value: &Secret) -> Result<(), StepError> {
        let plain = Plaintext::new(value.expose().as_bytes().to_vec());
        Ok(self.store.put(&Self::record(agent, kind), &plain).await?)
    }

    /// The stored password of `kind`, or a new random one, sealed and stored before it is
    /// returned: an account is only ever created with a password the store already holds, so a
    /// controller that dies right after creating it can still prove the account is its own.
    ///
    /// # Errors
    /// The store's error.
    pub async fn password(&self, agent: &AgentName, kind: Kind) -> Result<Secret, StepError> {
        self.password_at(&Self::record(agent, kind)).await
    }

    /// [`Vault::password`] for an account of the swarm's own (not an agent's), under
    /// `swarm.<name>`, e.g. the controller's matrix admin account.
    ///
    /// # Errors
    /// The store's error.
    pub async fn swarm_password(&self, name: &str) -> Result<Secret, StepError> {
        let record = RecordKey::new(format!("swarm.{name}")).map_err(StepError::permanent)?;
        self.password_at(&record).await
    }

    async fn password_at(&self, record: &RecordKey) -> Result<Secret, StepError> {
        if let Some(existing) = self.get_at(record).await? {
            return Ok(existing);
        }
        let fresh: String = rand::rng().sample_iter(&Alphanumeric).take(PASSWORD_LEN).map(char::from).collect();
        self.store.put(record, &Plaintext::new(fresh.as_bytes().to_vec())).await?;
        Ok(Secret::new(fresh))
    }

    /// The secret store itself, for the records other modules define (linked accounts).
    pub fn store(&self) -> &SecretStore {
        &self.store
    }

    /// What the agent's hive gets: its NATS credential and every secret file it has so far
    /// (its linked accounts among them), plus the store CA's certificate when there is a store
    /// identity, and its secret variables ([`super::env_secrets`]).
    ///
    /// # Errors
    /// The store's error.
    pub async fn bundle(&self, agent: &AgentName, store_ca_pem: Option<&str>) -> Result<Secrets, StepError> {
        let mut files = BTreeMap::new();
        for kind in [Kind::ForgeToken, Kind::MatrixToken, Kind::StoreCert, Kind::StoreKey] {
            if let (Some(file), Some(value)) = (kind.agent_file(), self.get(agent, kind).await?) {
                files.insert(file.to_owned(), value.expose().to_owned());
            }
        }
        if files.contains_key("store-cert.pem")
            && let Some(ca) = store_ca_pem
        {
            files.insert(STORE_CA_FILE.to_owned(), ca.to_owned());
        }
        for (slot, account) in crate::linked::store::linked(&self.store, agent).await.map_err(StepError::retryable)? {
            files.insert(slot.agent_file(), crate::linked::store::agent_file_text(&account));
        }
        let nats_creds = self.get(agent, Kind::QueueCreds).await?.map(|c| c.expose().to_owned());
        let env = super::env_secrets::env_of(&self.store, agent).await?;
        Ok(Secrets { nats_creds, files, env })
    }
}
