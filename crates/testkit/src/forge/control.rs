//! What a test does to the stand-in's swarm-wide objects directly, as a person would in the
//! forge's web UI: organisations set up, webhooks deleted or their secret changed by hand, pull
//! requests and issues opened, changed, closed and merged (each sending its webhook deliveries),
//! deliveries held back or sent again.

use std::collections::BTreeMap;

use super::deliver;
use super::state::repo_key;
use super::swarm_state::{Delivery, StandInHook, StandInIssue, StandInPull};
use super::{ADMIN_USER, ForgeStandIn, lock};

/// A change to a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullChange {
    /// A new title (`edited`).
    Title(String),
    /// A new head commit (`synchronized`).
    Push(String),
    /// Whether it merges cleanly (sent as `edited`: the forge sends no event of its own).
    Mergeable(bool),
    Close,
    Reopen,
    /// Merged and closed (`closed`, with `merged` true).
    Merge,
}

/// What a new pull request or issue of a repository gets: the repository's key, the next index
/// (pulls and issues share them), "now" and an id.
struct NewItem {
    repo: String,
    number: i64,
    now: i64,
    id: i64,
}

/// # Panics
/// When the repository does not exist.
fn new_item(state: &mut super::state::State, owner: &str, name: &str) -> NewItem {
    let repo = repo_key(owner, name);
    assert!(state.repos.contains_key(&repo), "no repository {repo} in the stand-in");
    let number = state.swarm.next_index(&repo);
    NewItem { number, now: state.swarm.tick(), id: state.next_id(), repo }
}

impl ForgeStandIn {
    /// Adds the organisation `name`, [`ADMIN_USER`] its owner (as if made through the API by
    /// the administrator, but not counted).
    pub fn add_org(&self, name: &str) {
        lock(&self.state).insert_org(name, "", "private", ADMIN_USER);
    }

    /// Whether `name` is an organisation.
    pub fn is_org(&self, name: &str) -> bool {
        lock(&self.state).user(name).is_some_and(|u| u.is_org)
    }

    /// The teams of `org`: name -> (permission, includes all repositories, members).
    pub fn teams(&self, org: &str) -> BTreeMap<String, (String, bool, Vec<String>)> {
        let org = org.to_ascii_lowercase();
        lock(&self.state)
            .swarm
            .teams
            .iter()
            .filter(|t| t.org == org)
            .map(|t| (t.name.clone(), (t.permission.clone(), t.includes_all_repositories, t.members.clone())))
            .collect()
    }

    /// The names of the labels of `org`.
    pub fn org_labels(&self, org: &str) -> Vec<String> {
        let scope = format!("org:{}", org.to_ascii_lowercase());
        lock(&self.state).swarm.labels.iter().filter(|l| l.scope == scope).map(|l| l.name.clone()).collect()
    }

    /// The webhooks of `org`, secrets included.
    pub fn hooks(&self, org: &str) -> Vec<StandInHook> {
        let org = org.to_ascii_lowercase();
        lock(&self.state).swarm.hooks.iter().filter(|h| h.org == org).cloned().collect()
    }

    /// Deletes a webhook as someone would in the web UI (not counted); whether there was one.
    pub fn delete_hook_by_hand(&self, id: i64) -> bool {
        let mut state = lock(&self.state);
        let before = state.swarm.hooks.len();
        state.swarm.hooks.retain(|h| h.id != id);
        state.swarm.hooks.len() != before
    }

    /// Changes a webhook's secret or `active` as someone would in the web UI (not counted).
    pub fn change_hook_by_hand(&self, id: i64, secret: Option<&str>, active: Option<bool>) {
        let mut state = lock(&self.state);
        if let Some(hook) = state.swarm.hooks.iter_mut().find(|h| h.id == id) {
            if let Some(secret) = secret {
                hook.secret = secret.to_owned();
            }
            if let Some(active) = active {
                hook.active = active;
            }
        }
    }

    /// The collaborators of `owner/name` and their permissions.
    pub fn collaborators(&self, owner: &str, name: &str) -> BTreeMap<String, String> {
        lock(&self.state).swarm.collaborators.get(&repo_key(owner, name)).cloned().unwrap_or_default()
    }

    /// While `held`, changes queue their deliveries unsent (a forge whose webhook queue is
    /// stuck); [`ForgeStandIn::take_held`] hands them to the test, which may drop them (lost, as
    /// when a receiver stays down past the forge's retries) or send them in any order.
    pub fn hold_deliveries(&self, held: bool) {
        lock(&self.state).swarm.deliveries_held = held;
    }

    /// The deliveries held back so far, oldest first; they are no longer held.
    pub fn take_held(&self) -> Vec<Delivery> {
        std::mem::take(&mut lock(&self.state).swarm.held)
    }

    /// Sends one delivery (held back, or changed by the test) and records it.
    pub async fn send(&self, delivery: &Delivery) -> Delivery {
        let mut again = delivery.clone();
        again.status = None;
        self.record(vec![again]).await.remove(0)
    }

    /// Every delivery sent so far, oldest first.
    pub fn deliveries(&self) -> Vec<Delivery> {
        lock(&self.state).swarm.deliveries.clone()
    }

    /// The pull request `number` of `owner/name`.
    pub fn pull(&self, owner: &str, name: &str, number: i64) -> Option<StandInPull> {
        let key = repo_key(owner, name);
        lock(&self.state).swarm.pulls.iter().find(|p| p.repo == key && p.number == number).cloned()
    }

    async fn record(&self, deliveries: Vec<Delivery>) -> Vec<Delivery> {
        {
            let mut state = lock(&self.state);
            if state.swarm.deliveries_held {
                state.swarm.held.extend(deliveries);
                return Vec::new();
            }
        }
        let mut sent = Vec::new();
        for delivery in deliveries {
            sent.push(deliver::send(delivery).await);
        }
        lock(&self.state).swarm.deliveries.extend(sent.iter().cloned());
        sent
    }

    /// Opens a pull request from `head_ref` in `owner/name` by `author`; returns its number and
    /// the deliveries of its `opened` event.
    ///
    /// # Panics
    /// When the repository does not exist.
    pub async fn open_pull(
        &self,
        owner: &str,
        name: &str,
        author: &str,
        title: &str,
        head_ref: &str,
    ) -> (i64, Vec<Delivery>) {
        let (number, deliveries) = {
            let mut state = lock(&self.state);
            let NewItem { repo, number, now, id } = new_item(&mut state, owner, name);
            state.swarm.pulls.push(StandInPull {
                id,
                repo: repo.clone(),
                number,
                title: title.to_owned(),
                state: "open".into(),
                merged: false,
                mergeable: true,
                head_ref: head_ref.to_owned(),
                head_sha: format!("{:040x}", u128::from(now.unsigned_abs())),
                user: author.to_ascii_lowercase(),
                created: now,
                updated: now,
            });
            let payload = deliver::pull_payload(&state, &repo, number, "opened", author);
            (number, deliver::prepare(&state, &repo, "pull_request", &payload))
        };
        (number, self.record(deliveries).await)
    }

    /// Changes pull request `number` of `owner/name`; returns the deliveries of its event.
    ///
    /// # Panics
    /// When there is no such pull request.
    pub async fn change_pull(&self, owner: &str, name: &str, number: i64, change: PullChange) -> Vec<Delivery> {
        let deliveries = {
            let mut state = lock(&self.state);
            let repo = repo_key(owner, name);
            let now = state.swarm.tick();
            let pull = state
                .swarm
                .pulls
                .iter_mut()
                .find(|p| p.repo == repo && p.number == number)
                .unwrap_or_else(|| panic!("no pull request {repo}#{number} in the stand-in"));
            pull.updated = now;
            let action = match change {
                PullChange::Title(title) => {
                    pull.title = title;
                    "edited"
                }
                PullChange::Push(sha) => {
                    pull.head_sha = sha;
                    "synchronized"
                }
                PullChange::Mergeable(mergeable) => {
                    pull.mergeable = mergeable;
                    "edited"
                }
                PullChange::Close => {
                    pull.state = "closed".into();
                    "closed"
                }
                PullChange::Reopen => {
                    pull.state = "open".into();
                    "reopened"
                }
                PullChange::Merge => {
                    pull.state = "closed".into();
                    pull.merged = true;
                    pull.mergeable = false;
                    "closed"
                }
            };
            let payload = deliver::pull_payload(&state, &repo, number, action, ADMIN_USER);
            deliver::prepare(&state, &repo, "pull_request", &payload)
        };
        self.record(deliveries).await
    }

    /// Opens an issue with `labels` (names of the repository's or organisation's labels) in
    /// `owner/name`; returns its number and the deliveries of its `opened` event.
    ///
    /// # Panics
    /// When the repository does not exist.
    pub async fn open_issue(&self, owner: &str, name: &str, title: &str, labels: &[&str]) -> (i64, Vec<Delivery>) {
        let (number, deliveries) = {
            let mut state = lock(&self.state);
            let NewItem { repo, number, now, id } = new_item(&mut state, owner, name);
            state.swarm.issues.push(StandInIssue {
                id,
                repo: repo.clone(),
                number,
                title: title.to_owned(),
                state: "open".into(),
                labels: labels.iter().map(|l| (*l).to_owned()).collect(),
                user: ADMIN_USER.to_owned(),
                created: now,
                updated: now,
            });
            let payload = deliver::issue_payload(&state, &repo, number, "opened", ADMIN_USER);
            (number, deliver::prepare(&state, &repo, "issues", &payload))
        };
        (number, self.record(deliveries).await)
    }

    /// Closes issue `number` of `owner/name`; returns the deliveries of its `closed` event.
    ///
    /// # Panics
    /// When there is no such issue.
    pub async fn close_issue(&self, owner: &str, name: &str, number: i64) -> Vec<Delivery> {
        let deliveries = {
            let mut state = lock(&self.state);
            let repo = repo_key(owner, name);
            let now = state.swarm.tick();
            let issue = state
                .swarm
                .issues
                .iter_mut()
                .find(|i| i.repo == repo && i.number == number)
                .unwrap_or_else(|| panic!("no issue {repo}#{number} in the stand-in"));
            issue.state = "closed".into();
            issue.updated = now;
            let payload = deliver::issue_payload(&state, &repo, number, "closed", ADMIN_USER);
            deliver::prepare(&state, &repo, "issues", &payload)
        };
        self.record(deliveries).await
    }

    /// A push of `after` to `reference` (e.g. `refs/heads/main`) of `owner/name`; returns the
    /// deliveries of its `push` event.
    pub async fn push(&self, owner: &str, name: &str, reference: &str, after: &str) -> Vec<Delivery> {
        let deliveries = {
            let state = lock(&self.state);
            let repo = repo_key(owner, name);
            let payload = deliver::push_payload(&state, &repo, reference, after, ADMIN_USER);
            deliver::prepare(&state, &repo, "push", &payload)
        };
        self.record(deliveries).await
    }
}
