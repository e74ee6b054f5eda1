//! The hive directory and hive statuses as `GET /api/hives`, `GET /api/hives/status` and
//! `GET /api/hives/{hive}/status` list them.

use std::collections::BTreeMap;

use hyperhive_hive_proto::HiveName;
use hyperhive_hive_proto::status::HiveStatus;
use serde::{Deserialize, Serialize};

/// One hive of the directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HiveView {
    /// Its name.
    pub name: HiveName,
    /// What it is for (empty when the directory says nothing).
    pub description: String,
    /// Free-form labels.
    pub labels: BTreeMap<String, String>,
    /// Its public curve key, or null for a hive that runs declared agents only.
    pub xkey: Option<String>,
}

/// One hive's last status, its age and whether it is stale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HiveStatusView {
    /// The hive.
    pub hive: HiveName,
    /// What it last published; null when it never did.
    pub status: Option<HiveStatus>,
    /// Seconds since it was published.
    pub age_secs: Option<u64>,
    /// Older than the freshness limit (or never published).
    pub stale: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hives_and_statuses_have_the_listed_field_names() {
        let hive = HiveView {
            name: HiveName::parse("h1").unwrap(),
            description: "gpu box".into(),
            labels: [("gpu".to_owned(), "yes".to_owned())].into(),
            xkey: None,
        };
        let wire = json!({"name": "h1", "description": "gpu box", "labels": {"gpu": "yes"}, "xkey": null});
        assert_eq!(serde_json::to_value(&hive).unwrap(), wire);
        assert_eq!(serde_json::from_value::<HiveView>(wire).unwrap(), hive);

        let status = json!({
            "hive": "h1", "version": "0.1.0", "started_at": "2026-11-30T09:00:00Z",
            "published_at": "2026-11-30T09:00:10Z", "load": [0.5, 0.25, 0.0], "agents": {},
        });
        let view = HiveStatusView {
            hive: HiveName::parse("h1").unwrap(),
            status: Some(serde_json::from_value(status.clone()).unwrap()),
            age_secs: Some(3),
            stale: false,
        };
        let wire = json!({"hive": "h1", "status": status, "age_secs": 3, "stale": false});
        assert_eq!(serde_json::to_value(&view).unwrap(), wire);
        assert_eq!(serde_json::from_value::<HiveStatusView>(wire).unwrap(), view);
        let never = json!({"hive": "h1", "status": null, "age_secs": null, "stale": true});
        assert_eq!(serde_json::from_value::<HiveStatusView>(never).unwrap().status, None);
    }
}
