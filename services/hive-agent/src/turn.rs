//! A turn: the configured command run through `sh -c`, the todo body on stdin.

use std::process::{ExitStatus, Stdio};

use hyperhive_schedule::{AgentName, Todo};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Runs `command` for `todo` and waits for it to exit. The child is killed if this future is
/// dropped (agent shutdown): the todo is then not acked and comes back.
///
/// # Errors
/// When `sh` cannot be started or waited for. A turn that cannot read all of its stdin (it
/// exited early) is not an error: its exit status says how it went.
pub async fn run_turn(command: &str, agent: &AgentName, todo: &Todo) -> std::io::Result<ExitStatus> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("HIVE_AGENT_NAME", agent.as_str())
        .env("HIVE_TODO_ID", &todo.id)
        .env("HIVE_TODO_SOURCE", &todo.source)
        .stdin(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let body = todo.body.clone();
    // Written concurrently with the wait so a body larger than the pipe buffer cannot deadlock
    // against a command that exits without reading it.
    let feed = tokio::spawn(async move {
        let _ = stdin.write_all(body.as_bytes()).await;
    });
    let status = child.wait().await;
    feed.abort();
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn todo(body: &str) -> Todo {
        Todo { id: "t-1".into(), source: "schedule:s".into(), body: body.into() }
    }

    #[tokio::test]
    async fn the_body_is_on_stdin_and_the_todo_in_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let command =
            format!("{{ cat; echo \"|$HIVE_AGENT_NAME|$HIVE_TODO_ID|$HIVE_TODO_SOURCE\"; }} > {}", out.display());
        let agent = AgentName::parse("bee").unwrap();
        let status = run_turn(&command, &agent, &todo("hello")).await.unwrap();
        assert!(status.success());
        assert_eq!(std::fs::read_to_string(out).unwrap(), "hello|bee|t-1|schedule:s\n");
    }

    #[tokio::test]
    async fn exit_codes_come_back_and_unread_stdin_is_fine() {
        let agent = AgentName::parse("bee").unwrap();
        let big = "x".repeat(1 << 20);
        let status = run_turn("exit 3", &agent, &todo(&big)).await.unwrap();
        assert_eq!(status.code(), Some(3));
    }
}
