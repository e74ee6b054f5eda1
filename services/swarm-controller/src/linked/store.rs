//! Linked accounts in the secret store: one sealed record per account,
//! `agent.<agent>.linked-matrix.<name>`, `agent.<agent>.linked-forge.<label>` and
//! `agent.<agent>.linked-github`, each the account's JSON.

use hyperhive_hive_proto::AgentName;

use super::account::{Account, Slot};
use crate::secrets::{Plaintext, RecordKey, SecretStore};

const PREFIX: &str = "linked-";

/// Every linked account of `agent`, sorted by kind and name.
///
/// # Errors
/// The store's error, or a record that does not parse (named, never quoted).
pub async fn linked(store: &SecretStore, agent: &AgentName) -> Result<Vec<(Slot, Account)>, String> {
    let mut accounts = Vec::new();
    for suffix in record_suffixes(store, agent).await? {
        let Some(slot) = Slot::from_record_suffix(&suffix) else { continue };
        if let Some(account) = get(store, agent, &slot).await? {
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
pub async fn get(store: &SecretStore, agent: &AgentName, slot: &Slot) -> Result<Option<Account>, String> {
    let record = RecordKey::agent(agent.as_str(), &slot.record_suffix())?;
    let Some(plain) = store.get(&record).await.map_err(|e| e.to_string())? else { return Ok(None) };
    serde_json::from_slice(plain.expose()).map(Some).map_err(|_| {
        format!("the linked account record agent.{agent}.{} is not a linked account", slot.record_suffix())
    })
}

/// Links `account` in `slot`, replacing what was there.
///
/// # Errors
/// The store's error.
pub async fn put(store: &SecretStore, agent: &AgentName, slot: &Slot, account: &Account) -> Result<(), String> {
    let json = serde_json::to_vec(account).expect("an account serializes");
    let record = RecordKey::agent(agent.as_str(), &slot.record_suffix())?;
    store.put(&record, &Plaintext::new(json)).await.map_err(|e| e.to_string())
}

/// Unlinks `slot` (absent is fine).
///
/// # Errors
/// The store's error.
pub async fn delete(store: &SecretStore, agent: &AgentName, slot: &Slot) -> Result<(), String> {
    let record = RecordKey::agent(agent.as_str(), &slot.record_suffix())?;
    store.delete(&record).await.map_err(|e| e.to_string())
}

/// The suffixes of `agent`'s linked-account records (`linked-...`), sorted.
async fn record_suffixes(store: &SecretStore, agent: &AgentName) -> Result<Vec<String>, String> {
    let head = format!("agent.{agent}.");
    let records = store.records(&format!("{head}{PREFIX}")).await.map_err(|e| e.to_string())?;
    Ok(records.iter().filter_map(|r| r.as_str().strip_prefix(&head).map(str::to_owned)).collect())
}

/// The text of the file the agent gets: the account's JSON, `kind` included.
pub fn agent_file_text(account: &Account) -> String {
    serde_json::to_string_pretty(account).expect("an account serializes")
}
