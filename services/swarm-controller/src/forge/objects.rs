//! The swarm's forge objects, reconciled at start and every `SWARM_FORGE_RECONCILE_EVERY`:
//!
//! - the **organisation** (`SWARM_FORGE_ORG`), private: agents' config repositories live in it,
//!   so one organisation webhook sees all of them;
//! - the **agents' team**, `read` on no repository (`includes_all_repositories` off, no
//!   repository creation): it makes agents members of the organisation and nothing more; each
//!   agent writes to its own config repository as its only collaborator, never through a team;
//! - the **labels** config repositories use, on the organisation (every repository sees them);
//! - one **webhook** to `SWARM_FORGE_WEBHOOK_URL` for `pull_request`, `issues` and `push`,
//!   signed with the webhook secret.
//!
//! Each object is looked at first and made only when absent, so a second pass makes nothing.
//! The forge never shows a webhook's secret, so a secret changed by hand cannot be seen: every
//! pass sets the hook's whole config again (one `PATCH`, not a create), which repairs it. A
//! hook deleted by hand is made again; a second hook to the same URL is deleted.

use hyperhive_provision::Secret;
use hyperhive_provision::forge::{HookSpec, LabelScope, NewTeam, SwarmForge, TeamPermission};

use crate::provision::identities::ensure_org;

/// The agents' team.
pub const AGENTS_TEAM: &str = "agents";
/// The labels config repositories use: name, colour, description.
pub const LABELS: &[(&str, &str, &str)] = &[
    ("config-change", "0075ca", "a change to an agent's configuration"),
    ("needs-review", "fbca04", "waits for an operator's review"),
    ("agent-request", "7057ff", "asked for by an agent"),
    ("blocked", "b60205", "cannot go on until something else is done"),
];
/// The events the webhook delivers.
pub const HOOK_EVENTS: &[&str] = &["pull_request", "issues", "push"];

/// What one pass did, by object (`org`, `team`, `label <name>`, `hook`, `member <login>`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ObjectsReport {
    pub created: Vec<String>,
    /// Hooks deleted (duplicates), members added.
    pub changed: Vec<String>,
}

/// The webhook a pass keeps: where it points and what it signs with.
#[derive(Debug, Clone)]
pub struct WantedHook {
    pub url: String,
    pub secret: Secret,
}

/// One pass over the organisation, the webhook (when given), the labels and the team (with
/// `members`, the agents' forge users).
///
/// # Errors
/// The first forge error, as text; what was done before it stays done.
pub async fn pass(
    forge: &dyn SwarmForge,
    org: &str,
    members: &[String],
    hook: Option<&WantedHook>,
) -> Result<ObjectsReport, String> {
    let mut report = ObjectsReport::default();
    let text = |e: hyperhive_provision::forge::ForgeError| e.to_string();
    if forge.org(org).await.map_err(text)?.is_none() {
        ensure_org(forge, org).await?;
        report.created.push("org".into());
    }
    // The hook first: it is what keeps the controller current.
    if let Some(wanted) = hook {
        reconcile_hook(forge, org, wanted, &mut report).await.map_err(text)?;
    }
    let labels = forge.labels(LabelScope::Org(org)).await.map_err(text)?;
    for (name, color, description) in LABELS {
        if !labels.iter().any(|l| l.name == *name) {
            forge.create_label(LabelScope::Org(org), name, color, description).await.map_err(text)?;
            report.created.push(format!("label {name}"));
        }
    }
    let team = match forge.team(org, AGENTS_TEAM).await.map_err(text)? {
        Some(team) => team,
        None => {
            let new = NewTeam {
                name: AGENTS_TEAM.into(),
                description: "the swarm's agents (each writes only to its own config repository)".into(),
                permission: TeamPermission::Read,
                includes_all_repositories: false,
                can_create_org_repo: false,
            };
            let team = forge.create_team(org, &new).await.map_err(text)?;
            report.created.push("team".into());
            team
        }
    };
    let present = forge.team_members(team.id).await.map_err(text)?;
    for member in members.iter().filter(|m| !present.iter().any(|p| p.eq_ignore_ascii_case(m))) {
        // One agent's user gone (deleted by hand) must not stop the others joining.
        match forge.add_team_member(team.id, member).await {
            Ok(()) => report.changed.push(format!("member {member}")),
            Err(error) => tracing::warn!(%member, %error, "cannot add an agent to the agents' team"),
        }
    }
    Ok(report)
}

/// Makes the hook when none points at `wanted.url`, else sets the first one's whole config
/// again (the only way to repair a secret changed by hand) and deletes the others.
async fn reconcile_hook(
    forge: &dyn SwarmForge,
    org: &str,
    wanted: &WantedHook,
    report: &mut ObjectsReport,
) -> Result<(), hyperhive_provision::forge::ForgeError> {
    let spec = HookSpec {
        url: wanted.url.clone(),
        secret: wanted.secret.clone(),
        events: HOOK_EVENTS.iter().map(|e| (*e).to_owned()).collect(),
        active: true,
    };
    let ours: Vec<_> = forge.org_hooks(org).await?.into_iter().filter(|h| h.url == wanted.url).collect();
    match ours.split_first() {
        None => {
            forge.create_org_hook(org, &spec).await?;
            report.created.push("hook".into());
        }
        Some((keep, extra)) => {
            forge.edit_org_hook(org, keep.id, &spec).await?;
            for duplicate in extra {
                forge.delete_org_hook(org, duplicate.id).await?;
                report.changed.push(format!("hook {} deleted", duplicate.id));
            }
        }
    }
    Ok(())
}
