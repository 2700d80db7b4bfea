//! The PMI-1 wire protocol: text lines `cmd=NAME key=value ...` on a socket the process manager
//! hands over, either inherited (`PMI_FD`, with `PMI_RANK` and `PMI_SIZE`) or reached at
//! `PMI_PORT` (`host:port`, introduced with `PMI_ID`). MPICH's hydra `mpiexec` and Slurm's
//! `srun --mpi=pmi2` both serve it on `PMI_FD` (Slurm's plugin speaks PMI-1 and PMI-2 there).
//!
//! Values travel hex-encoded (PMI values may not hold spaces or `=`), under keys
//! `onesided-card-<rank>` and, from rank 0, `onesided-secret`.

use super::wireup::{WireUp, file_safe};
use crate::boot::{self, SECRET_LEN, Secret};
use crate::config::ProcessManager;
use crate::error::{Error, ErrorClass, Result};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Mutex, PoisonError};

/// Longest reply line accepted.
const LINE_LIMIT: u64 = 1 << 16;
/// The secret's key, published by rank 0.
const SECRET_KEY: &str = "onesided-secret";

fn pmi_error(msg: String) -> Error {
    Error::new(ErrorClass::Other, format!("PMI: {msg}"))
}

/// The line of command `cmd` with its arguments.
fn format_cmd(cmd: &str, args: &[(&str, &str)]) -> String {
    let mut line = format!("cmd={cmd}");
    for (k, v) in args {
        line.push_str(&format!(" {k}={v}"));
    }
    line.push('\n');
    line
}

/// The fields of a reply line; `cmd` must be `expect`, and `rc`, if present, 0.
fn parse_reply(line: &str, expect: &str) -> Result<HashMap<String, String>> {
    let fields: HashMap<String, String> = line
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    match fields.get("cmd") {
        Some(c) if c == expect => {}
        _ => {
            return Err(pmi_error(format!(
                "expected {expect}, got {:?}",
                line.trim_end()
            )));
        }
    }
    match fields.get("rc").map(String::as_str) {
        None | Some("0") => Ok(fields),
        Some(rc) => Err(pmi_error(format!(
            "{expect} failed with rc={rc}: {}",
            line.trim_end()
        ))),
    }
}

/// Hex digits of `bytes` back to bytes.
fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The connection to the PMI server.
struct Conn {
    reader: BufReader<Box<dyn Read + Send>>,
    writer: Box<dyn Write + Send>,
}

impl Conn {
    fn send(&mut self, line: &str) -> Result<()> {
        self.writer
            .write_all(line.as_bytes())
            .and_then(|()| self.writer.flush())
            .map_err(|e| pmi_error(format!("writing to the PMI server: {e}")))
    }

    fn reply(&mut self, expect: &str) -> Result<HashMap<String, String>> {
        let mut line = String::new();
        let n = (&mut self.reader)
            .take(LINE_LIMIT)
            .read_line(&mut line)
            .map_err(|e| pmi_error(format!("reading from the PMI server: {e}")))?;
        if n == 0 {
            return Err(pmi_error(format!(
                "the PMI server closed the connection (waiting for {expect})"
            )));
        }
        parse_reply(&line, expect)
    }

    fn call(
        &mut self,
        cmd: &str,
        args: &[(&str, &str)],
        expect: &str,
    ) -> Result<HashMap<String, String>> {
        self.send(&format_cmd(cmd, args))?;
        self.reply(expect)
    }
}

/// A rank's session with its PMI-1 server.
pub(super) struct Pmi {
    conn: Mutex<Conn>,
    rank: usize,
    size: usize,
    kvs: String,
    /// Longest value the server stores.
    vallen_max: usize,
}

fn field(fields: &HashMap<String, String>, key: &str) -> Result<String> {
    fields
        .get(key)
        .cloned()
        .ok_or_else(|| pmi_error(format!("reply without {key}")))
}

fn number(var: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<usize> {
    let v = var(name).ok_or_else(|| pmi_error(format!("{name} is not set")))?;
    v.trim()
        .parse()
        .map_err(|_| pmi_error(format!("{name}={v:?} is not a number")))
}

impl Pmi {
    /// Connects as the variables `var` gives describe, and initializes the session.
    pub(super) fn join(var: &dyn Fn(&str) -> Option<String>) -> Result<Pmi> {
        let (mut conn, rank, size) = match var("PMI_FD").filter(|v| !v.is_empty()) {
            Some(fd) => {
                let fd: i32 = fd
                    .trim()
                    .parse()
                    .map_err(|_| pmi_error(format!("PMI_FD={fd:?} is not a descriptor")))?;
                let file = onesided_shm::process::take_inherited_fd(fd)
                    .map_err(|e| pmi_error(format!("PMI_FD={fd}: {e}")))?;
                let writer = file
                    .try_clone()
                    .map_err(|e| pmi_error(format!("PMI_FD={fd}: {e}")))?;
                let conn = Conn {
                    reader: BufReader::new(Box::new(file) as Box<dyn Read + Send>),
                    writer: Box::new(writer),
                };
                (conn, number(var, "PMI_RANK")?, number(var, "PMI_SIZE")?)
            }
            None => Pmi::connect_port(var)?,
        };
        if rank >= size {
            return Err(pmi_error(format!("rank {rank} not below size {size}")));
        }
        conn.call(
            "init",
            &[("pmi_version", "1"), ("pmi_subversion", "1")],
            "response_to_init",
        )?;
        let maxes = conn.call("get_maxes", &[], "maxes")?;
        let vallen_max = field(&maxes, "vallen_max")?
            .parse()
            .map_err(|_| pmi_error("vallen_max is not a number".into()))?;
        let kvs = field(&conn.call("get_my_kvsname", &[], "my_kvsname")?, "kvsname")?;
        Ok(Pmi {
            conn: Mutex::new(conn),
            rank,
            size,
            kvs,
            vallen_max,
        })
    }

    /// `PMI_PORT`: connect, introduce ourselves with `PMI_ID`, and read rank and size from the
    /// server's `set` lines.
    fn connect_port(var: &dyn Fn(&str) -> Option<String>) -> Result<(Conn, usize, usize)> {
        let port = var("PMI_PORT").unwrap_or_default();
        let stream = TcpStream::connect(port.as_str())
            .map_err(|e| pmi_error(format!("connecting to PMI_PORT={port}: {e}")))?;
        let reading = stream
            .try_clone()
            .map_err(|e| pmi_error(format!("PMI_PORT={port}: {e}")))?;
        let mut conn = Conn {
            reader: BufReader::new(Box::new(reading) as Box<dyn Read + Send>),
            writer: Box::new(stream),
        };
        let id = var("PMI_ID")
            .or_else(|| var("PMI_RANK"))
            .unwrap_or_else(|| "0".into());
        conn.call("initack", &[("pmiid", &id)], "initack")?;
        let mut set = |name: &str| -> Result<usize> {
            let f = conn.reply("set")?;
            field(&f, name)?
                .parse()
                .map_err(|_| pmi_error(format!("set {name} is not a number")))
        };
        let size = set("size")?;
        let rank = set("rank")?;
        set("debug")?;
        Ok((conn, rank, size))
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<()> {
        let hex = boot::to_hex(value);
        if hex.len() > self.vallen_max {
            return Err(pmi_error(format!(
                "{key}: {} hex digits exceed the server's limit of {}",
                hex.len(),
                self.vallen_max
            )));
        }
        let args = [
            ("kvsname", self.kvs.as_str()),
            ("key", key),
            ("value", &hex),
        ];
        self.conn().call("put", &args, "put_result").map(drop)
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        let args = [("kvsname", self.kvs.as_str()), ("key", key)];
        let value = field(&self.conn().call("get", &args, "get_result")?, "value")?;
        from_hex(&value).ok_or_else(|| pmi_error(format!("{key}: value is not hex")))
    }
}

impl WireUp for Pmi {
    fn kind(&self) -> ProcessManager {
        ProcessManager::Pmi
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn job_id(&self) -> String {
        format!("pmi-{}", file_safe(&self.kvs))
    }

    fn exchange(&self, card: &[u8]) -> Result<Secret> {
        if self.rank == 0 {
            self.put(SECRET_KEY, &super::wireup::fresh_secret()?)?;
        }
        self.put(&format!("onesided-card-{}", self.rank), card)?;
        self.conn().call("barrier_in", &[], "barrier_out")?;
        let secret = self.get(SECRET_KEY)?;
        <[u8; SECRET_LEN]>::try_from(secret.as_slice())
            .map_err(|_| pmi_error("the job secret has the wrong length".into()))
    }

    fn card(&self, rank: usize) -> Result<Vec<u8>> {
        self.get(&format!("onesided-card-{rank}"))
    }

    fn finalize(&self) -> Result<()> {
        self.conn().call("finalize", &[], "finalize_ack").map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_replies() {
        assert_eq!(
            format_cmd("put", &[("kvsname", "k"), ("key", "a"), ("value", "0f")]),
            "cmd=put kvsname=k key=a value=0f\n"
        );
        assert_eq!(format_cmd("barrier_in", &[]), "cmd=barrier_in\n");
        let hydra = "cmd=get_result rc=0 msg=success value=(vector,(0,1,1))\n";
        let f = parse_reply(hydra, "get_result").unwrap();
        assert_eq!(f["value"], "(vector,(0,1,1))");
        let slurm = "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n";
        assert_eq!(parse_reply(slurm, "maxes").unwrap()["vallen_max"], "1024");
        assert!(parse_reply("cmd=barrier_out\n", "barrier_out").is_ok());
        let failed = parse_reply("cmd=get_result rc=-1 msg=key_not_found\n", "get_result");
        assert!(failed.unwrap_err().message().contains("rc=-1"));
        assert!(parse_reply("cmd=put_result rc=0\n", "get_result").is_err());
    }

    #[test]
    fn values_travel_as_hex() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(from_hex(&boot::to_hex(&bytes)).unwrap(), bytes);
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
