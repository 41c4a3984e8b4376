//! [`Element`]: the element types a communicator's data may hold.

use mpi::datatype::{Equivalence, SystemDatatype};

/// A type whose values MPI moves as one of its predefined datatypes: the integers, `f32`,
/// `f64` and `bool` (rsmpi's `Equivalence` with a `SystemDatatype`). Such a datatype is a
/// constant of the MPI library: making it is no MPI call, and nothing frees it, so the
/// communication thread alone calls MPI.
///
/// ```
/// fn sums<T: depengine_mpi::Element>() {}
/// sums::<f64>();
/// sums::<u32>();
/// ```
pub trait Element:
    Equivalence<Out = SystemDatatype> + Copy + Default + Send + Sync + 'static
{
}

impl<T> Element for T where
    T: Equivalence<Out = SystemDatatype> + Copy + Default + Send + Sync + 'static
{
}
