//! A start that fails part-way leaves nothing behind: no socket file, no background task.

use std::sync::Arc;

use hyperhive_daemon::tasks::Tasks;
use hyperhive_jobq::{Jobq, JobqConfig};
use swarm_controller::clock::SystemClock;
use swarm_controller::config::vars;
use swarm_controller::daemon::{self, Config, StartError};

#[tokio::test]
async fn a_start_that_fails_after_binding_leaves_no_socket_file_and_no_task() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/controller.sock");
    // A port nothing listens on: NATS is unreachable, which the start finds after the bind.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let env = [(vars::SOCKET, socket.display().to_string()), (vars::NATS_URL, format!("nats://127.0.0.1:{port}"))];
    let config =
        Config::from_lookup(|name| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())).unwrap().config;
    let tasks = Tasks::new();
    // A task begun before the failing step, as the forge passes are: it must not outlive the
    // start.
    tasks.spawn(std::future::pending());
    let jobq = Jobq::builder(JobqConfig::default()).start().unwrap();

    let err = daemon::run_with_tasks(config, Arc::new(SystemClock), jobq.clone(), &tasks, std::future::pending())
        .await
        .unwrap_err();

    assert!(matches!(err, StartError::Nats(_)), "{err}");
    assert!(socket.parent().unwrap().is_dir(), "the bind ran (it made the socket's directory)");
    assert!(!socket.exists(), "no socket file is left behind");
    assert!(tasks.is_stopped(), "every task stopped; {} still running", tasks.running());
    jobq.shutdown().await;
}
