//! Test program for `tests/launcher.rs`: clients that misuse the launcher's hub, which must
//! refuse them, cut them off or fail the job cleanly, without growing.
//!
//! Modes (first argument):
//! - `oversize`: rank 0 announces allgathers of 2,000,000 and of u32::MAX members, prints
//!   `refused N: <error>` for each refusal and `hub peak grew K KiB` (the growth of the
//!   launcher's peak resident memory); then every rank runs a real allgather and prints
//!   `rank R ok`.
//! - `loris`: rank 0 trickles a hello one byte every 2 s on a fresh connection, rank 1 (having
//!   joined with a raw hello) trickles an allgather frame the same way; each prints
//!   `rank R cut after MS ms`, counted from its first byte. Rank 0 then joins and prints
//!   `rank 0 saw: <error>` for the failure its allgather reports.
//! - `flood`: once every rank has joined, rank 0 opens 60 more connections that send nothing,
//!   and a second later prints `held H refused R`: how many the hub still holds and how many it
//!   closed at once. Then every rank runs an allgather and prints `rank R ok`.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use onesided::ErrorClass;
use onesided::boot::{BootClient, ENV_BOOT, ENV_SECRET, JobEnv};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("boot_abuse: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let env = JobEnv::from_env()
        .map_err(|e| e.to_string())?
        .ok_or("not started by onesided run")?;
    match mode.as_str() {
        "oversize" => oversize(&env),
        "loris" => loris(&env),
        "flood" => flood(&env),
        _ => Err(format!("unknown mode {mode:?}")),
    }
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// One allgather of every rank's rank, checked.
fn gather_ranks(client: &BootClient, env: &JobEnv, seq: u64) -> Result<(), String> {
    let got = client
        .allgather(9, seq, env.size, env.rank, &[env.rank as u8])
        .map_err(text)?;
    if got != (0..env.size).map(|r| vec![r as u8]).collect::<Vec<_>>() {
        return Err("unexpected allgather result".into());
    }
    println!("rank {} ok", env.rank);
    Ok(())
}

/// The launcher's peak resident memory in KiB (`VmHWM` of this rank's parent).
fn launcher_peak_kib() -> Result<u64, String> {
    let parent = std::os::unix::process::parent_id();
    let status = std::fs::read_to_string(format!("/proc/{parent}/status")).map_err(text)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmHWM".to_string())
}

fn oversize(env: &JobEnv) -> Result<(), String> {
    let client = BootClient::connect(env).map_err(text)?;
    if env.rank == 0 {
        let before = launcher_peak_kib()?;
        for (seq, members) in [(0, 2_000_000), (1, u32::MAX as usize)] {
            match client.allgather(9, seq, members, 0, b"x") {
                Ok(_) => return Err(format!("an allgather of {members} members completed")),
                Err(e) if e.class() == ErrorClass::Arg => println!("refused {members}: {e}"),
                Err(e) => return Err(format!("unexpected error {e}")),
            }
        }
        let grew = launcher_peak_kib()?.saturating_sub(before);
        println!("hub peak grew {grew} KiB");
    }
    gather_ranks(&client, env, 10)?;
    client.finalize().map_err(text)
}

/// The hub's address and the job secret, from the environment.
fn hub_and_secret() -> Result<(SocketAddr, Vec<u8>), String> {
    let addr = std::env::var(ENV_BOOT).map_err(text)?;
    let hex = std::env::var(ENV_SECRET).map_err(text)?;
    let secret = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("x"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(text)?;
    Ok((addr.parse().map_err(text)?, secret))
}

/// A frame: length prefix, tag, fields.
fn frame(tag: u8, fields: &[&[u8]]) -> Vec<u8> {
    let body: Vec<u8> = std::iter::once(tag)
        .chain(fields.iter().flat_map(|f| f.iter().copied()))
        .collect();
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend(body);
    frame
}

/// Sends `bytes` one every 2 s until the hub closes the connection; returns the time from the
/// first byte to the close.
fn trickle(s: &mut TcpStream, bytes: &[u8]) -> Result<Duration, String> {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(text)?;
    for byte in bytes {
        if s.write_all(&[*byte]).is_err() {
            return Ok(start.elapsed());
        }
        match s.read(&mut [0u8; 64]) {
            Ok(0) => return Ok(start.elapsed()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Ok(_) => return Err("the hub answered a partial frame".into()),
            Err(_) => return Ok(start.elapsed()),
        }
    }
    Err("the whole frame went through".into())
}

fn loris(env: &JobEnv) -> Result<(), String> {
    let (addr, secret) = hub_and_secret()?;
    let rank = (env.rank as u32).to_le_bytes();
    let pid = std::process::id().to_le_bytes();
    let mut s = TcpStream::connect(addr).map_err(text)?;
    if env.rank == 0 {
        let hello = frame(0x01, &[&[0u8; 32], &rank, &pid]);
        let cut = trickle(&mut s, &hello)?;
        println!("rank 0 cut after {} ms", cut.as_millis());
        let client = BootClient::connect(env).map_err(text)?;
        return match client.allgather(9, 0, env.size, 0, b"x") {
            Ok(_) => Err("allgather succeeded although rank 1 was cut off".into()),
            Err(e) if e.class() == ErrorClass::ProcFailed => {
                println!("rank 0 saw: {e}");
                Ok(())
            }
            Err(e) => Err(format!("unexpected error {e}")),
        };
    }
    s.write_all(&frame(0x01, &[&secret, &rank, &pid]))
        .map_err(text)?;
    let mut welcome = [0u8; 5];
    s.read_exact(&mut welcome).map_err(text)?;
    if welcome != [1, 0, 0, 0, 0x81] {
        return Err(format!("no welcome: {welcome:?}"));
    }
    let (comm, seq) = (9u64.to_le_bytes(), 0u64.to_le_bytes());
    let (members, index) = (2u32.to_le_bytes(), 1u32.to_le_bytes());
    let allgather = frame(0x02, &[&comm, &seq, &members, &index, b"x"]);
    let cut = trickle(&mut s, &allgather)?;
    println!("rank {} cut after {} ms", env.rank, cut.as_millis());
    Ok(())
}

fn flood(env: &JobEnv) -> Result<(), String> {
    let client = BootClient::connect(env).map_err(text)?;
    client
        .allgather(9, 0, env.size, env.rank, b"joined")
        .map_err(text)?;
    if env.rank == 0 {
        let (addr, _) = hub_and_secret()?;
        let flood = (0..60)
            .map(|_| TcpStream::connect(addr))
            .collect::<Result<Vec<_>, _>>()
            .map_err(text)?;
        thread::sleep(Duration::from_secs(1));
        let (mut held, mut refused) = (0, 0);
        for mut s in flood {
            s.set_nonblocking(true).map_err(text)?;
            match s.read(&mut [0u8; 1]) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => held += 1,
                Ok(0) | Err(_) => refused += 1,
                Ok(_) => return Err("the hub sent something to a silent connection".into()),
            }
        }
        println!("held {held} refused {refused}");
    }
    gather_ranks(&client, env, 1)?;
    client.finalize().map_err(text)
}
