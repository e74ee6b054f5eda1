//! The control plane's benchmark (not a test: it holds thousands of sockets and takes minutes).
//! Copies are the real `agents-control serve` processes (the release binary under `cargo
//! bench`) on loopback, on a file:// store (moto for the S3 figure); devices are this process.
//!
//! cargo bench -p agents-control --bench control_plane -- [only=latency,throughput,memory,failover,s3]
//!     [samples=2000] [pairs=4] [window=64] [seconds=10] [devices=10000]
//!     [failover_devices=1000] [streams=10] [stream_len=1500] [idle_devices=1000] [idle_window=30]
//!
//! Results print as a Markdown table (docs/benchmarks.md, "Control plane", has a run).

mod measure;
mod support;

use std::collections::HashMap;
use std::time::Duration;

const ALL: [&str; 5] = ["latency", "throughput", "memory", "failover", "s3"];

struct Args(HashMap<String, String>);

impl Args {
    fn parse() -> Args {
        let mut map = HashMap::new();
        // cargo bench adds `--bench`; anything else that is not KEY=VALUE is a mistake.
        for arg in std::env::args().skip(1).filter(|arg| arg != "--bench") {
            let Some((key, value)) = arg.split_once('=') else {
                eprintln!(
                    "unexpected argument {arg:?}: arguments are KEY=VALUE (see the top of benches/control_plane.rs)"
                );
                std::process::exit(2);
            };
            map.insert(key.to_owned(), value.to_owned());
        }
        Args(map)
    }

    fn number(&self, key: &str, default: u64) -> u64 {
        self.0.get(key).map_or(default, |value| {
            value.parse().unwrap_or_else(|_| {
                eprintln!("{key}={value}: not a whole number");
                std::process::exit(2);
            })
        })
    }

    fn only(&self) -> Vec<String> {
        let listed = self.0.get("only").map_or(ALL.join(","), Clone::clone);
        let only: Vec<String> = listed.split(',').map(str::to_owned).collect();
        if let Some(unknown) = only.iter().find(|name| !ALL.contains(&name.as_str())) {
            eprintln!("only={listed}: {unknown} is not one of {}", ALL.join(","));
            std::process::exit(2);
        }
        only
    }
}

fn main() {
    let args = Args::parse();
    let only = args.only();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    println!(
        "control plane benchmark: {} cores, open files limit {:?}",
        std::thread::available_parallelism().map_or(0, usize::from),
        support::stats::open_files_limit()
    );
    println!("| measurement | figure | target |\n|---|---|---|");
    let started = std::time::Instant::now();
    let mut rows = Vec::new();
    // Devices' links (connect::run is not Send) run on this thread; everything else on the workers.
    let local = tokio::task::LocalSet::new();
    runtime.block_on(local.run_until(async {
        for name in &only {
            rows.extend(match name.as_str() {
                "latency" => measure::latency::run(args.number("samples", 2000) as usize).await,
                "throughput" => {
                    let (pairs, window) = (args.number("pairs", 4) as usize, args.number("window", 64));
                    measure::throughput::run(pairs, window, args.number("seconds", 10)).await
                }
                "memory" => measure::memory::run(args.number("devices", 10_000) as usize).await,
                "failover" => {
                    let devices = args.number("failover_devices", 1000) as usize;
                    measure::failover::run(
                        devices,
                        args.number("streams", 10) as usize,
                        args.number("stream_len", 1500),
                    )
                    .await
                }
                _ => {
                    let window = Duration::from_secs(args.number("idle_window", 30));
                    measure::idle_store::run(args.number("idle_devices", 1000) as usize, window).await
                }
            });
        }
    }));
    println!(
        "\nall {} rows in {:.0} s:\n| measurement | figure | target |\n|---|---|---|",
        rows.len(),
        started.elapsed().as_secs_f64()
    );
    for row in rows {
        println!("| {} | {} | {} |", row.measurement, row.figure, row.target);
    }
}
