//! Loom models of the slab and the block store: the free list, the trim, the buckets' install,
//! and a block's hand-over between holders.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --profile loom
//! --target-dir target/loom -p depengine-slab --lib` (or `cargo xtask loom`).

use loom::sync::Arc;
use loom::thread;

/// The slab's free stacks: two threads allocate and free while a third frees a slot it owns and
/// allocates again (so allocators take the freed stack over and install it while others pop and
/// push). No slot is ever held by two threads at once, all slots are accounted for at the end,
/// and the slab grew by at most one slot per allocating thread (see `slab.rs`). Each holder
/// writes its slot's (non-atomic) value: the free list must order a slot's last owner before
/// its next (`free`'s `Release` push, `take_returned`'s `Acquire` swap, `install`'s `Release`
/// and `alloc`'s `Acquire` loads), or loom reports the two accesses as concurrent.
#[test]
#[allow(unsafe_code)]
fn slab_free_list_never_hands_out_a_slot_twice() {
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicBool, Ordering};

    use crate::slab::{Slab, Slot};

    /// A slot's value: written by whoever holds the slot.
    #[derive(Default)]
    struct Owned(UnsafeCell<u32>);

    // SAFETY: only the slot's holder touches the value (what the model checks).
    unsafe impl Sync for Owned {}

    impl Slot for Owned {
        type Header = ();
    }

    loom::model(|| {
        let slab: Arc<Slab<Owned>> = Arc::new(Slab::new());
        let held: Arc<[AtomicBool; 8]> = Arc::new(std::array::from_fn(|_| AtomicBool::new(false)));
        let take = |slab: &Slab<Owned>, held: &[AtomicBool; 8], owner: u32| {
            let index = slab.alloc().unwrap();
            assert!(
                !held[index as usize].swap(true, Ordering::Relaxed),
                "slot {index} handed out twice"
            );
            // SAFETY: the free list hands the slot to this thread alone (what the model checks).
            slab.get(index)
                .unwrap()
                .0
                .with_mut(|value| unsafe { *value = owner });
            index
        };
        let give = |slab: &Slab<Owned>, held: &[AtomicBool; 8], index: u32, owner: u32| {
            // SAFETY: this thread holds the slot until `free` (what the model checks).
            let value = slab.get(index).unwrap().0.with(|value| unsafe { *value });
            assert_eq!(value, owner);
            held[index as usize].store(false, Ordering::Relaxed);
            slab.free(index);
        };
        // Two slots on the free list to start with, `b` held.
        let (a, b, c) = (
            take(&slab, &held, 0),
            take(&slab, &held, 0),
            take(&slab, &held, 0),
        );
        give(&slab, &held, a, 0);
        give(&slab, &held, c, 0);
        let threads: Vec<_> = (1..=2)
            .map(|owner| {
                let (slab, held) = (slab.clone(), held.clone());
                thread::spawn(move || {
                    let index = take(&slab, &held, owner);
                    give(&slab, &held, index, owner);
                })
            })
            .collect();
        give(&slab, &held, b, 0);
        let again = take(&slab, &held, 3);
        for thread in threads {
            thread.join().unwrap();
        }
        give(&slab, &held, again, 3);
        // Every slot is free again (a slot on the list twice would be counted twice, a lost one
        // not at all).
        assert_eq!(slab.free_count(), slab.slots());
        assert!(slab.slots() <= 3 + 3, "grew by {} slots", slab.slots() - 3);
    });
}

/// A slot's value in the trim models: written by whoever holds the slot.
#[derive(Default)]
struct Held(loom::cell::UnsafeCell<u32>);

// SAFETY: only the slot's holder touches the value (what the models check).
#[allow(unsafe_code)]
unsafe impl Sync for Held {}

impl crate::slab::Slot for Held {
    type Header = ();
}

/// Writes `owner` into slot `index` of `slab`, which the caller holds (or has to itself).
#[allow(unsafe_code)]
fn write_held(slab: &crate::slab::Slab<Held>, index: u32, owner: u32) {
    // SAFETY: the caller holds the slot (what the models check: loom reports a concurrent access).
    slab.get(index)
        .unwrap()
        .0
        .with_mut(|value| unsafe { *value = owner });
}

/// A slab grown past its first bucket (4 slots under loom) with every slot free but slot 0,
/// which another thread holds: the burst's last slot.
fn slab_after_a_burst() -> (Arc<crate::slab::Slab<Held>>, u32) {
    let slab: Arc<crate::slab::Slab<Held>> = Arc::new(crate::slab::Slab::new());
    let held: Vec<u32> = (0..5).map(|_| slab.alloc().unwrap()).collect();
    assert_eq!(held[0], 0);
    for &index in &held[1..] {
        slab.free(index);
    }
    (slab, held[0])
}

/// The burst's last holder writes slot 0 and frees it, then says so through a `Relaxed` flag
/// (which orders nothing); the trimmer waits for the flag, trims, and takes slot 0, the first a
/// trim hands out: its write must not race the holder's.
///
/// Catches: `trim`'s `Acquire` load of `returned` (causality violation on the slot's value).
#[test]
#[allow(unsafe_code)]
fn slab_trim_sees_the_last_free_of_a_burst() {
    use loom::sync::atomic::{AtomicBool, Ordering};

    use crate::slab::Keep;

    loom::model(|| {
        let (slab, last) = slab_after_a_burst();
        let freed = Arc::new(AtomicBool::new(false));
        let holder = {
            let (slab, freed) = (slab.clone(), freed.clone());
            thread::spawn(move || {
                write_held(&slab, last, 1);
                slab.free(last);
                freed.store(true, Ordering::Relaxed);
            })
        };
        while !freed.load(Ordering::Relaxed) {
            thread::yield_now();
        }
        // SAFETY: the holder touched only its slot, which it freed.
        if !unsafe { slab.trim(Keep::Buckets(1)) }.is_empty() {
            assert_eq!(slab.slots(), 4);
            let index = slab.alloc().unwrap();
            assert_eq!(index, 0, "a trim hands out the lowest slot first");
            write_held(&slab, index, 2);
            slab.free(index);
        }
        holder.join().unwrap();
        assert_eq!(
            slab.free_count(),
            slab.slots(),
            "a slot lost or listed twice"
        );
    });
}

/// A trim (after the burst's last holder freed its slot) races a thread that allocates a slot,
/// writes it and frees it: a trim goes through only if that thread has not entered, the thread
/// waits while a trim runs, and its write of a slot the trim handed out never races the burst's.
///
/// Catches: the trim's `Release` clear of `TRIMMING`, and `enter`'s `Acquire` (its increment,
/// for a user that comes after the trim, and its reload, for one that waited while it ran):
/// causality violation on the slot's value.
#[test]
#[allow(unsafe_code)]
fn slab_trim_races_a_user() {
    use crate::slab::Keep;

    loom::model(|| {
        let (slab, last) = slab_after_a_burst();
        let holder = {
            let slab = slab.clone();
            thread::spawn(move || {
                write_held(&slab, last, 1);
                slab.free(last);
            })
        };
        let user = {
            let slab = slab.clone();
            thread::spawn(move || {
                thread::yield_now();
                let index = slab.alloc().unwrap();
                write_held(&slab, index, 2);
                slab.free(index);
                index
            })
        };
        holder.join().unwrap();
        // SAFETY: the threads touch only the slots they hold.
        let trimmed = !unsafe { slab.trim(Keep::Buckets(1)) }.is_empty();
        let index = user.join().unwrap();
        assert_eq!(slab.in_use(), 0);
        assert_eq!(
            slab.free_count(),
            slab.slots(),
            "a slot lost or listed twice"
        );
        if trimmed {
            assert!(slab.slots() <= 4, "{} slots after a trim", slab.slots());
            assert!(index < 4 || slab.slots() <= 4);
        }
        // Nobody uses it now: a trim goes through, and what it keeps is handed out again.
        // SAFETY: as above.
        drop(unsafe { slab.trim(Keep::Buckets(1)) });
        assert_eq!(slab.slots(), 4);
        let mut again: Vec<u32> = (0..4).map(|_| slab.alloc().unwrap()).collect();
        again.sort_unstable();
        assert_eq!(again, [0, 1, 2, 3]);
    });
}

/// Two trims race each other and a thread that allocates and frees: at most one runs at a
/// time, and the second sees what the first did.
///
/// Catches: `trim`'s `Acquire` on setting `TRIMMING` (the second trim rebuilds from a stale
/// length, and lists a freed slot).
#[test]
#[allow(unsafe_code)]
fn slab_trims_race_each_other() {
    use crate::slab::{Keep, Slab};

    loom::model(|| {
        let slab: Arc<Slab<Held>> = Arc::new(Slab::new());
        let held: Vec<u32> = (0..6).map(|_| slab.alloc().unwrap()).collect();
        for index in held {
            slab.free(index);
        }
        let trimmers: Vec<_> = (0..2)
            .map(|_| {
                let slab = slab.clone();
                // SAFETY: nobody holds a slot of this slab.
                thread::spawn(move || !unsafe { slab.trim(Keep::Buckets(1)) }.is_empty())
            })
            .collect();
        let trims = trimmers
            .into_iter()
            .map(|trimmer| trimmer.join().unwrap())
            .filter(|&trimmed| trimmed)
            .count();
        assert!(trims <= 1, "both trims freed the same buckets");
        assert_eq!(slab.free_count(), slab.slots());
        let again: Vec<u32> = (0..6).map(|_| slab.alloc().unwrap()).collect();
        let mut distinct = again.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 6);
    });
}

/// A thread grows the slab into a new bucket while another looks, pinned, at a slot of that
/// bucket (as the graph's `inspect_op` does with any id): it finds no slot, or a fresh one,
/// fully built.
///
/// Catches: the `Release` install of a bucket (`grow`) and the `Acquire` load of a bucket
/// pointer (`entry`): the looker reads a slot whose construction it does not see.
#[test]
fn slab_bucket_is_built_before_it_is_seen() {
    use loom::sync::atomic::Ordering;

    use crate::slab::Slab;

    loom::model(|| {
        let slab: Arc<Slab<Held>> = Arc::new(Slab::new());
        let held: Vec<u32> = (0..4).map(|_| slab.alloc().unwrap()).collect();
        let grower = {
            let slab = slab.clone();
            thread::spawn(move || slab.alloc().unwrap())
        };
        {
            let _pin = slab.pin();
            if let Some(link) = slab.link(4) {
                let _ = link.load(Ordering::Relaxed);
            }
        }
        assert_eq!(grower.join().unwrap(), 4);
        drop(held);
    });
}

/// A worker gives back the block of a closure it ran while the pusher takes blocks for the
/// next ops: the block's next holder writes it only after its last holder's accesses.
///
/// Catches: the `Release` of `free` and the `Acquire` of the take of `returned` (or of the pop
/// that follows it), through the store's API: the pusher's write to the recycled block races
/// the worker's read of it.
#[test]
#[allow(unsafe_code)]
fn block_store_publishes_a_block_given_back_to_its_next_holder() {
    use crate::BlockStore;

    loom::model(|| {
        let store = Arc::new(BlockStore::new());
        let first = store.take().unwrap();
        // SAFETY: held; a `u64` fits, aligned.
        store.with_bytes(&first, |bytes| unsafe { bytes.write(1) });
        let worker = {
            let store = store.clone();
            thread::spawn(move || {
                // SAFETY: held (handed over by the spawn), written before it.
                let value = store.with_bytes(&first, |bytes| unsafe { bytes.read() });
                assert_eq!(value, 1);
                store.give_back(first);
            })
        };
        // Takes until the block comes back, or the store grows past it.
        let mut taken = Vec::new();
        for round in 2..4_u64 {
            let block = store.take().unwrap();
            // SAFETY: held: a block is handed to one holder at a time.
            store.with_bytes(&block, |bytes| unsafe { bytes.write(round) });
            taken.push(block);
        }
        worker.join().unwrap();
        for block in taken {
            store.give_back(block);
        }
        assert_eq!(store.in_use(), 0);
    });
}
