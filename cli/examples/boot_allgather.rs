//! Test program for `tests/launcher.rs`: allgathers on interleaved and concurrent communicators.
//!
//! Run with `onesided run -n N boot_allgather`; prints `rank R ok` when every result checks.

use std::process::ExitCode;
use std::thread;

use onesided::boot::{BootClient, JobEnv};

fn main() -> ExitCode {
    match run() {
        Ok(rank) => {
            println!("rank {rank} ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("boot_allgather: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs allgather `(comm, seq)` with `data` and checks the result against `expected`.
fn check(
    client: &BootClient,
    comm: u64,
    seq: u64,
    index: usize,
    data: Vec<u8>,
    expected: Vec<Vec<u8>>,
) -> Result<(), String> {
    let got = client
        .allgather(comm, seq, expected.len(), index, &data)
        .map_err(|e| format!("allgather ({comm}, {seq}): {e}"))?;
    if got != expected {
        return Err(format!("allgather ({comm}, {seq}): unexpected result"));
    }
    Ok(())
}

fn tagged(tag: &str, seq: u64, rank: usize) -> Vec<u8> {
    format!("{tag}{seq}:{rank}").into_bytes()
}

fn run() -> Result<usize, String> {
    let env = JobEnv::from_env()
        .map_err(|e| e.to_string())?
        .ok_or("not started by onesided run")?;
    let client = BootClient::connect(&env).map_err(|e| e.to_string())?;
    let (rank, size) = (env.rank, env.size);
    let color = rank % 2;
    let parity: Vec<usize> = (color..size).step_by(2).collect();
    for seq in 0..5 {
        let world = (0..size).map(|r| tagged("w", seq, r)).collect();
        check(&client, 1, seq, rank, tagged("w", seq, rank), world)?;
        let half = parity.iter().map(|&r| tagged("p", seq, r)).collect();
        let comm = 10 + color as u64;
        check(&client, comm, seq, rank / 2, tagged("p", seq, rank), half)?;
    }
    let big = |r: usize| vec![u8::try_from(r % 251).unwrap_or(0); 200_000];
    check(&client, 1, 5, rank, big(rank), (0..size).map(big).collect())?;
    thread::scope(|s| {
        let workers: Vec<_> = [20u64, 21]
            .into_iter()
            .map(|comm| {
                let client = &client;
                s.spawn(move || {
                    (0..20).try_for_each(|seq| {
                        let tag = if comm == 20 { "a" } else { "b" };
                        let all = (0..size).map(|r| tagged(tag, seq, r)).collect();
                        check(client, comm, seq, rank, tagged(tag, seq, rank), all)
                    })
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| "worker panicked".to_string())?)
    })?;
    client.finalize().map_err(|e| e.to_string())?;
    Ok(rank)
}
