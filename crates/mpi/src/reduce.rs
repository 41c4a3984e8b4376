//! [`Reduce`]: how a reduction combines the ranks' values.

use mpi::collective::SystemOperation;

/// How [`Comm::allreduce`](crate::Comm::allreduce) and
/// [`Comm::reduce_scatter`](crate::Comm::reduce_scatter) combine the ranks' values, element by
/// element (MPI's predefined operations).
///
/// ```
/// use depengine_mpi::Reduce;
///
/// assert_ne!(Reduce::Sum, Reduce::Max);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduce {
    /// `MPI_SUM`.
    Sum,
    /// `MPI_PROD`.
    Product,
    /// `MPI_MIN`.
    Min,
    /// `MPI_MAX`.
    Max,
}

impl Reduce {
    /// The MPI operation.
    pub(crate) fn operation(self) -> SystemOperation {
        match self {
            Reduce::Sum => SystemOperation::sum(),
            Reduce::Product => SystemOperation::product(),
            Reduce::Min => SystemOperation::min(),
            Reduce::Max => SystemOperation::max(),
        }
    }
}
