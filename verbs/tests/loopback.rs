//! The endpoint against itself over a real verbs device: a queue pair connected to itself,
//! RDMA writes (inline, staged, large), reads, the NIC's atomics one at a time and in flight
//! together, flushes, a request dropped unfinished, a bad remote key breaking the queue
//! pair with an error that is not a peer failure, writes with immediate data (also a thousand
//! to a second endpoint that polls nothing meanwhile), and a sleep on the completion channel
//! that a wake ends; lanes of the endpoint taken by several threads at once.
//!
//! It needs a verbs device with an active port: software RoCE in the guest of `rxe/run.sh`
//! (CI runs it there; `ONESIDED_RXE=1`, set in the guest, makes a missing device a failure).
//! Elsewhere it says why it did nothing.

#[cfg(have_ibverbs)]
mod on_a_device {
    use onesided_shm::Mem;
    use onesided_verbs::{Atomic, Endpoint, Lane, Remote, Request, Waiting};

    const PEER: u32 = 0;

    fn poll() -> Waiting {
        Waiting::Poll
    }

    /// The endpoint, its window of `len` bytes registered, and its queue pair connected to
    /// itself; `None` where there is no device (and none is required).
    fn open(len: usize) -> Option<(Endpoint, Mem<'static>, Remote)> {
        if onesided_verbs::active_device().is_none() {
            assert!(
                std::env::var("ONESIDED_RXE").as_deref() != Ok("1"),
                "ONESIDED_RXE=1 (the guest of rxe/run.sh) but no verbs device has an active port"
            );
            eprintln!("verbs loopback: no verbs device here; runs in the guest of rxe/run.sh");
            return None;
        }
        let ep = Endpoint::open(&Request::default()).expect("opening the endpoint");
        let mem = Mem::alloc(len, 4096).expect("memory");
        let qpn = ep.prepare(PEER).expect("a queue pair");
        ep.connect(PEER, ep.address(), qpn)
            .expect("connected to itself");
        assert!(ep.connected(PEER));
        let region = ep.register(mem.clone()).expect("registered");
        let key = region.key();
        std::mem::forget(region); // registered for the life of the test process
        Some((
            ep,
            mem,
            Remote {
                addr: key.addr,
                rkey: key.rkey,
            },
        ))
    }

    fn at(r: Remote, off: usize) -> Remote {
        Remote {
            addr: r.addr + off as u64,
            rkey: r.rkey,
        }
    }

    /// Lanes from threads: four threads share two lanes (each connected to itself, as the
    /// endpoint's queue pair is), each making 100 fetch-adds on one word through whichever
    /// lane is free and a write to its own slot; after a flush of every lane the count is
    /// exact, each value fetched was seen once, every slot holds its writer's bytes, and the
    /// endpoint's own read sees the count. Then a thread's writes with immediate data through a
    /// lane are handed over by the endpoint's polls, in order. The lanes are dropped on another
    /// thread.
    #[test]
    fn threads_share_lanes_and_what_they_do_lands() {
        let Some((ep, mem, win)) = open(1 << 20) else {
            return;
        };
        let lanes: Vec<Lane> = (0..2).map(|_| ep.lane().expect("a lane")).collect();
        for lane in &lanes {
            let lane = lane.lock();
            let qpn = lane.prepare(PEER).expect("a queue pair");
            lane.connect(PEER, ep.address(), qpn).expect("connected");
            assert!(lane.connected(PEER));
        }
        let counter = at(win, 0);
        let mut seen: Vec<u64> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4usize)
                .map(|i| {
                    let lanes = &lanes;
                    s.spawn(move || {
                        let mut seen = Vec::new();
                        for k in 0..100 {
                            let lane = (lanes[(i + k) % 2].try_lock())
                                .unwrap_or_else(|| lanes[i % 2].lock());
                            let add = Atomic::FetchAdd(1);
                            seen.push(lane.atomic(PEER, add, counter, &poll).unwrap());
                        }
                        let tag = [i as u8 + 1; 64];
                        let slot = at(win, 4096 + 64 * i);
                        lanes[i % 2].lock().write(PEER, &tag, slot, &poll).unwrap();
                        seen
                    })
                })
                .collect();
            (threads.into_iter())
                .flat_map(|t| t.join().unwrap())
                .collect()
        });
        for lane in &lanes {
            lane.lock().flush(PEER, win, &poll).unwrap();
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..400).collect::<Vec<u64>>(), "each value once");
        assert_eq!(mem.to_vec(0, 8).unwrap(), 400u64.to_ne_bytes());
        for i in 0..4 {
            let slot = mem.to_vec(4096 + 64 * i, 64).unwrap();
            assert_eq!(slot, vec![i as u8 + 1; 64], "slot of thread {i}");
        }
        let mut back = [0u8; 8];
        ep.read(PEER, &mut back, counter, &poll).unwrap();
        assert_eq!(u64::from_ne_bytes(back), 400);

        // Writes with immediate data through a lane, from another thread: the endpoint's polls
        // hand them over (the lane's queue pair takes its receives from the endpoint's shared
        // receive queue), in order, each after its bytes.
        let handed = handed_at(&ep);
        std::thread::scope(|s| {
            s.spawn(|| {
                let lane = lanes[1].lock();
                for imm in 1..=10u32 {
                    let slot = at(win, 8192 + 4 * imm as usize);
                    lane.write_notify(PEER, &imm.to_le_bytes(), slot, imm, &poll)
                        .unwrap();
                }
                lane.flush(PEER, win, &poll).unwrap();
            });
        });
        poll_until(&ep, &handed, 10, &for_secs(10));
        assert_eq!(*handed.borrow(), (1..=10).collect::<Vec<u32>>());
        for imm in 1..=10usize {
            let bytes = mem.to_vec(8192 + 4 * imm, 4).unwrap();
            assert_eq!(bytes, (imm as u32).to_le_bytes(), "the bytes of {imm}");
        }
        std::thread::spawn(move || drop(lanes)).join().unwrap();
    }

    #[test]
    fn writes_reads_and_atomics_land_where_they_should() {
        let Some((ep, mem, win)) = open(16 << 20) else {
            return;
        };
        let small = 0x1122_3344_5566_7788u64.to_le_bytes();
        let staged: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        // Larger than the largest message of rxe (8 MiB): split into several work requests.
        let large: Vec<u8> = (0..(9 << 20) + 5).map(|i| (i % 251) as u8).collect();
        ep.write(PEER, &small, at(win, 0), &poll).unwrap();
        ep.write(PEER, &staged, at(win, 64), &poll).unwrap();
        ep.write(PEER, &large, at(win, 1 << 20), &poll).unwrap();
        ep.flush(PEER, win, &poll).unwrap();
        assert_eq!(mem.to_vec(0, 8).unwrap(), small, "inline write");
        assert_eq!(
            mem.to_vec(64, staged.len()).unwrap(),
            staged,
            "staged write"
        );
        assert_eq!(
            mem.to_vec(1 << 20, large.len()).unwrap(),
            large,
            "large write"
        );

        let mut back = vec![0u8; large.len()];
        ep.read(PEER, &mut back, at(win, 1 << 20), &poll).unwrap();
        assert_eq!(back, large, "read");

        let counter = at(win, 12 << 20);
        assert_eq!(
            ep.atomic(PEER, Atomic::FetchAdd(5), counter, &poll)
                .unwrap(),
            0
        );
        let cas = Atomic::CompareSwap {
            compare: 5,
            swap: 9,
        };
        assert_eq!(ep.atomic(PEER, cas, counter, &poll).unwrap(), 5);
        assert_eq!(
            ep.atomic(PEER, cas, counter, &poll).unwrap(),
            9,
            "no swap: 9 != 5"
        );
        let ops: Vec<(Atomic, Remote)> = (0..40).map(|_| (Atomic::FetchAdd(1), counter)).collect();
        let t = ep.start_atomics(PEER, &ops, &poll).unwrap();
        let mut olds = vec![0u8; 8 * ops.len()];
        ep.finish(t, Some(&mut olds), &poll).unwrap();
        let olds: Vec<u64> = olds
            .chunks(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(
            olds,
            (9..49).collect::<Vec<u64>>(),
            "one after the other, in order"
        );
        assert_eq!(mem.to_vec(12 << 20, 8).unwrap(), 49u64.to_ne_bytes());
    }

    #[test]
    fn many_unsignalled_writes_and_a_dropped_request_complete() {
        let Some((ep, mem, win)) = open(1 << 20) else {
            return;
        };
        // More writes than a send queue holds: selective signalling retires them as it goes.
        for i in 0..1000u64 {
            ep.write(PEER, &i.to_le_bytes(), at(win, 8 * i as usize), &poll)
                .unwrap();
        }
        let dropped = ep.start_read(PEER, 4096, win, &poll).unwrap();
        drop(dropped);
        ep.flush(PEER, win, &poll).unwrap();
        for i in 0..1000u64 {
            assert_eq!(mem.to_vec(8 * i as usize, 8).unwrap(), i.to_le_bytes());
        }
        let t = ep.start_read(PEER, 16, at(win, 8 * 998), &poll).unwrap();
        let mut two = [0u8; 16];
        ep.finish(t, Some(&mut two), &poll).unwrap();
        assert_eq!(&two[..8], &998u64.to_le_bytes());
        assert_eq!(&two[8..], &999u64.to_le_bytes());
    }

    #[test]
    fn a_bad_remote_key_breaks_the_queue_pair_without_blaming_the_peer() {
        let Some((ep, _mem, win)) = open(4096) else {
            return;
        };
        let bad = Remote {
            addr: win.addr,
            rkey: win.rkey ^ 0x5a5a_0000,
        };
        ep.write(PEER, &[1u8; 8], bad, &poll).unwrap();
        let e = ep.flush(PEER, win, &poll).unwrap_err();
        assert!(
            !e.is_unreachable(),
            "a remote access error, not a gone peer: {e}"
        );
        let later = ep.write(PEER, &[2u8; 8], win, &poll).unwrap_err();
        assert!(
            later.status().is_some(),
            "the queue pair stays broken: {later}"
        );
        ep.disconnect(PEER);
        assert!(!ep.connected(PEER));
    }

    /// Writes with immediate data: the handler gets each write's data once, when the write's
    /// bytes are there (the handler reads them), for more writes than receives are posted
    /// (each poll posts its receive again), inline and staged.
    #[test]
    fn writes_with_immediate_data_are_handed_over_after_their_bytes() {
        let Some((ep, mem, win)) = open(1 << 20) else {
            return;
        };
        assert!(ep.remote_data_room() > 0);
        let seen: std::rc::Rc<std::cell::RefCell<Vec<(u32, bool)>>> = Default::default();
        {
            let (seen, mem) = (seen.clone(), mem.clone());
            ep.on_remote_data(Box::new(move |imm| {
                let len = if imm & 1 == 0 { 8 } else { 5000 };
                let there = mem.to_vec(0, len).unwrap().iter().all(|&b| b == imm as u8);
                seen.borrow_mut().push((imm, there));
            }))
            .unwrap();
        }
        assert!(ep.on_remote_data(Box::new(|_| {})).is_err(), "one handler");
        let mut want = Vec::new();
        for imm in 1..=100u32 {
            let len = if imm & 1 == 0 { 8 } else { 5000 };
            ep.write_notify(PEER, &vec![imm as u8; len], win, imm, &poll)
                .unwrap();
            want.push((imm, true));
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while seen.borrow().len() < want.len() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "write {imm} never handed over"
                );
                ep.progress().unwrap();
            }
        }
        assert_eq!(*seen.borrow(), want);
        ep.flush(PEER, win, &poll).unwrap();
    }

    /// A second endpoint of the device, connected to `target` (which knows it as `peer`).
    fn origin_of(target: &Endpoint, peer: u32) -> Endpoint {
        let origin = Endpoint::open(&Request::default()).expect("another endpoint");
        let (to_origin, to_target) = (target.prepare(peer).unwrap(), origin.prepare(PEER).unwrap());
        target.connect(peer, origin.address(), to_target).unwrap();
        origin.connect(PEER, target.address(), to_origin).unwrap();
        origin
    }

    type Handed = std::rc::Rc<std::cell::RefCell<Vec<u32>>>;

    /// What `target`'s handler is handed, in order.
    fn handed_at(target: &Endpoint) -> Handed {
        let handed: Handed = Default::default();
        let h = handed.clone();
        target
            .on_remote_data(Box::new(move |imm| h.borrow_mut().push(imm)))
            .unwrap();
        handed
    }

    /// Go on for `secs` seconds, then give up.
    fn for_secs(secs: u64) -> impl Fn() -> Waiting {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        move || match std::time::Instant::now() < deadline {
            true => Waiting::Poll,
            false => Waiting::GiveUp,
        }
    }

    /// A notified write of each of `imms` (the value itself, at `off` of `win`) from `origin`,
    /// then a flush: all complete while the target polls nothing.
    fn notify_and_flush(
        origin: &Endpoint,
        imms: std::ops::Range<u32>,
        win: Remote,
        off: usize,
        live: &dyn Fn() -> Waiting,
    ) {
        for imm in imms {
            origin
                .write_notify(PEER, &imm.to_le_bytes(), at(win, off), imm, live)
                .unwrap_or_else(|e| panic!("notified write {imm}: {e}"));
        }
        origin
            .flush(PEER, win, live)
            .expect("the writes complete while the target makes no call");
    }

    /// Poll `target` until `handed` holds `n` values.
    fn poll_until(target: &Endpoint, handed: &Handed, n: usize, live: &dyn Fn() -> Waiting) {
        while handed.borrow().len() < n {
            assert!(
                live() == Waiting::Poll,
                "{} handed over",
                handed.borrow().len()
            );
            target.progress().unwrap();
        }
    }

    /// Writes with immediate data to a peer that makes no call meanwhile: two endpoints of one
    /// device, connected to each other; 1000 notified writes of one to the other complete and
    /// flush while the other polls nothing (its shared receive queue holds an entry for each),
    /// and its first polls after hand every one over, in order.
    #[test]
    fn a_peer_that_makes_no_call_takes_a_thousand_notified_writes() {
        let Some((target, mem, win)) = open(4096) else {
            return;
        };
        let origin = origin_of(&target, 1);
        let handed = handed_at(&target);
        let live = for_secs(30);
        notify_and_flush(&origin, 1..1001, win, 8, &live);
        assert!(handed.borrow().is_empty(), "nothing polled the target yet");
        assert_eq!(mem.to_vec(8, 4).unwrap(), 1000u32.to_le_bytes());
        poll_until(&target, &handed, 1000, &live);
        assert_eq!(*handed.borrow(), (1..1001).collect::<Vec<u32>>());
    }

    /// A peer dropped with notified writes of its own not yet polled, then another peer's: the
    /// target's disconnect hands the first peer's over, and the second's fill the whole shared
    /// receive queue again while the target polls nothing (no receive was lost with the queue
    /// pair).
    #[test]
    fn a_disconnect_hands_over_what_came_and_loses_no_receive() {
        let Some((target, mem, win)) = open(4096) else {
            return;
        };
        let room = target.remote_data_room();
        assert!(room > 0);
        let (dropped, kept) = (origin_of(&target, 1), origin_of(&target, 2));
        let handed = handed_at(&target);
        let live = for_secs(60);
        notify_and_flush(&dropped, 1..101, win, 8, &live);
        assert!(handed.borrow().is_empty(), "nothing polled the target yet");
        target.disconnect(1);
        assert_eq!(*handed.borrow(), (1..101).collect::<Vec<u32>>());
        let more = 1000..1000 + room;
        notify_and_flush(&kept, more.clone(), win, 16, &live);
        assert_eq!(mem.to_vec(16, 4).unwrap(), (999 + room).to_le_bytes());
        poll_until(&target, &handed, (100 + room) as usize, &live);
        assert_eq!(handed.borrow()[100..], more.collect::<Vec<u32>>());
    }

    /// A sleep on the completion channel: with nothing coming it lasts its timeout and says
    /// nothing arrived; armed before a fetch-add and a wake, it ends at their completions, long
    /// before its timeout, with the add done; the wake reaches no handler, and a notification
    /// cannot carry the wake's data.
    #[test]
    fn a_wake_ends_a_sleep_on_the_completion_channel() {
        let Some((ep, mem, win)) = open(4096) else {
            return;
        };
        assert!(ep.sleeps(), "the device gives a completion channel");
        let handed: std::rc::Rc<std::cell::Cell<u32>> = Default::default();
        {
            let handed = handed.clone();
            ep.on_remote_data(Box::new(move |_| handed.set(handed.get() + 1)))
                .unwrap();
        }
        assert!(!ep.arm().unwrap(), "nothing has completed yet");
        assert!(!ep.sleep(std::time::Duration::from_millis(30)).unwrap());
        assert!(!ep.arm().unwrap());
        ep.start_atomics(PEER, &[(Atomic::FetchAdd(5), at(win, 64))], &poll)
            .unwrap();
        ep.wake(PEER, win, &poll).unwrap();
        let t = std::time::Instant::now();
        let timeout = std::time::Duration::from_secs(20);
        let mut woken = ep.sleep(timeout).unwrap();
        while mem.to_vec(64, 8).unwrap() != 5u64.to_le_bytes() {
            assert!(t.elapsed() < timeout / 2, "the add never landed");
            woken |= ep.arm().unwrap() || ep.sleep(timeout).unwrap();
        }
        assert!(woken, "the completions ended the sleep");
        assert!(t.elapsed() < timeout / 2, "slept {:?}", t.elapsed());
        ep.flush(PEER, win, &poll).unwrap();
        assert_eq!(handed.get(), 0, "a wake goes to no handler");
        assert!(ep.write_notify(PEER, &[1], win, 0, &poll).is_err());
    }
}

#[cfg(not(have_ibverbs))]
#[test]
fn built_without_verbs() {
    assert!(
        std::env::var("ONESIDED_RXE").as_deref() != Ok("1"),
        "ONESIDED_RXE=1 (the guest of rxe/run.sh) but onesided-verbs was built without the \
         libibverbs headers"
    );
    assert!(onesided_verbs::BUILT_WITH.is_none());
}
