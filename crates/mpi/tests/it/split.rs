//! Communicators split from the world: ranks and sizes as `MPI_Comm_split` gives them, a rank
//! of no color, and collectives on two communicators whose data become ready in opposite orders
//! on different ranks.

use std::time::Duration;

use depengine_mpi::{MpiError, Reduce, UserReduce};

use crate::collectives::mpi_error;
use crate::launch::on_ranks;

#[test]
fn split_communicators_order_their_own_ops() {
    on_ranks(
        "split::split_communicators_order_their_own_ops",
        &[2, 3],
        2,
        |engine, world| {
            let (rank, size) = (world.rank(), world.size());
            // Every rank, ranked by a key that reverses the world's order.
            let everyone = world.split(Some(0), -(rank as i32)).unwrap().unwrap();
            assert_eq!((everyone.rank(), everyone.size()), (size - 1 - rank, size));
            // The even ranks; the odd ones join none.
            let evens = world.split((rank % 2 == 0).then_some(7), 0).unwrap();
            assert_eq!(evens.is_some(), rank % 2 == 0);
            if let Some(evens) = &evens {
                assert_eq!((evens.rank(), evens.size()), (rank / 2, size.div_ceil(2)));
            }

            // Two allreduces, one per communicator, whose inputs are ready in opposite orders
            // on even and odd ranks (one is held back for a while): were both calls blocking,
            // each thread would block in its first, waiting for a rank blocked in the other.
            let on_world = engine.data(vec![rank as u64 + 1; 5]).unwrap();
            let on_everyone = engine.data(vec![rank as u64 * 10; 5]).unwrap();
            let later = if rank % 2 == 0 {
                &on_everyone
            } else {
                &on_world
            };
            engine
                .op("hold back")
                .write(later)
                .push_sync(|_, _| std::thread::sleep(Duration::from_millis(300)))
                .unwrap();
            world.allreduce(&on_world, Reduce::Sum).unwrap();
            everyone.allreduce(&on_everyone, Reduce::Max).unwrap();
            world.wait().unwrap();
            everyone.wait().unwrap();
            let total: u64 = (1..=size as u64).sum();
            assert_eq!(*engine.read(&on_world).unwrap(), vec![total; 5]);
            assert_eq!(
                *engine.read(&on_everyone).unwrap(),
                vec![(size as u64 - 1) * 10; 5]
            );

            // A split of a split: `everyone` cut into pairs of its ranks (the last alone on 3).
            let pair = everyone
                .split(Some((everyone.rank() / 2) as u16), 0)
                .unwrap()
                .unwrap();
            let pair_ranks: Vec<usize> = (0..size)
                .filter(|&r| (size - 1 - r) / 2 == everyone.rank() / 2)
                .collect();
            assert_eq!(pair.size(), pair_ranks.len());
            let in_pair = engine.data(vec![rank as u64; 2]).unwrap();
            pair.allreduce(&in_pair, Reduce::Sum).unwrap();
            pair.wait().unwrap();
            let pair_sum: u64 = pair_ranks.iter().map(|&r| r as u64).sum();
            assert_eq!(*engine.read(&in_pair).unwrap(), vec![pair_sum; 2]);

            // Within the even ranks: a broadcast from its last rank.
            if let Some(evens) = &evens {
                let spread = engine.data(vec![rank as u32; 3]).unwrap();
                evens.broadcast(&spread, evens.size() - 1).unwrap();
                evens.wait().unwrap();
                let last_even = (size - 1) / 2 * 2;
                assert_eq!(*engine.read(&spread).unwrap(), vec![last_even as u32; 3]);
            }

            // A reduction by the caller's function needs one communicator: a typed failure.
            let by = engine.data(vec![1.0_f64; 2]).unwrap();
            let add = UserReduce::commutative(|incoming: &[f64], accumulated: &mut [f64]| {
                for (a, b) in accumulated.iter_mut().zip(incoming) {
                    *a += b;
                }
            });
            world.allreduce_by(&by, &add).unwrap();
            let failed = engine.wait_for_var(by.var()).unwrap_err();
            assert!(
                matches!(mpi_error(&failed), Some(MpiError::UserReduceAfterSplit)),
                "{failed}"
            );
            // The op's failure is its data's; the communicator goes on.
            world.barrier().unwrap();
            world.wait().unwrap();
        },
    );
}
