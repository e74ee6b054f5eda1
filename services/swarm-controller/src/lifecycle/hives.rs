//! Hive status as the controller reads it: KV `hive-status`, key `<hive>`, written by each hive's
//! hive-c0re, and how old each status is.

use std::collections::{BTreeMap, BTreeSet};

use async_nats::jetstream;
use async_nats::jetstream::stream::DirectGetErrorKind;
use futures::StreamExt;
use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::status::{HiveStatus, STALE_AFTER};
use hyperhive_nats_objects::{HIVE_STATUS_BUCKET, hive_status_subject, kv_removal, kv_stream};
use hyperhive_schedule::instant::parse_instant;
use time::OffsetDateTime;

use crate::nats::{NatsError, scan_bucket};

/// Parses one `hive-status` value; `None` (logged) for one that is not a status of the hive its
/// key names: a hive may write only its own key, so anything else is a bug or an older hive-c0re.
pub fn parse_status(key: &str, value: &[u8]) -> Option<HiveStatus> {
    match serde_json::from_slice::<HiveStatus>(value) {
        Ok(status) if status.hive.as_str() == key => Some(status),
        Ok(status) => {
            tracing::warn!(key, named = %status.hive, "a hive status names another hive than its key; ignored");
            None
        }
        Err(err) => {
            tracing::warn!(key, %err, "an unreadable hive status; ignored");
            None
        }
    }
}

/// Every readable hive status, by hive.
///
/// # Errors
/// [`NatsError::Scan`] when the bucket cannot be read.
pub async fn read_all(js: &jetstream::Context) -> Result<BTreeMap<HiveName, HiveStatus>, NatsError> {
    Ok(scan_bucket(js, HIVE_STATUS_BUCKET)
        .await?
        .into_iter()
        .filter_map(|kv| parse_status(&kv.key, &kv.value))
        .map(|status| (status.hive.clone(), status))
        .collect())
}

/// Status reads in flight at once in [`read_of`].
const READS_IN_FLIGHT: usize = 32;

/// The readable statuses of `hives`, by hive: one key read each, so a page of agents on a few
/// hives of many reads only theirs rather than every hive's. A hive that never published is
/// left out.
///
/// # Errors
/// [`NatsError::Scan`] when a status cannot be read.
pub async fn read_of(
    js: &jetstream::Context,
    hives: BTreeSet<HiveName>,
) -> Result<BTreeMap<HiveName, HiveStatus>, NatsError> {
    let failed = |reason: String| NatsError::Scan { bucket: HIVE_STATUS_BUCKET.to_owned(), reason };
    let stream = js.get_stream_no_info(kv_stream(HIVE_STATUS_BUCKET)).await.map_err(|e| failed(e.to_string()))?;
    let stream = &stream;
    let reads = hives.into_iter().map(|hive| async move {
        let read = stream.direct_get_last_for_subject(hive_status_subject(&hive)).await;
        (hive, read)
    });
    let mut reads = futures::stream::iter(reads).buffer_unordered(READS_IN_FLIGHT);
    let mut statuses = BTreeMap::new();
    while let Some((hive, read)) = reads.next().await {
        match read {
            Ok(message) if kv_removal(&message.headers) => {}
            Ok(message) => {
                if let Some(status) = parse_status(hive.as_str(), &message.payload) {
                    statuses.insert(hive, status);
                }
            }
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => {}
            Err(e) => return Err(failed(e.to_string())),
        }
    }
    Ok(statuses)
}

/// How old a status is at `now` and whether it is stale: older than [`STALE_AFTER`], never
/// published, or with a publish time that cannot be read. A publish time ahead of `now` (clock
/// skew between hosts) counts as age 0.
pub fn freshness(status: Option<&HiveStatus>, now: OffsetDateTime) -> (Option<u64>, bool) {
    let Some(published) = status.and_then(|s| parse_instant(&s.published_at).ok()) else {
        return (None, true);
    };
    let age = u64::try_from((now - published).whole_seconds()).unwrap_or(0);
    (Some(age), age > STALE_AFTER.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(published_at: &str) -> HiveStatus {
        HiveStatus {
            hive: HiveName::parse("h").unwrap(),
            version: "1".into(),
            started_at: published_at.into(),
            published_at: published_at.into(),
            load: [0.0; 3],
            agents: BTreeMap::new(),
        }
    }

    #[test]
    fn a_status_is_stale_after_45_seconds_or_when_missing() {
        let now = parse_instant("2026-11-30T12:00:00Z").unwrap();
        assert_eq!(freshness(Some(&status("2026-11-30T11:59:15Z")), now), (Some(45), false));
        assert_eq!(freshness(Some(&status("2026-11-30T11:59:14Z")), now), (Some(46), true));
        assert_eq!(freshness(Some(&status("2026-11-30T12:00:30Z")), now), (Some(0), false), "skew");
        assert_eq!(freshness(Some(&status("yesterday")), now), (None, true));
        assert_eq!(freshness(None, now), (None, true));
    }

    #[test]
    fn a_status_under_another_hives_key_is_ignored() {
        let bytes = serde_json::to_vec(&status("2026-11-30T12:00:00Z")).unwrap();
        assert!(parse_status("h", &bytes).is_some());
        assert!(parse_status("other", &bytes).is_none());
        assert!(parse_status("h", b"{}").is_none());
    }
}
