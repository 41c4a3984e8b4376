//! Every collective and transfer against a direct computation of what MPI gives; errors.

use depengine::{EngineError, FailureCause};
use depengine_mpi::{Comm, MpiError, Reduce, UserReduce};

use crate::launch::on_ranks;

#[test]
fn each_op_equals_a_direct_computation() {
    on_ranks(
        "collectives::each_op_equals_a_direct_computation",
        &[2, 3],
        2,
        |engine, comm| {
            let (rank, size) = (comm.rank(), comm.size());
            let ranks = 0..size;
            // allreduce: sum of f64, min and max of i64.
            let sum = engine
                .data((0..5).map(|i| (rank * 10 + i) as f64).collect::<Vec<_>>())
                .unwrap();
            let low = engine.data(vec![rank as i64 - 7; 3]).unwrap();
            let high = engine.data(vec![rank as i64 * 3; 3]).unwrap();
            comm.allreduce(&sum, Reduce::Sum).unwrap();
            comm.allreduce(&low, Reduce::Min).unwrap();
            comm.allreduce(&high, Reduce::Max).unwrap();
            // broadcast from the last rank.
            let spread = engine.data(vec![rank as u32; 4]).unwrap();
            comm.broadcast(&spread, size - 1).unwrap();
            // allgather, reduce-scatter.
            let mine = engine.data(vec![rank as u64, rank as u64 * 2]).unwrap();
            let gathered = engine.data(Vec::new()).unwrap();
            comm.allgather(&mine, &gathered).unwrap();
            let blocks = engine
                .data((0..2 * size).map(|j| (rank + j) as f64).collect::<Vec<_>>())
                .unwrap();
            let block = engine.data(Vec::new()).unwrap();
            comm.reduce_scatter(&blocks, &block, Reduce::Sum).unwrap();
            // A ring of sends and receives, then a barrier.
            let outgoing = engine.data(vec![rank as i32; 6]).unwrap();
            let incoming = engine.data(vec![-1_i32; 6]).unwrap();
            let (next, previous) = ((rank + 1) % size, (rank + size - 1) % size);
            if rank % 2 == 0 {
                comm.send(&outgoing, next, 7).unwrap();
                comm.recv(&incoming, previous, 7).unwrap();
            } else {
                comm.recv(&incoming, previous, 7).unwrap();
                comm.send(&outgoing, next, 7).unwrap();
            }
            comm.barrier().unwrap();
            comm.wait().unwrap();

            let expected_sum: Vec<f64> = (0..5)
                .map(|i| ranks.clone().map(|r| (r * 10 + i) as f64).sum())
                .collect();
            assert_eq!(*engine.read(&sum).unwrap(), expected_sum);
            assert_eq!(*engine.read(&low).unwrap(), vec![-7; 3]);
            assert_eq!(*engine.read(&high).unwrap(), vec![(size as i64 - 1) * 3; 3]);
            assert_eq!(*engine.read(&spread).unwrap(), vec![size as u32 - 1; 4]);
            let expected_gathered: Vec<u64> = ranks
                .clone()
                .flat_map(|r| [r as u64, r as u64 * 2])
                .collect();
            assert_eq!(*engine.read(&gathered).unwrap(), expected_gathered);
            let expected_block: Vec<f64> = (2 * rank..2 * rank + 2)
                .map(|j| ranks.clone().map(|r| (r + j) as f64).sum())
                .collect();
            assert_eq!(*engine.read(&block).unwrap(), expected_block);
            assert_eq!(*engine.read(&incoming).unwrap(), vec![previous as i32; 6]);
        },
    );
}

/// The MPI error of an op's failure, if that is what it is.
pub(crate) fn mpi_error(error: &EngineError) -> Option<&MpiError> {
    let EngineError::OpFailed(failure) = error else {
        return None;
    };
    let FailureCause::Error(source) = failure.cause() else {
        return None;
    };
    source.downcast_ref::<MpiError>()
}

/// A message longer than its receive buffer fails the receive with MPI's error (MPI's handler
/// returns errors, it does not abort) and nothing else; bad ranks and a second world are typed
/// errors at once.
#[test]
fn errors_are_typed_and_fail_their_op() {
    on_ranks(
        "collectives::errors_are_typed_and_fail_their_op",
        &[2],
        2,
        |engine, comm| {
            assert!(matches!(
                Comm::world(engine),
                Err(MpiError::AlreadyInitialized)
            ));
            let data = engine.data(vec![0_u8; 8]).unwrap();
            assert!(matches!(
                comm.broadcast(&data, comm.size()),
                Err(MpiError::NoSuchRank { rank: 2, size: 2 })
            ));
            assert!(matches!(
                comm.send(&data, 9, 0),
                Err(MpiError::NoSuchRank { .. })
            ));
            if comm.rank() == 0 {
                comm.send(&data, 1, 3).unwrap();
                comm.wait().unwrap();
            } else {
                let short = engine.data(vec![0_u8; 4]).unwrap();
                comm.recv(&short, 0, 3).unwrap();
                let error = engine.wait_for_var(short.var()).unwrap_err();
                assert!(
                    matches!(mpi_error(&error), Some(MpiError::Mpi { .. })),
                    "{error:?}"
                );
                // The op's failure is its data's; the communicator goes on.
                comm.wait().unwrap();
            }
            comm.barrier().unwrap();
            comm.wait().unwrap();
        },
    );
}

/// An allreduce by the caller's function: a commutative one (the element of largest
/// magnitude, sign kept) and an associative one that is not commutative (the left operand: the
/// result is rank 0's values, which only holds if MPI combines in rank order), against a direct
/// computation; a function that panics on one rank fails that rank's op with `ReduceFailed`,
/// and the communicator goes on.
#[test]
fn allreduce_by_the_callers_function() {
    on_ranks(
        "collectives::allreduce_by_the_callers_function",
        &[2, 3],
        2,
        |engine, comm| {
            let (rank, size) = (comm.rank(), comm.size());
            let largest = UserReduce::commutative(|incoming: &[f64], accumulated: &mut [f64]| {
                for (a, i) in accumulated.iter_mut().zip(incoming) {
                    if i.abs() > a.abs() {
                        *a = *i;
                    }
                }
            });
            let first = UserReduce::associative(|incoming: &[i32], accumulated: &mut [i32]| {
                accumulated.copy_from_slice(incoming);
            });
            let signed = |r: usize, i: usize| {
                let magnitude = ((r * 7 + i * 3) % 11) as f64;
                if (r + i).is_multiple_of(2) {
                    magnitude
                } else {
                    -magnitude
                }
            };
            let values = engine
                .data((0..6).map(|i| signed(rank, i)).collect::<Vec<_>>())
                .unwrap();
            let ranks = engine.data(vec![rank as i32 + 10; 4]).unwrap();
            comm.allreduce_by(&values, &largest).unwrap();
            comm.allreduce_by(&ranks, &first).unwrap();
            comm.wait().unwrap();
            let expected: Vec<f64> = (0..6)
                .map(|i| {
                    (0..size)
                        .map(|r| signed(r, i))
                        .fold(0.0_f64, |a, v| if v.abs() > a.abs() { v } else { a })
                })
                .collect();
            assert_eq!(*engine.read(&values).unwrap(), expected);
            assert_eq!(*engine.read(&ranks).unwrap(), vec![10; 4]);

            let failing = UserReduce::commutative(move |_: &[u8], _: &mut [u8]| {
                assert!(rank != 1, "no reduction on rank 1");
            });
            let data = engine.data(vec![1_u8; 3]).unwrap();
            comm.allreduce_by(&data, &failing).unwrap();
            let outcome = engine.wait_for_var(data.var());
            if rank == 1 {
                let error = outcome.unwrap_err();
                assert!(
                    matches!(mpi_error(&error), Some(MpiError::ReduceFailed(m)) if m.contains("rank 1")),
                    "{error:?}"
                );
            } else {
                outcome.unwrap();
            }
            comm.barrier().unwrap();
            comm.wait().unwrap();
        },
    );
}

/// Each rank sends 8 MiB to the other, then receives 8 MiB from it: a message that size waits
/// for its receive (MPI's rendezvous), so this completes only if the calls of several ops are
/// in flight together (a send that held the communicator until it completed would never let
/// the receive start, on either rank).
#[test]
fn sends_and_receives_are_in_flight_together() {
    on_ranks(
        "collectives::sends_and_receives_are_in_flight_together",
        &[2],
        2,
        |engine, comm| {
            let other = 1 - comm.rank();
            let outgoing = engine.data(vec![comm.rank() as f64; 1 << 20]).unwrap();
            let incoming = engine.data(vec![-1.0_f64; 1 << 20]).unwrap();
            comm.send(&outgoing, other, 1).unwrap();
            comm.recv(&incoming, other, 1).unwrap();
            comm.wait().unwrap();
            assert!(
                engine
                    .read(&incoming)
                    .unwrap()
                    .iter()
                    .all(|&x| x == other as f64)
            );
        },
    );
}
