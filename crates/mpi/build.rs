//! Compiles `src/in_place.c`: `MPI_IN_PLACE`, a macro of `mpi.h` whose value differs between
//! MPI libraries, as a constant Rust can read (rsmpi exports none). Finds MPI as rsmpi does.

fn main() {
    println!("cargo:rerun-if-changed=src/in_place.c");
    let library = match build_probe_mpi::probe() {
        Ok(library) => library,
        Err(errors) => {
            for error in errors {
                println!("cargo:warning=looking for MPI: {error}");
            }
            panic!("no MPI library found (Debian: libopenmpi-dev)");
        }
    };
    let mut build = cc::Build::new();
    build.file("src/in_place.c");
    match library.mpicc {
        Some(mpicc) => {
            build.compiler(mpicc);
        }
        None => {
            for include in &library.include_paths {
                build.include(include);
            }
        }
    }
    build.compile("depengine_mpi_in_place");
}
