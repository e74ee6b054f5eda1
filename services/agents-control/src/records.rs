//! The durable records and where they live in the store. Each is one small JSON
//! object with a `schema` version; a record of another version is refused by name, never
//! misread. The layout is documented in `docs/control-plane/store.md`.
//!
//! | key | record |
//! |---|---|
//! | `devices/<device id>.json` | [`DeviceRecord`]: a paired client or host (or its tombstone) |
//! | `codes/<sha-256 of the secret>.json` | [`CodeRecord`]: a pending code (hash only) |
//! | `members/<copy id>.json` | [`MemberRecord`]: one running copy |

use hyperhive_control_proto::DeviceKind;
use hyperhive_control_proto::role::Role;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The schema version this build reads and writes.
pub const SCHEMA: u32 = 1;

pub const DEVICES: &str = "devices/";
pub const CODES: &str = "codes/";
pub const MEMBERS: &str = "members/";

/// A paired device. Forgetting a device keeps its record as a tombstone (`forgotten_at` set):
/// the device id is derived from the code, so the tombstone is what keeps that code used
/// forever, and what tells every copy to refuse the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceRecord {
    pub schema: u32,
    pub id: String,
    pub kind: DeviceKind,
    pub name: String,
    /// The device's Ed25519 public key, base64url.
    pub public_key: String,
    /// RFC 3339.
    pub paired_at: String,
    /// The hash of the code it was paired with (the code record's key).
    pub code: String,
    /// RFC 3339, set when the device was forgotten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgotten_at: Option<String>,
    /// A client's role, from its code (none for a host, or a client paired before roles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// Unique per write, so a writer can recognise its own write after an ambiguous answer.
    pub write_id: String,
}

/// A pending code: only the hash of its secret is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeRecord {
    pub schema: u32,
    /// Hex SHA-256 of the secret.
    pub hash: String,
    pub kind: DeviceKind,
    /// A suggested name for the device, from `code --name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The role a client code gives its device (`code --client --role`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    pub created_at: String,
    pub expires_at: String,
    /// Who made it (`cli@<host>` or a device id).
    pub made_by: String,
    pub write_id: String,
}

/// One running copy (written by the copy itself; [`crate::peers`] reads them to find the others).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberRecord {
    pub schema: u32,
    pub copy_id: String,
    pub name: String,
    pub peer_url: Option<String>,
    pub heartbeat_at: String,
    pub write_id: String,
}

/// Why stored bytes are not a record this build can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("{key} has schema version {found}, this build understands {SCHEMA}: upgrade agents-control on every copy")]
    UnsupportedSchema { key: String, found: String },
    #[error("{key} is not a valid record ({reason})")]
    Malformed { key: String, reason: String },
}

#[derive(Deserialize)]
struct SchemaOnly {
    schema: Option<serde_json::Value>,
}

/// Reads a record, checking its schema version first.
pub fn decode<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, RecordError> {
    let malformed = |reason: String| RecordError::Malformed { key: key.to_owned(), reason };
    let head: SchemaOnly = serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))?;
    match head.schema {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(SCHEMA.into()) => {}
        Some(other) => {
            return Err(RecordError::UnsupportedSchema { key: key.to_owned(), found: other.to_string() });
        }
        None => return Err(malformed("no schema version".into())),
    }
    serde_json::from_slice(bytes).map_err(|e| malformed(e.to_string()))
}

pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    serde_json::to_vec_pretty(record).expect("records always serialise")
}

/// A fresh write id.
pub fn write_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The code record's name for a secret: hex SHA-256.
pub fn code_hash(secret: &[u8]) -> String {
    hex(&Sha256::digest(secret))
}

/// The device id a code pairs: derived from the code, so two copies redeeming the same code race
/// to create the same key and the bucket lets exactly one win (docs/control-plane/store.md).
pub fn device_id_for(code_hash: &str) -> String {
    let digest = Sha256::digest(format!("hyperhive device id\n{code_hash}").as_bytes());
    format!("d{}", &hex(&digest)[..32])
}

/// Device ids as [`device_id_for`] makes them.
pub fn is_device_id(text: &str) -> bool {
    text.len() == 33
        && text.starts_with('d')
        && text[1..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub fn device_key(id: &str) -> String {
    format!("{DEVICES}{id}.json")
}

pub fn code_key(hash: &str) -> String {
    format!("{CODES}{hash}.json")
}

pub fn member_key(copy_id: &str) -> String {
    format!("{MEMBERS}{copy_id}.json")
}

pub fn timestamp(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).expect("any UTC instant formats as RFC 3339")
}

pub fn parse_timestamp(key: &str, text: &str) -> Result<OffsetDateTime, RecordError> {
    OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| RecordError::Malformed { key: key.to_owned(), reason: format!("timestamp {text:?}: {e}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> DeviceRecord {
        DeviceRecord {
            schema: SCHEMA,
            id: device_id_for(&code_hash(b"s")),
            kind: DeviceKind::Client,
            name: "laptop".into(),
            public_key: "pk".into(),
            paired_at: timestamp(OffsetDateTime::UNIX_EPOCH),
            code: code_hash(b"s"),
            forgotten_at: None,
            role: None,
            write_id: write_id(),
        }
    }

    #[test]
    fn records_round_trip() {
        let record = device();
        assert_eq!(decode::<DeviceRecord>("k", &encode(&record)).unwrap(), record);
        assert!(is_device_id(&record.id));
        assert!(!is_device_id("d123") && !is_device_id(&record.id.to_uppercase()));
    }

    #[test]
    fn other_schema_versions_are_refused_not_misread() {
        let mut value = serde_json::to_value(device()).unwrap();
        value["schema"] = 2.into();
        let err = decode::<DeviceRecord>("devices/x.json", &serde_json::to_vec(&value).unwrap()).unwrap_err();
        assert!(matches!(err, RecordError::UnsupportedSchema { .. }));
        assert!(err.to_string().contains("schema version 2"));
        value["schema"] = "1".into();
        let err = decode::<DeviceRecord>("k", &serde_json::to_vec(&value).unwrap()).unwrap_err();
        assert!(matches!(err, RecordError::UnsupportedSchema { .. }));
        for bad in [&b"{}"[..], b"not json", b"{\"schema\":1}"] {
            assert!(matches!(decode::<DeviceRecord>("k", bad), Err(RecordError::Malformed { .. })));
        }
    }
}
