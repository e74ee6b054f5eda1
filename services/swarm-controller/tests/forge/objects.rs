//! The swarm's forge objects: made by the first pass, left alone by the next, repaired within
//! one pass when someone deletes the webhook or changes its secret by hand.

use hyperhive_testkit::wait_until;

use crate::harness::{ForgeSwarm, PATIENCE};

/// An organisation the controller has to make (the template's, `swarm`, exists already).
const NEW_ORG: &str = "hive-swarm";

/// Waits until the controller ran `passes` more passes: each pass after the first edits the
/// hook once (it sets the secret again).
async fn wait_passes(swarm: &ForgeSwarm, passes: usize) {
    let start = swarm.forge.counts().hooks_edited;
    wait_until("more forge passes", PATIENCE, || async {
        (swarm.forge.counts().hooks_edited >= start + passes).then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_pass_makes_the_org_team_labels_and_hook_and_the_next_make_nothing() {
    let swarm = ForgeSwarm::start(NEW_ORG, "1s").await;
    let hook = swarm.wait_objects(NEW_ORG).await;
    assert!(swarm.forge.is_org(NEW_ORG));
    assert_eq!(hook.kind, "gitea");
    assert_eq!(hook.content_type, "json");
    assert_eq!(hook.events, ["pull_request", "issues", "push"]);
    // The hook is made first; the first pass is over once the second has begun.
    wait_passes(&swarm, 1).await;
    let teams = swarm.forge.teams(NEW_ORG);
    let (permission, all_repos, _) = &teams["agents"];
    assert_eq!((permission.as_str(), *all_repos), ("read", false), "the agents' team reaches no repository");
    let mut labels = swarm.forge.org_labels(NEW_ORG);
    labels.sort();
    assert_eq!(labels, ["agent-request", "blocked", "config-change", "needs-review"]);
    let after_first = swarm.forge.counts();
    assert_eq!(
        (after_first.orgs_created, after_first.teams_created, after_first.labels_created, after_first.hooks_created),
        (1, 1, 4, 1)
    );

    wait_passes(&swarm, 2).await;
    let later = swarm.forge.counts();
    assert_eq!(
        (later.orgs_created, later.teams_created, later.labels_created, later.hooks_created, later.hooks_deleted),
        (1, 1, 4, 1, 0),
        "later passes make nothing"
    );
    assert_eq!(swarm.our_hooks(NEW_ORG).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_deleted_or_given_another_secret_by_hand_is_repaired_within_one_pass() {
    let swarm = ForgeSwarm::start(NEW_ORG, "1s").await;
    let hook = swarm.wait_objects(NEW_ORG).await;
    assert!(swarm.forge.delete_hook_by_hand(hook.id));
    let again = swarm.wait_objects(NEW_ORG).await;
    assert_ne!(again.id, hook.id, "made again");
    assert_eq!(swarm.forge.counts().hooks_created, 2);

    swarm.forge.change_hook_by_hand(again.id, Some("typed-in-the-web-ui"), Some(false));
    let repaired = swarm.wait_objects(NEW_ORG).await;
    assert_eq!(repaired.id, again.id, "repaired in place, not made again");
    assert_eq!(swarm.forge.counts().hooks_created, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_join_the_team_which_reaches_no_repository_and_a_missing_user_stops_nobody() {
    let swarm = ForgeSwarm::start(crate::harness::ORG, "1s").await;
    // Its forge user deleted by hand: it cannot join, the others do.
    swarm.put_on_roster("aaa-gone").await;
    swarm.add_agent("alpha").await;
    swarm.add_agent("beta").await;
    let members = wait_until("both agents in the team", PATIENCE, || async {
        let teams = swarm.forge.teams(crate::harness::ORG);
        let members = teams.get("agents").map(|t| t.2.clone()).unwrap_or_default();
        (members.len() == 2).then_some(members)
    })
    .await
    .unwrap();
    assert_eq!(members, ["alpha", "beta"]);
    let (permission, all_repos, _) = &swarm.forge.teams(crate::harness::ORG)["agents"];
    assert_eq!((permission.as_str(), *all_repos), ("read", false));
}
