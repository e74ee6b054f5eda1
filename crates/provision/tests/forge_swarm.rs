//! The swarm-wide calls of the forge adapter (`SwarmForge`) against the forge stand-in: the
//! organisation, team, labels and webhook a reconcile pass needs, the listings, and refusals
//! that name the call without ever showing the webhook secret.

use hyperhive_provision::forge::{
    ForgejoClient, HookSpec, LabelScope, NewTeam, PullFilter, SwarmForge, TeamPermission,
};
use hyperhive_provision::secret::Secret;
use hyperhive_testkit::forge::{ForgeStandIn, PullChange};

async fn forge() -> (ForgeStandIn, ForgejoClient) {
    let stand_in = ForgeStandIn::start().await.expect("start the forge stand-in");
    let client = ForgejoClient::new(&stand_in.url(), Secret::new(stand_in.admin_token())).expect("client");
    (stand_in, client)
}

fn hook(secret: &str) -> HookSpec {
    HookSpec {
        url: "http://127.0.0.1:9/api/forge/webhook".into(),
        secret: Secret::new(secret),
        events: vec!["pull_request".into(), "issues".into(), "push".into()],
        active: true,
    }
}

#[tokio::test]
async fn the_swarms_objects_are_made_found_and_changed() {
    let (stand_in, forge) = forge().await;
    assert_eq!(forge.org("swarm").await.unwrap(), None);
    let org = forge.create_org("swarm", "hyperhive swarm").await.unwrap();
    assert_eq!((org.name.as_str(), org.visibility.as_str()), ("swarm", "private"));
    assert_eq!(forge.org("SWARM").await.unwrap().map(|o| o.id), Some(org.id));
    let taken = forge.create_org("swarm", "again").await.unwrap_err();
    assert!(taken.is_already_exists(), "{taken}");

    assert_eq!(forge.team("swarm", "agents").await.unwrap(), None);
    let new = NewTeam {
        name: "agents".into(),
        description: "d".into(),
        permission: TeamPermission::Read,
        includes_all_repositories: false,
        can_create_org_repo: false,
    };
    let team = forge.create_team("swarm", &new).await.unwrap();
    assert_eq!(forge.team("swarm", "Agents").await.unwrap(), Some(team.clone()));
    stand_in.add_user("alpha", "alpha-password", false);
    forge.add_team_member(team.id, "alpha").await.unwrap();
    forge.add_team_member(team.id, "alpha").await.unwrap();
    assert_eq!(forge.team_members(team.id).await.unwrap(), ["alpha"]);

    forge.create_label(LabelScope::Org("swarm"), "blocked", "#b60205", "d").await.unwrap();
    let labels = forge.labels(LabelScope::Org("swarm")).await.unwrap();
    assert_eq!((labels.len(), labels[0].color.as_str()), (1, "b60205"));

    let created = forge.create_org_hook("swarm", &hook("first-secret")).await.unwrap();
    assert_eq!((created.kind.as_str(), created.content_type.as_str()), ("gitea", "json"));
    assert_eq!(stand_in.hooks("swarm")[0].secret, "first-secret");
    forge.edit_org_hook("swarm", created.id, &hook("second-secret")).await.unwrap();
    assert_eq!(stand_in.hooks("swarm")[0].secret, "second-secret");
    assert_eq!(forge.org_hooks("swarm").await.unwrap()[0].events, ["pull_request", "issues", "push"]);
    forge.delete_org_hook("swarm", created.id).await.unwrap();
    forge.delete_org_hook("swarm", created.id).await.unwrap();
    assert!(forge.org_hooks("swarm").await.unwrap().is_empty());
}

#[tokio::test]
async fn pulls_issues_and_repositories_are_listed_across_pages() {
    let (stand_in, forge) = forge().await;
    stand_in.add_org("swarm");
    stand_in.set_max_page(2);
    for name in ["a-config", "b-config", "tools"] {
        stand_in.add_repo("swarm", name, false, true);
    }
    stand_in.add_user("a", "a-password", false);
    for title in ["one", "two", "three"] {
        stand_in.open_pull("swarm", "a-config", "a", title, "b").await;
    }
    stand_in.change_pull("swarm", "a-config", 1, PullChange::Merge).await;
    stand_in.open_issue("swarm", "tools", "bug", &[]).await;
    let (closed, _) = stand_in.open_issue("swarm", "tools", "old", &[]).await;
    stand_in.close_issue("swarm", "tools", closed).await;

    let repos = forge.org_repos("swarm").await.unwrap();
    assert_eq!(repos.len(), 3, "three repositories over two pages");
    let all = forge.pulls("swarm", "a-config", PullFilter::All).await.unwrap();
    assert_eq!(all.len(), 3);
    let merged = all.iter().find(|p| p.number == 1).unwrap();
    assert!(merged.merged && merged.state == "closed", "{merged:?}");
    assert_eq!(forge.pulls("swarm", "a-config", PullFilter::Open).await.unwrap().len(), 2);
    let issues = forge.open_issues("swarm", "tools").await.unwrap();
    assert_eq!(issues.iter().map(|i| i.title.as_str()).collect::<Vec<_>>(), ["bug"]);

    forge.add_collaborator("swarm", "a-config", "a").await.unwrap();
    assert_eq!(stand_in.collaborators("swarm", "a-config")["a"], "write");
}

#[tokio::test]
async fn malformed_input_sends_nothing_and_no_error_shows_the_secret() {
    let (stand_in, forge) = forge().await;
    let before = stand_in.counts().requests;
    let mut bad_url = hook("hunter2-secret");
    bad_url.url = "ftp://x/hook".into();
    for err in [
        forge.org("-bad").await.map(drop).unwrap_err(),
        forge.team("swarm", "a b").await.map(drop).unwrap_err(),
        forge.create_label(LabelScope::Org("swarm"), "x", "blue", "").await.map(drop).unwrap_err(),
        forge.create_label(LabelScope::Repo { owner: "o", name: ".." }, "x", "000000", "").await.map(drop).unwrap_err(),
        forge.create_org_hook("swarm", &bad_url).await.map(drop).unwrap_err(),
        forge.add_collaborator("swarm", "r", "not ok").await.unwrap_err(),
    ] {
        assert!(matches!(err, hyperhive_provision::forge::ForgeError::Invalid { .. }), "{err}");
    }
    assert_eq!(stand_in.counts().requests, before, "nothing sent");
    // A refusal from the forge (no such organisation) names the call, not the secret.
    let err = forge.create_org_hook("ghost-org", &hook("hunter2-secret")).await.unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");
    assert!(err.to_string().contains("webhook of \"ghost-org\"") && !format!("{err:?}").contains("hunter2"), "{err:?}");
}
