//! The stand-in's memory of what the swarm-wide routes touch: organisations' teams, labels and
//! webhooks, repositories' pull requests, issues and collaborators, and the deliveries sent to
//! webhooks (how the routes make and show them: `swarm_views`).

use std::collections::BTreeMap;

/// The units a team may be given (`unit_model.AllRepoUnitTypes`, those the swarm could use).
pub(super) const UNITS: &[&str] =
    &["repo.code", "repo.issues", "repo.pulls", "repo.ext_issues", "repo.wiki", "repo.releases"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Team {
    pub id: i64,
    /// The organisation's lower-case name.
    pub org: String,
    pub name: String,
    pub permission: String,
    pub includes_all_repositories: bool,
    pub can_create_org_repo: bool,
    pub units: Vec<String>,
    /// Lower-case logins.
    pub members: Vec<String>,
}

/// Where a label lives: `org:<name>` or `repo:<owner>/<name>`, lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Label {
    pub id: i64,
    pub scope: String,
    pub name: String,
    pub color: String,
    pub description: String,
}

/// An organisation webhook, secret included (a test may read and change it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandInHook {
    pub id: i64,
    /// The organisation's lower-case name.
    pub org: String,
    pub kind: String,
    pub url: String,
    pub content_type: String,
    pub secret: String,
    pub events: Vec<String>,
    pub active: bool,
}

/// A pull request of the stand-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandInPull {
    pub id: i64,
    /// Lower-case `owner/name` of its repository.
    pub repo: String,
    pub number: i64,
    pub title: String,
    /// `open` or `closed`.
    pub state: String,
    pub merged: bool,
    pub mergeable: bool,
    pub head_ref: String,
    pub head_sha: String,
    /// Lower-case login of its author.
    pub user: String,
    /// Seconds since the epoch, from the stand-in's clock, which never hands out a second twice.
    pub created: i64,
    pub updated: i64,
}

/// An issue of the stand-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandInIssue {
    pub id: i64,
    pub repo: String,
    pub number: i64,
    pub title: String,
    pub state: String,
    pub labels: Vec<String>,
    pub user: String,
    pub created: i64,
    pub updated: i64,
}

/// One webhook delivery as it was sent: a test may send it again ([`super::ForgeStandIn::send`]),
/// or change it before sending it itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The uuid in `X-Forgejo-Delivery`/`X-Gitea-Delivery`.
    pub id: String,
    pub hook_id: i64,
    pub url: String,
    /// `pull_request`, `issues` or `push`.
    pub event: String,
    /// Every header sent, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The receiver's status, or `None` when it did not answer.
    pub status: Option<u16>,
}

#[derive(Debug, Default)]
pub(super) struct SwarmState {
    pub teams: Vec<Team>,
    pub labels: Vec<Label>,
    pub hooks: Vec<StandInHook>,
    pub pulls: Vec<StandInPull>,
    pub issues: Vec<StandInIssue>,
    /// By repository key: the last index given to an issue or pull (they share numbers).
    pub last_index: BTreeMap<String, i64>,
    /// By repository key: lower-case login -> permission.
    pub collaborators: BTreeMap<String, BTreeMap<String, String>>,
    pub deliveries: Vec<Delivery>,
    /// While set, changes queue their deliveries in `held` instead of sending them (a forge
    /// whose webhook queue is stuck).
    pub deliveries_held: bool,
    pub held: Vec<Delivery>,
    /// The last instant handed out by [`SwarmState::tick`].
    last_tick: i64,
}

impl SwarmState {
    /// "Now" for a change, in whole seconds like the forge's timestamps, but strictly after the
    /// previous change's: two changes in one second would otherwise carry the same
    /// `updated_at`, and tests of ordering need to tell them apart.
    pub fn tick(&mut self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.last_tick = now.max(self.last_tick + 1);
        self.last_tick
    }

    pub fn next_index(&mut self, repo: &str) -> i64 {
        let index = self.last_index.entry(repo.to_owned()).or_insert(0);
        *index += 1;
        *index
    }
}

/// RFC 3339 in UTC, as the forge writes `updated_at`.
pub(super) fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_083_200), "2026-12-01T00:00:00Z");
        assert_eq!(rfc3339(951_825_599), "2000-02-29T11:59:59Z");
    }

    #[test]
    fn the_clock_never_hands_out_one_second_twice() {
        let mut state = SwarmState::default();
        let first = state.tick();
        assert!(state.tick() > first && state.tick() > first + 1);
    }
}
