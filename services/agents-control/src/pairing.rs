//! Redeeming a code (`POST /v1/pair`, docs/control-plane/protocol.md).
//!
//! The device record's key is derived from the code, and it is created with one conditional
//! create: when two copies race to redeem one code, the bucket lets exactly one win and the
//! other reports "code already used" (unless it is the same device asking again: a retry after
//! an answer was lost gets the same answer). Nothing else is needed for correctness; removing the used
//! code record afterwards is tidying (the sweeper does it if this copy does not).

use crate::clock::Clock;
use crate::key::ControlKey;
use crate::records::{self, CodeRecord, DeviceRecord, RecordError, SCHEMA};
use hyperhive_control_proto::pair::{PairRequest, PairRequestError, PairResponse, device_statement};
use hyperhive_object_store::{Store, StoreError};

/// Why a pairing was refused. Each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("{0}")]
    BadRequest(#[from] PairRequestError),
    #[error("this code was made by another control plane (its control key differs): make a code here")]
    OtherControlPlane,
    #[error("unknown code: it was never made here, or it expired and was swept; make a new code")]
    Unknown,
    #[error("the code expired at {0}: make a new code")]
    Expired(String),
    #[error("the code was already used: make a new code")]
    AlreadyUsed,
    #[error("store unavailable ({0}): pairing is refused until the store answers; try again")]
    Unavailable(StoreError),
    #[error("the store holds an unreadable record: {0}")]
    Record(#[from] RecordError),
}

impl PairError {
    pub fn status(&self) -> u16 {
        match self {
            PairError::BadRequest(_) | PairError::OtherControlPlane => 400,
            PairError::Unknown => 404,
            PairError::AlreadyUsed => 409,
            PairError::Expired(_) => 410,
            PairError::Unavailable(_) => 503,
            PairError::Record(_) => 500,
        }
    }
}

impl From<StoreError> for PairError {
    fn from(error: StoreError) -> Self {
        PairError::Unavailable(error)
    }
}

/// A pairing that succeeded: the answer for the device, and its record as the store holds it.
#[derive(Debug)]
pub struct Redeemed {
    pub response: PairResponse,
    pub record: DeviceRecord,
    /// The store's version of the record.
    pub version: String,
}

/// Redeems the code in `request` and registers the device.
pub async fn redeem(
    store: &dyn Store,
    clock: &dyn Clock,
    key: &ControlKey,
    request: &PairRequest,
) -> Result<Redeemed, PairError> {
    let verified = request.verify()?;
    if verified.code.control_public_key != key.public_key() {
        return Err(PairError::OtherControlPlane);
    }
    let hash = records::code_hash(&verified.code.secret);
    let device_id = records::device_id_for(&hash);
    let device_key = records::device_key(&device_id);

    if let Some(object) = store.get(&device_key).await? {
        return already_paired(key, request, &device_key, object);
    }
    let code_key = records::code_key(&hash);
    let Some(code_object) = store.get(&code_key).await? else {
        // A racing copy may have redeemed the code and tidied its record away since we looked.
        return match store.get(&device_key).await? {
            Some(object) => already_paired(key, request, &device_key, object),
            None => Err(PairError::Unknown),
        };
    };
    let code: CodeRecord = records::decode(&code_key, &code_object.bytes)?;
    let now = clock.now();
    if records::parse_timestamp(&code_key, &code.expires_at)? <= now {
        return Err(PairError::Expired(code.expires_at));
    }

    // A default name (the device's hostname) gives way to the one the code suggests.
    let name = match (verified.name_is_default, code.name) {
        (true, Some(suggested)) => suggested,
        _ => verified.name,
    };
    let record = DeviceRecord {
        schema: SCHEMA,
        id: device_id.clone(),
        kind: code.kind,
        name,
        public_key: request.public_key.clone(),
        paired_at: records::timestamp(now),
        code: hash,
        forgotten_at: None,
        role: code.role,
        write_id: records::write_id(),
    };
    let version = match store.create(&device_key, records::encode(&record)).await {
        Ok(version) => version,
        Err(StoreError::AlreadyExists { .. }) => {
            // Another copy won the race, or an earlier attempt of this same request landed.
            return match store.get(&device_key).await? {
                Some(object) => already_paired(key, request, &device_key, object),
                None => Err(PairError::AlreadyUsed),
            };
        }
        Err(other) => return Err(other.into()),
    };
    tracing::info!(device = %device_id, kind = %record.kind, name = %record.name, "paired a device");
    // Tidying only: the device record already makes the code used.
    if let Err(error) = store.delete(&code_key, &code_object.version).await {
        tracing::debug!(%error, "left the used code record for the sweeper");
    }
    Ok(Redeemed { response: response(key, &record), record, version })
}

fn response(key: &ControlKey, record: &DeviceRecord) -> PairResponse {
    PairResponse {
        signature: key.sign(&device_statement(&record.id, record.kind, &record.public_key)),
        device_id: record.id.clone(),
        kind: record.kind,
        name: record.name.clone(),
        control_name: None, // the route that answers knows the name (http.rs)
    }
}

/// The code's device record exists. When it is this very device's (same key: a retry of a
/// pairing whose write landed though the store reported it unavailable), pairing succeeds again
/// with the same answer; any other device, or a forgotten one, finds the code used.
fn already_paired(
    key: &ControlKey,
    request: &PairRequest,
    device_key: &str,
    stored: hyperhive_object_store::Object,
) -> Result<Redeemed, PairError> {
    let record: DeviceRecord = records::decode(device_key, &stored.bytes)?;
    if record.public_key == request.public_key && record.forgotten_at.is_none() {
        tracing::info!(device = %record.id, "a pairing retried after its record was written: answered again");
        return Ok(Redeemed { response: response(key, &record), record, version: stored.version });
    }
    Err(PairError::AlreadyUsed)
}
