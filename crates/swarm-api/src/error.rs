//! The body of every refusal: `{"error": "..."}`, and on a schedule's conflict (409) the
//! schedule as it is now under `current`.

use serde::{Deserialize, Serialize};

use crate::schedules::ScheduleView;

/// What the API answers with any status that is not a success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What is wrong and, where the controller can tell, how to fix it.
    pub error: String,
    /// On a schedule's conflict: the schedule as it is now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Box<ScheduleView>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_error_is_one_message_and_a_conflict_may_carry_the_schedule() {
        let plain = ErrorBody { error: "no schedule with id \"x\"".into(), current: None };
        let wire = json!({"error": "no schedule with id \"x\""});
        assert_eq!(serde_json::to_value(&plain).unwrap(), wire);
        assert_eq!(serde_json::from_value::<ErrorBody>(wire).unwrap(), plain);
        let conflict = json!({"error": "changed", "current": {
            "id": "s1", "name": "n", "agents": ["a"], "body": "b", "anchor": "2026-11-30T09:00:00Z",
            "interval": 60, "paused": false, "not_before": {}, "revision": 3,
        }});
        let body: ErrorBody = serde_json::from_value(conflict.clone()).unwrap();
        assert_eq!(body.current.as_ref().map(|c| c.revision), Some(3));
        assert_eq!(serde_json::to_value(&body).unwrap(), conflict);
    }
}
