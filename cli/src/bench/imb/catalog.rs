//! The 19 benchmarks of IMB-RMA (the MPI-RMA part of the Intel(R) MPI Benchmarks), with what
//! IMB says of each: its name, its class (which ranks take part and which table it prints),
//! its modes, the sizes it sweeps and the repetitions per size.
//!
//! | class | benchmarks | active ranks | columns |
//! |---|---|---|---|
//! | single transfer | Unidir_put/get, Bidir_put/get, Put_local, Get_local, Accumulate, Get_accumulate | 2 | t[usec], Mbytes/sec |
//! | single element | Fetch_and_op, Compare_and_swap | 2 | t[usec], Mbytes/sec |
//! | multiple transfer | One_put_all, One_get_all, Put_all_local, Get_all_local | all, rank 0 times | t[usec], Mbytes/sec (x N-1 targets) |
//! | parallel transfer | All_put_all, All_get_all, Exchange_put, Exchange_get | all | t_min, t_max, t_avg [usec] |
//! | overlap | Truly_passive_put | 2 | t_pure, t_ovrl [usec] |
//!
//! The single transfers (and single elements) run twice: NON-AGGREGATE (a flush after every
//! operation) and AGGREGATE (one flush after all of them).

/// One benchmark of IMB-RMA, named as IMB names it (any case on the command line).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    /// Rank 0 puts to rank 1 under a shared lock, flushing (IMB_rma_single_put).
    #[value(name = "Unidir_put")]
    UnidirPut,
    /// Rank 0 gets from rank 1 under a shared lock, flushing.
    #[value(name = "Unidir_get")]
    UnidirGet,
    /// Ranks 0 and 1 put to each other at once.
    #[value(name = "Bidir_put")]
    BidirPut,
    /// Ranks 0 and 1 get from each other at once.
    #[value(name = "Bidir_get")]
    BidirGet,
    /// Rank 0 puts to every other rank (lock_all, flush_all).
    #[value(name = "One_put_all")]
    OnePutAll,
    /// Rank 0 gets from every other rank (lock_all, flush_all).
    #[value(name = "One_get_all")]
    OneGetAll,
    /// Every rank puts to every other rank (lock_all, flush_all).
    #[value(name = "All_put_all")]
    AllPutAll,
    /// Every rank gets from every other rank (lock_all, flush_all).
    #[value(name = "All_get_all")]
    AllGetAll,
    /// Rank 0 puts to rank 1, completing locally (flush_local).
    #[value(name = "Put_local")]
    PutLocal,
    /// Rank 0 gets from rank 1, completing locally (flush_local).
    #[value(name = "Get_local")]
    GetLocal,
    /// Rank 0 puts to every other rank, then flush_local_all.
    #[value(name = "Put_all_local")]
    PutAllLocal,
    /// Rank 0 gets from every other rank, then flush_local_all.
    #[value(name = "Get_all_local")]
    GetAllLocal,
    /// Every rank puts to its left and right neighbours and flushes both.
    #[value(name = "Exchange_put")]
    ExchangePut,
    /// Every rank gets from its left and right neighbours and flushes both.
    #[value(name = "Exchange_get")]
    ExchangeGet,
    /// Rank 0 accumulates floats (MPI_SUM) into rank 1's window.
    #[value(name = "Accumulate")]
    Accumulate,
    /// Rank 0 get-accumulates floats (MPI_SUM) on rank 1's window.
    #[value(name = "Get_accumulate")]
    GetAccumulate,
    /// Rank 0 fetch-and-adds one float on rank 1.
    #[value(name = "Fetch_and_op")]
    FetchAndOp,
    /// Rank 0 compare-and-swaps one int on rank 1.
    #[value(name = "Compare_and_swap")]
    CompareAndSwap,
    /// Put + flush while the target waits in a barrier (t_pure), then while it computes for
    /// t_pure before the barrier (t_ovrl): equal times mean the put completed while the target
    /// computed.
    #[value(name = "Truly_passive_put")]
    TrulyPassivePut,
}

/// Which ranks take part in a benchmark and which table it prints (IMB's types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Two ranks, 0 and 1; the others wait in barriers (IMB's SingleTransfer).
    Single,
    /// Two ranks moving one element (IMB's SingleElementTransfer): one size.
    Element,
    /// Rank 0 to every other rank (IMB's MultPassiveTransfer): bandwidth counts N-1 targets.
    Multiple,
    /// Every rank (IMB's Collective): times over the ranks, no bandwidth.
    Parallel,
    /// Truly_passive_put's two times.
    Overlap,
}

/// Whether the flush follows each operation or all of them (IMB's `MODE:` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    NonAggregate,
    Aggregate,
}

impl Mode {
    /// As IMB prints it after `MODE:`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::NonAggregate => "NON-AGGREGATE",
            Mode::Aggregate => "AGGREGATE",
        }
    }
}

/// The data an operation moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data {
    /// Bytes (IMB's MPI_BYTE).
    Bytes,
    /// 32-bit floats, MPI_SUM (IMB's reduction type, MPI_FLOAT).
    Floats,
    /// One 32-bit int (Compare_and_swap's MPI_INT).
    Int,
}

impl Data {
    /// The element size in bytes: message sizes are multiples of it.
    pub fn unit(self) -> usize {
        match self {
            Data::Bytes => 1,
            Data::Floats | Data::Int => 4,
        }
    }

    /// The MPI datatype's name.
    pub fn mpi_name(self) -> &'static str {
        match self {
            Data::Bytes => "MPI_BYTE",
            Data::Floats => "MPI_FLOAT",
            Data::Int => "MPI_INT",
        }
    }
}

/// IMB's cap on the repetitions of one size (MSGSPERSAMPLE).
const MAX_REPETITIONS: usize = 1000;
/// IMB's cap in the NON-AGGREGATE mode (MSGS_NONAGGR).
const MAX_NONAGGREGATE: usize = 100;
/// IMB's cap on the bytes one size moves per rank (OVERALL_VOL, 40 MiB).
const OVERALL_VOLUME: usize = 40 << 20;
/// IMB's largest message (2^MAXMSGLOG, 4 MiB).
pub const MAX_SIZE: usize = 4 << 20;

impl Benchmark {
    /// Every benchmark, in IMB-RMA's order (its list of all cases).
    pub const ALL: [Benchmark; 19] = [
        Benchmark::UnidirPut,
        Benchmark::UnidirGet,
        Benchmark::BidirPut,
        Benchmark::BidirGet,
        Benchmark::OnePutAll,
        Benchmark::OneGetAll,
        Benchmark::AllPutAll,
        Benchmark::AllGetAll,
        Benchmark::PutLocal,
        Benchmark::GetLocal,
        Benchmark::PutAllLocal,
        Benchmark::GetAllLocal,
        Benchmark::ExchangePut,
        Benchmark::ExchangeGet,
        Benchmark::Accumulate,
        Benchmark::GetAccumulate,
        Benchmark::FetchAndOp,
        Benchmark::CompareAndSwap,
        Benchmark::TrulyPassivePut,
    ];

    /// The name IMB prints after `# Benchmarking`.
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::UnidirPut => "Unidir_put",
            Benchmark::UnidirGet => "Unidir_get",
            Benchmark::BidirPut => "Bidir_put",
            Benchmark::BidirGet => "Bidir_get",
            Benchmark::OnePutAll => "One_put_all",
            Benchmark::OneGetAll => "One_get_all",
            Benchmark::AllPutAll => "All_put_all",
            Benchmark::AllGetAll => "All_get_all",
            Benchmark::PutLocal => "Put_local",
            Benchmark::GetLocal => "Get_local",
            Benchmark::PutAllLocal => "Put_all_local",
            Benchmark::GetAllLocal => "Get_all_local",
            Benchmark::ExchangePut => "Exchange_put",
            Benchmark::ExchangeGet => "Exchange_get",
            Benchmark::Accumulate => "Accumulate",
            Benchmark::GetAccumulate => "Get_accumulate",
            Benchmark::FetchAndOp => "Fetch_and_op",
            Benchmark::CompareAndSwap => "Compare_and_swap",
            Benchmark::TrulyPassivePut => "Truly_passive_put",
        }
    }

    /// The benchmark's class.
    pub fn class(self) -> Class {
        use Benchmark::*;
        match self {
            UnidirPut | UnidirGet | BidirPut | BidirGet | PutLocal | GetLocal | Accumulate
            | GetAccumulate => Class::Single,
            FetchAndOp | CompareAndSwap => Class::Element,
            OnePutAll | OneGetAll | PutAllLocal | GetAllLocal => Class::Multiple,
            AllPutAll | AllGetAll | ExchangePut | ExchangeGet => Class::Parallel,
            TrulyPassivePut => Class::Overlap,
        }
    }

    /// The modes it runs in, in IMB's order; `None` where IMB prints no `MODE:` line.
    pub fn modes(self) -> &'static [Option<Mode>] {
        match self.class() {
            Class::Single | Class::Element => &[Some(Mode::NonAggregate), Some(Mode::Aggregate)],
            _ => &[None],
        }
    }

    /// What its operations move.
    pub fn data(self) -> Data {
        match self {
            Benchmark::Accumulate | Benchmark::GetAccumulate | Benchmark::FetchAndOp => {
                Data::Floats
            }
            Benchmark::CompareAndSwap => Data::Int,
            _ => Data::Bytes,
        }
    }

    /// The ranks timing it in a job of `n`: 2 for the single transfers and Truly_passive_put
    /// (the others wait in barriers), all `n` otherwise.
    pub fn active(self, n: usize) -> usize {
        match self.class() {
            Class::Single | Class::Element | Class::Overlap => 2,
            Class::Multiple | Class::Parallel => n,
        }
    }

    /// The bytes of window memory per rank for messages of `size` bytes (Exchange_*: one
    /// message from each neighbour, side by side).
    pub fn window_bytes(self, size: usize) -> usize {
        match self {
            Benchmark::ExchangePut | Benchmark::ExchangeGet => 2 * size,
            _ => size,
        }
    }

    /// The sizes IMB runs up to `max` bytes: 0, then `min` rounded up to the element size,
    /// doubling up to `max`; one element for the single element benchmarks.
    pub fn sizes(self, min: usize, max: usize) -> Vec<usize> {
        let unit = self.data().unit();
        if self.class() == Class::Element {
            return vec![unit];
        }
        let max = max / unit * unit;
        let mut sizes = vec![0];
        let mut size = min.max(1).next_multiple_of(unit);
        while size <= max {
            sizes.push(size);
            size *= 2;
        }
        sizes
    }

    /// The comments IMB lists under the benchmark's name.
    pub fn comments(self) -> &'static [&'static str] {
        match self {
            Benchmark::CompareAndSwap => &["Uses MPI_INT data type"],
            Benchmark::TrulyPassivePut => &[
                "The benchmark measures execution time of MPI_Put for 2 cases:",
                "1) The target is waiting in MPI_Barrier call (t_pure value)",
                "2) The target performs computation and then enters MPI_Barrier routine (t_ovrl value)",
            ],
            _ => &[],
        }
    }
}

/// IMB's repetitions for messages of `size` bytes in `mode`: 1000 (100 NON-AGGREGATE),
/// fewer where that would move more than 40 MiB, at least 1.
pub fn repetitions(size: usize, mode: Option<Mode>) -> usize {
    let cap = match mode {
        Some(Mode::NonAggregate) => MAX_NONAGGREGATE,
        _ => MAX_REPETITIONS,
    };
    match size {
        0 => cap,
        s => (OVERALL_VOLUME / s).clamp(1, cap),
    }
}

/// IMB's warm-up before the first sample of a size: a tenth of the repetitions, at least 10
/// (or all of them, where there are fewer).
pub fn warmup(repetitions: usize) -> usize {
    (repetitions / 10).max(repetitions.min(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_imbs_and_distinct() {
        let names: Vec<&str> = Benchmark::ALL.iter().map(|b| b.name()).collect();
        assert_eq!(names.len(), 19);
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} twice");
            // The name clap takes is IMB's.
            let value = clap::ValueEnum::to_possible_value(&Benchmark::ALL[i]).unwrap();
            assert_eq!(value.get_name(), *n);
        }
        assert_eq!(names[0], "Unidir_put");
        assert_eq!(names[18], "Truly_passive_put");
    }

    #[test]
    fn sizes_follow_imbs_loop() {
        let put = Benchmark::UnidirPut.sizes(0, MAX_SIZE);
        assert_eq!(&put[..4], &[0, 1, 2, 4]);
        assert_eq!(put.last(), Some(&MAX_SIZE));
        assert_eq!(put.len(), 24);
        // Floats: 0, then 4 (1 rounded up to an element), 8, ...
        let acc = Benchmark::Accumulate.sizes(0, MAX_SIZE);
        assert_eq!(&acc[..3], &[0, 4, 8]);
        assert_eq!(acc.len(), 22);
        assert_eq!(Benchmark::FetchAndOp.sizes(0, MAX_SIZE), [4]);
        assert_eq!(Benchmark::CompareAndSwap.sizes(8, 64), [4]);
        // As IMB's -msglog 3:12: 0 first, whatever the least size.
        assert_eq!(Benchmark::UnidirGet.sizes(3, 20), [0, 3, 6, 12]);
        assert_eq!(Benchmark::GetAccumulate.sizes(1, 10), [0, 4, 8]);
    }

    #[test]
    fn repetitions_are_capped_by_count_and_volume() {
        let aggregate = Some(Mode::Aggregate);
        assert_eq!(repetitions(0, aggregate), 1000);
        assert_eq!(repetitions(4096, None), 1000);
        assert_eq!(repetitions(65536, aggregate), 640);
        assert_eq!(repetitions(MAX_SIZE, None), 10);
        assert_eq!(repetitions(1 << 30, aggregate), 1);
        let each = Some(Mode::NonAggregate);
        assert_eq!(repetitions(0, each), 100);
        assert_eq!(repetitions(1 << 20, each), 40);
        assert_eq!(warmup(1000), 100);
        assert_eq!(warmup(40), 10);
        assert_eq!(warmup(3), 3);
    }

    #[test]
    fn classes_give_ranks_and_modes() {
        assert_eq!(Benchmark::BidirGet.active(8), 2);
        assert_eq!(Benchmark::OneGetAll.active(8), 8);
        assert_eq!(Benchmark::ExchangePut.window_bytes(16), 32);
        assert_eq!(Benchmark::FetchAndOp.modes().len(), 2);
        assert_eq!(Benchmark::TrulyPassivePut.modes(), &[None]);
        assert_eq!(Benchmark::AllPutAll.modes(), &[None]);
        let singles = Benchmark::ALL
            .iter()
            .filter(|b| b.class() == Class::Single)
            .count();
        assert_eq!(singles, 8);
    }
}
