//! Linked accounts in the secret store: one sealed record per account,
//! `agent.<agent>.linked-matrix.<name>`, `agent.<agent>.linked-forge.<label>` and
//! `agent.<agent>.linked-github`, each the account's JSON.

use hyperhive_hive_proto::AgentName;

use super::account::{Account, Slot};
use crate::provision::vault::Vault;
use crate::secrets::Plaintext;

const PREFIX: &str = "linked-";

/// Every linked account of `agent`, sorted by kind and name.
///
/// # Errors
/// The store's error, or a record that does not parse (named, never quoted).
pub async fn linked(vault: &Vault, agent: &AgentName) -> Result<Vec<(Slot, Account)>, String> {
    let mut accounts = Vec::new();
    for suffix in vault.agent_record_suffixes(agent, PREFIX).await? {
        let Some(slot) = Slot::from_record_suffix(&suffix) else { continue };
        if let Some(account) = get(vault, agent, &slot).await? {
            accounts.push((slot, account));
        }
    }
    accounts.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(accounts)
}

/// The account in `slot`, if linked.
///
/// # Errors
/// The store's error, or a record that does not parse.
pub async fn get(vault: &Vault, agent: &AgentName, slot: &Slot) -> Result<Option<Account>, String> {
    let Some(plain) = vault.agent_record(agent, &slot.record_suffix()).await? else { return Ok(None) };
    serde_json::from_slice(plain.expose()).map(Some).map_err(|_| {
        format!("the linked account record agent.{agent}.{} is not a linked account", slot.record_suffix())
    })
}

/// Links `account` in `slot`, replacing what was there.
///
/// # Errors
/// The store's error.
pub async fn put(vault: &Vault, agent: &AgentName, slot: &Slot, account: &Account) -> Result<(), String> {
    let json = serde_json::to_vec(account).expect("an account serializes");
    vault.put_agent_record(agent, &slot.record_suffix(), &Plaintext::new(json)).await
}

/// Unlinks `slot` (absent is fine).
///
/// # Errors
/// The store's error.
pub async fn delete(vault: &Vault, agent: &AgentName, slot: &Slot) -> Result<(), String> {
    vault.delete_agent_record(agent, &slot.record_suffix()).await
}

/// The text of the file the agent gets: the account's JSON, `kind` included.
pub fn agent_file_text(account: &Account) -> String {
    serde_json::to_string_pretty(account).expect("an account serializes")
}
