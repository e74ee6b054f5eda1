//! Redeeming a code (`POST /v1/pair`, DESIGN 3.4 and 3.5).
//!
//! The device record's key is derived from the code, and it is created with one conditional
//! create: when two copies race to redeem one code, the bucket lets exactly one win and the
//! other reports "code already used". Nothing else is needed for correctness; removing the used
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

/// Redeems the code in `request` and registers the device.
pub async fn redeem(
    store: &dyn Store,
    clock: &dyn Clock,
    key: &ControlKey,
    request: &PairRequest,
) -> Result<PairResponse, PairError> {
    let verified = request.verify()?;
    if verified.code.control_public_key != key.public_key() {
        return Err(PairError::OtherControlPlane);
    }
    let hash = records::code_hash(&verified.code.secret);
    let device_id = records::device_id_for(&hash);
    let device_key = records::device_key(&device_id);

    if store.get(&device_key).await?.is_some() {
        return Err(PairError::AlreadyUsed);
    }
    let code_key = records::code_key(&hash);
    let Some(code_object) = store.get(&code_key).await? else {
        // A racing copy may have redeemed the code and tidied its record away since we looked.
        if store.get(&device_key).await?.is_some() {
            return Err(PairError::AlreadyUsed);
        }
        return Err(PairError::Unknown);
    };
    let code: CodeRecord = records::decode(&code_key, &code_object.bytes)?;
    let now = clock.now();
    if records::parse_timestamp(&code_key, &code.expires_at)? <= now {
        return Err(PairError::Expired(code.expires_at));
    }

    let record = DeviceRecord {
        schema: SCHEMA,
        id: device_id.clone(),
        kind: code.kind,
        name: verified.name.clone(),
        public_key: request.public_key.clone(),
        paired_at: records::timestamp(now),
        code: hash,
        forgotten_at: None,
        write_id: records::write_id(),
    };
    match store.create(&device_key, records::encode(&record)).await {
        Ok(_) => {}
        Err(StoreError::AlreadyExists { .. }) => return Err(PairError::AlreadyUsed),
        Err(other) => return Err(other.into()),
    }
    tracing::info!(device = %device_id, kind = %code.kind, name = %verified.name, "paired a device");
    // Tidying only: the device record already makes the code used.
    if let Err(error) = store.delete(&code_key, &code_object.version).await {
        tracing::debug!(%error, "left the used code record for the sweeper");
    }
    Ok(PairResponse {
        signature: key.sign(&device_statement(&device_id, code.kind, &request.public_key)),
        device_id,
        kind: code.kind,
        name: verified.name,
        control_name: None, // the route that answers knows the name (http.rs)
    })
}
