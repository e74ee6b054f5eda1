//! `swarmctl config-prs` and `swarmctl issues` against the controller.

use std::process::Command;

use crate::harness::{ForgeSwarm, ORG};

fn swarmctl(swarm: &ForgeSwarm, args: &[&str]) -> String {
    let out = Command::new(crate::common::swarmctl_binary())
        .args(args)
        .env("SWARM_CONTROLLER_SOCKET", &swarm.socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swarmctl_prints_config_prs_and_issues_as_tables_and_json() {
    let (swarm, _) = ForgeSwarm::with_alpha("1h").await;
    let (number, _) = swarm.forge.open_pull(ORG, "alpha-config", "alpha", "raise the budget", "b").await;
    swarm.forge.open_issue(ORG, "alpha-config", "more memory", &["needs-review"]).await;

    let table = swarmctl(&swarm, &["config-prs"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("AGENT") && lines[0].contains("MERGEABLE"), "{table}");
    assert!(lines[1].starts_with("alpha") && lines[1].contains(&format!("#{number}")), "{table}");
    assert!(lines[1].contains("open") && lines[1].contains("yes") && lines[1].contains("raise the budget"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&swarmctl(&swarm, &["config-prs", "--json"])).unwrap();
    assert_eq!(json[0]["number"], number);

    let table = swarmctl(&swarm, &["issues"]);
    assert!(table.contains("swarm/alpha-config") && table.contains("needs-review"), "{table}");
    assert!(table.contains("more memory") && table.contains("open: 1;"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&swarmctl(&swarm, &["issues", "--json"])).unwrap();
    assert_eq!(json["total"], 1);
}
