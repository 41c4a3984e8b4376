//! Ops reach MPI in push order, and communication overlaps the ops that do not touch its data.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use depengine_mpi::{MpiError, Reduce};

use crate::launch::{failing_job, on_ranks};

/// On rank 0 the first allreduce's data is written late: if ops reached MPI as their data
/// became ready, rank 0 would start the second before the first, MPI would match it with
/// the other ranks' first, and both sums would be wrong.
#[test]
fn ops_reach_mpi_in_push_order_whatever_order_their_data_are_ready_in() {
    on_ranks(
        "ordering::ops_reach_mpi_in_push_order_whatever_order_their_data_are_ready_in",
        &[2, 3],
        2,
        |engine, comm| {
            let (rank, size) = (comm.rank(), comm.size());
            let first = engine.data(vec![0.0_f64; 3]).unwrap();
            let second = engine.data(vec![100.0 * (rank + 1) as f64; 3]).unwrap();
            engine
                .op("late")
                .write(&first)
                .push_sync(move |_, first| {
                    if rank == 0 {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    first.fill((rank + 1) as f64);
                })
                .unwrap();
            comm.allreduce(&first, Reduce::Sum).unwrap();
            comm.allreduce(&second, Reduce::Sum).unwrap();
            comm.wait().unwrap();
            let total = (size * (size + 1) / 2) as f64;
            assert_eq!(*engine.read(&first).unwrap(), vec![total; 3]);
            assert_eq!(*engine.read(&second).unwrap(), vec![100.0 * total; 3]);
        },
    );
}

/// While rank 0's allreduce waits for rank 1 (which joins 600 ms late), rank 0's one worker
/// runs 200 ops on other data within a fraction of that: a communication path that blocked a
/// worker until MPI completes would hold them until rank 1 joins (tried: they then finish
/// after 600 ms, and this fails).
#[test]
fn ops_on_other_data_run_while_a_collective_is_pending() {
    on_ranks(
        "ordering::ops_on_other_data_run_while_a_collective_is_pending",
        &[2, 3],
        1,
        |engine, comm| {
            const LATE: Duration = Duration::from_millis(600);
            let rank = comm.rank();
            let data = engine.data(vec![1.0_f32; 1024]).unwrap();
            if rank == 1 {
                engine
                    .op("join late")
                    .write(&data)
                    .push_sync(|_, _| std::thread::sleep(LATE))
                    .unwrap();
            }
            let start = Instant::now();
            comm.allreduce(&data, Reduce::Sum).unwrap();
            if rank == 0 {
                let other = engine.new_var().unwrap();
                let ran = Arc::new(AtomicU32::new(0));
                for _ in 0..200 {
                    let ran = Arc::clone(&ran);
                    engine
                        .op("other work")
                        .writes([other])
                        .push_sync(move |_| {
                            ran.fetch_add(1, Ordering::SeqCst);
                        })
                        .unwrap();
                }
                engine.wait_for_var(other).unwrap();
                let other_done = start.elapsed();
                assert_eq!(ran.load(Ordering::SeqCst), 200);
                comm.wait().unwrap();
                let reduced = start.elapsed();
                assert!(
                    other_done < LATE / 2 && reduced >= LATE * 9 / 10,
                    "other work done at {other_done:?}, the allreduce at {reduced:?}"
                );
            }
            comm.wait().unwrap();
            assert_eq!(*engine.read(&data).unwrap(), vec![comm.size() as f32; 1024]);
        },
    );
}

/// An op skipped for a failed input stops the communicator: the ops after it fail (no rank
/// starts a call the others would match with another) until `wait` returns why; then the
/// communicator runs again.
#[test]
fn a_failure_stops_the_communicator_until_it_is_taken() {
    on_ranks(
        "ordering::a_failure_stops_the_communicator_until_it_is_taken",
        &[2],
        2,
        |engine, comm| {
            let (broken, fine) = (
                engine.data(vec![1_i64; 2]).unwrap(),
                engine.data(vec![1_i64; 2]).unwrap(),
            );
            engine
                .op("breaks")
                .write(&broken)
                .push_sync(|_, _| Err::<(), depengine::BoxError>("injected".into()))
                .unwrap();
            comm.allreduce(&broken, Reduce::Sum).unwrap();
            comm.allreduce(&fine, Reduce::Sum).unwrap();
            let error = comm.wait().unwrap_err();
            assert!(
                matches!(&error, MpiError::Stopped(reason) if reason.contains("mpi allreduce")),
                "{error}"
            );
            // `fine`'s allreduce failed (the communicator was stopped): its data holds that.
            assert!(engine.wait_for_var(fine.var()).is_err());
            comm.allreduce(&fine, Reduce::Sum).unwrap();
            comm.wait().unwrap();
            assert_eq!(*engine.read(&fine).unwrap(), vec![2; 2]);
            // The injected failure, once, from the engine's failure log.
            assert!(engine.wait_for_all().is_err());
        },
    );
}

/// A rank that exits without finalizing MPI, while the others wait in an allreduce it never
/// joins: Open MPI's `mpirun` ends the whole job, with an error, within seconds, rather than
/// leaving the others hanging (MPI 3.1 gives no portable way to fail their pending calls).
#[test]
fn a_rank_that_exits_early_ends_the_job_rather_than_hanging() {
    let took = failing_job(
        "ordering::a_rank_that_exits_early_ends_the_job_rather_than_hanging",
        2,
        1,
        |engine, comm| {
            if comm.rank() == 1 {
                std::process::exit(0);
            }
            let data = engine.data(vec![1.0_f64; 16]).unwrap();
            comm.allreduce(&data, Reduce::Sum).unwrap();
            // Never returns: mpirun ends this rank.
            let _ = comm.wait();
        },
    );
    if let Some(took) = took {
        assert!(
            took < Duration::from_secs(30),
            "the job ended after {took:?}"
        );
    }
}
