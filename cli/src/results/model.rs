//! What a result file holds once read: the run's context and one record per test and size, in
//! units and metrics that compare and plot understand.

use std::fmt;

/// An error of `compare` or `plot`: a file that cannot be read or parsed, nothing to compare
/// or plot, an output that cannot be written. Printed as is.
#[derive(Debug)]
pub struct Error(String);

impl Error {
    /// An error saying `message`.
    pub(super) fn new(message: impl Into<String>) -> Error {
        Error(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// What a file says about the machine and the job that produced it; every field may be absent
/// (OSU text has none of them).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct Context {
    /// The version of onesided.
    pub onesided: Option<String>,
    /// `shm` or `fabric`.
    pub transport: Option<String>,
    /// The libfabric provider, for the fabric transport.
    pub provider: Option<String>,
    /// Ranks of the job.
    pub ranks: Option<u32>,
    /// Nodes of the job.
    pub nodes: Option<u32>,
    /// The CPU's model name.
    pub cpu: Option<String>,
    /// How ranks were bound to cores.
    pub binding: Option<String>,
    /// The host name.
    pub host: Option<String>,
    /// When the run started (RFC 3339).
    pub started: Option<String>,
    /// `per-op median` for median iterations (`--per-op`); absent for means over the loop.
    pub timing: Option<String>,
}

impl Context {
    /// The fields present, in a short line: `onesided 0.1.0, shm, 2 ranks, 1 node, host h`.
    pub(super) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(v) = &self.onesided {
            parts.push(format!("onesided {v}"));
        }
        match (&self.transport, &self.provider) {
            (Some(t), Some(p)) => parts.push(format!("{t} ({p})")),
            (Some(t), None) => parts.push(t.clone()),
            (None, Some(p)) => parts.push(p.clone()),
            (None, None) => {}
        }
        if let Some(n) = self.ranks {
            parts.push(format!("{n} ranks"));
        }
        if let Some(n) = self.nodes {
            parts.push(format!("{n} node{}", if n == 1 { "" } else { "s" }));
        }
        if let Some(cpu) = &self.cpu {
            parts.push(cpu.clone());
        }
        if let Some(b) = &self.binding {
            parts.push(format!("binding {b}"));
        }
        if let Some(h) = &self.host {
            parts.push(format!("host {h}"));
        }
        if let Some(s) = &self.started {
            parts.push(format!("started {s}"));
        }
        if let Some(t) = &self.timing {
            parts.push(t.clone());
        }
        parts.join(", ")
    }
}

/// What a test's values measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unit {
    /// Latency in microseconds: lower is better.
    Micros,
    /// Bandwidth in MB/s (1 MB = 10^6 bytes): higher is better.
    MegabytesPerSec,
    /// Message rate in messages per second: higher is better.
    MessagesPerSec,
    /// Memory in KiB (1024 bytes): lower is better.
    Kibibytes,
    /// Open file descriptors: lower is better.
    Descriptors,
}

impl Unit {
    /// The unit as the JSON format spells it: `us`, `MB/s`, `msg/s`, `KiB` or `fd`.
    pub(super) fn symbol(self) -> &'static str {
        match self {
            Unit::Micros => "us",
            Unit::MegabytesPerSec => "MB/s",
            Unit::MessagesPerSec => "msg/s",
            Unit::Kibibytes => "KiB",
            Unit::Descriptors => "fd",
        }
    }

    /// The quantity with its unit, as a column or axis title: `Latency (us)`.
    pub(super) fn title(self) -> &'static str {
        match self {
            Unit::Micros => "Latency (us)",
            Unit::MegabytesPerSec => "Bandwidth (MB/s)",
            Unit::MessagesPerSec => "Message rate (msg/s)",
            Unit::Kibibytes => "Memory (KiB)",
            Unit::Descriptors => "File descriptors",
        }
    }

    /// Whether a lower value is the better one (latency, memory, descriptors).
    pub(super) fn lower_is_better(self) -> bool {
        matches!(self, Unit::Micros | Unit::Kibibytes | Unit::Descriptors)
    }

    /// The unit of a JSON `unit` field (`us`, `MB/s`, `msg/s`, `KiB`, `fd`), ignoring case.
    pub(super) fn from_symbol(s: &str) -> Option<Unit> {
        [
            Unit::Micros,
            Unit::MegabytesPerSec,
            Unit::MessagesPerSec,
            Unit::Kibibytes,
            Unit::Descriptors,
        ]
        .into_iter()
        .find(|u| u.symbol().eq_ignore_ascii_case(s.trim()))
    }
}

/// Which of a record's statistics `compare` and `plot` use (`--metric`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// The value the benchmark reports (the only one OSU text has).
    Value,
    /// The least over the repetitions.
    Min,
    /// The median over the repetitions.
    Median,
    /// The greatest over the repetitions.
    Max,
    /// The 10th percentile over the repetitions.
    P10,
    /// The 90th percentile over the repetitions.
    P90,
}

impl Metric {
    /// The name on the command line and in the JSON format.
    pub(super) fn name(self) -> &'static str {
        match self {
            Metric::Value => "value",
            Metric::Min => "min",
            Metric::Median => "median",
            Metric::Max => "max",
            Metric::P10 => "p10",
            Metric::P90 => "p90",
        }
    }
}

/// What distinguishes one curve of values against size from another: the test and how it ran.
/// Absent fields (OSU text has no datatype, older OSU no window line) match any value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Series {
    /// The test, as `onesided bench` names it: `put_latency`.
    pub test: String,
    /// The synchronization, as OSU prints it: `MPI_Win_flush`.
    pub sync: Option<String>,
    /// The window creation: `MPI_Win_allocate`.
    pub window: Option<String>,
    /// The datatype: `MPI_CHAR`.
    pub datatype: Option<String>,
    /// The ranks of the test.
    pub ranks: u32,
    /// What the values measure.
    pub unit: Unit,
}

/// Whether two optional fields agree: equal ignoring ASCII case, or one of them absent.
pub(super) fn agree(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => true,
    }
}

impl Series {
    /// Whether `self` and `other` measure the same thing, absent fields matching anything.
    pub(super) fn matches(&self, other: &Series) -> bool {
        self.test == other.test
            && self.ranks == other.ranks
            && self.unit == other.unit
            && agree(&self.sync, &other.sync)
            && agree(&self.window, &other.window)
            && agree(&self.datatype, &other.datatype)
    }

    /// `self` with its absent fields taken from `other`.
    pub(super) fn merged(&self, other: &Series) -> Series {
        Series {
            sync: self.sync.clone().or_else(|| other.sync.clone()),
            window: self.window.clone().or_else(|| other.window.clone()),
            datatype: self.datatype.clone().or_else(|| other.datatype.clone()),
            ..self.clone()
        }
    }

    /// The test and the fields present: `put_latency, MPI_Win_flush, MPI_Win_allocate, 2 ranks`.
    pub(super) fn describe(&self) -> String {
        let mut parts = vec![self.test.clone()];
        parts.extend(
            [&self.sync, &self.window, &self.datatype]
                .into_iter()
                .flatten()
                .cloned(),
        );
        parts.push(format!("{} ranks", self.ranks));
        parts.join(", ")
    }
}

/// One measured size of a test.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The test and how it ran.
    pub series: Series,
    /// The message size in bytes.
    pub size: u64,
    /// The reported value.
    pub value: f64,
    /// The least over the repetitions, where the file has it.
    pub min: Option<f64>,
    /// The median over the repetitions.
    pub median: Option<f64>,
    /// The greatest over the repetitions.
    pub max: Option<f64>,
    /// The 10th percentile over the repetitions.
    pub p10: Option<f64>,
    /// The 90th percentile over the repetitions.
    pub p90: Option<f64>,
}

impl Record {
    /// The statistic `metric`, if the file has it.
    pub(super) fn get(&self, metric: Metric) -> Option<f64> {
        match metric {
            Metric::Value => Some(self.value),
            Metric::Min => self.min,
            Metric::Median => self.median,
            Metric::Max => self.max,
            Metric::P10 => self.p10,
            Metric::P90 => self.p90,
        }
    }
}

/// The results of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The file's path as given, naming the run in tables and legends.
    pub source: String,
    /// The file's format: `onesided-bench/1` or `OSU text`.
    pub format: String,
    /// What ran where.
    pub context: Context,
    /// The measurements, in the file's order.
    pub records: Vec<Record>,
}

impl Run {
    /// The distinct series of the run, in the order they first appear.
    pub(super) fn series(&self) -> Vec<&Series> {
        let mut all: Vec<&Series> = Vec::new();
        for r in &self.records {
            if !all.contains(&&r.series) {
                all.push(&r.series);
            }
        }
        all
    }

    /// The first record of `series` at `size`.
    pub(super) fn at(&self, series: &Series, size: u64) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.size == size && &r.series == series)
    }

    /// The source, the format and the context in one line.
    pub(super) fn describe(&self) -> String {
        let context = self.context.describe();
        if context.is_empty() {
            format!("{} ({})", self.source, self.format)
        } else {
            format!("{} ({}: {context})", self.source, self.format)
        }
    }
}
