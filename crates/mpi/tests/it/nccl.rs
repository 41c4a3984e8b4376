//! `NcclComm`: on every rank a typed error where NCCL cannot run (no CUDA driver, no device for
//! the rank, no `libnccl`), after which the MPI communicator goes on; where it can (a GPU per
//! rank and NCCL), each collective against a direct computation.

use depengine::Engine;
use depengine::cuda::cudarc::driver::{CudaContext, CudaSlice};
use depengine_mpi::{MpiError, NcclComm, Reduce};

use crate::launch::on_ranks;

#[test]
fn collectives_on_gpu_buffers_or_a_typed_error_on_every_rank() {
    on_ranks(
        "nccl::collectives_on_gpu_buffers_or_a_typed_error_on_every_rank",
        &[1, 2, 3],
        2,
        |engine, comm| {
            let device = u32::try_from(comm.rank()).unwrap();
            match NcclComm::new(comm, device) {
                Ok(nccl) => collectives(engine, &nccl),
                Err(MpiError::NoNccl { reason }) => {
                    eprintln!("rank {}: no NCCL: {reason}", comm.rank());
                }
                Err(error) => panic!("rank {}: {error}", comm.rank()),
            }
            // The MPI communicator goes on, whatever NCCL did.
            let ones = engine.data(vec![1_u32; 4]).unwrap();
            comm.allreduce(&ones, Reduce::Sum).unwrap();
            let size = u32::try_from(comm.size()).unwrap();
            assert_eq!(*engine.read(&ones).unwrap(), vec![size; 4]);
        },
    );
}

/// Each collective on GPU buffers, checked on the host.
fn collectives(engine: &Engine, nccl: &NcclComm) {
    let (rank, size) = (nccl.rank(), nccl.size());
    let context = CudaContext::new(nccl.device() as usize).unwrap();
    let stream = context.default_stream();
    let buffer = |values: Vec<f32>| {
        let slice = stream.clone_htod(&values).unwrap();
        stream.synchronize().unwrap();
        engine.data(slice).unwrap()
    };
    let host = |data: &depengine::Data<CudaSlice<f32>>| {
        let slice = engine.read(data).unwrap();
        stream.clone_dtoh(&*slice).unwrap()
    };
    let r = rank as f32;
    let sum = (1..=size).sum::<usize>() as f32;
    let reduced = buffer(vec![r + 1.0; 4]);
    nccl.allreduce(&reduced, Reduce::Sum).unwrap();
    let broadcast = buffer(vec![r; 4]);
    nccl.broadcast(&broadcast, 0).unwrap();
    let (mine, all) = (buffer(vec![r; 2]), buffer(vec![-1.0; 2 * size]));
    nccl.allgather(&mine, &all).unwrap();
    let (blocks, block) = (buffer(vec![r + 1.0; 2 * size]), buffer(vec![0.0; 2]));
    nccl.reduce_scatter(&blocks, &block, Reduce::Sum).unwrap();
    nccl.wait().unwrap();
    assert_eq!(host(&reduced), vec![sum; 4]);
    assert_eq!(host(&broadcast), vec![0.0; 4]);
    let gathered: Vec<f32> = (0..size).flat_map(|r| [r as f32; 2]).collect();
    assert_eq!(host(&all), gathered);
    assert_eq!(host(&block), vec![sum; 2]);
    // A length NCCL would overrun is the op's typed error, on every rank alike.
    let short = buffer(vec![0.0; 1]);
    nccl.allgather(&mine, &short).unwrap();
    let error = engine.wait_for_var(short.var()).unwrap_err().to_string();
    assert!(error.contains("elements where"), "{error}");
}
