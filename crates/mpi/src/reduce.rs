//! [`Reduce`]: how a reduction combines the ranks' values.

use std::fmt;
use std::sync::Arc;

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

/// The function of a [`UserReduce`]: `combine(incoming, accumulated)`.
type CombineFn<T> = dyn Fn(&[T], &mut [T]) + Send + Sync;

/// A reduction by a function of the caller's, for
/// [`Comm::allreduce_by`](crate::Comm::allreduce_by) (MPI's user-defined operation):
/// `combine(incoming, accumulated)` sets each element of `accumulated` to its combination with
/// the element of `incoming` at the same place. The combination must be associative: MPI
/// groups the ranks' values as its algorithm likes, and, for a commutative one, orders them so
/// too. The function runs on the communication thread, inside MPI's call; a panic there fails
/// the op on that rank ([`MpiError::ReduceFailed`](crate::MpiError::ReduceFailed)), and leaves
/// the result of the other ranks undefined.
///
/// ```
/// use depengine_mpi::UserReduce;
///
/// // The element of largest magnitude, sign kept.
/// let largest = UserReduce::commutative(|incoming: &[f64], accumulated: &mut [f64]| {
///     for (a, i) in accumulated.iter_mut().zip(incoming) {
///         if i.abs() > a.abs() {
///             *a = *i;
///         }
///     }
/// });
/// assert!(largest.is_commutative());
/// ```
pub struct UserReduce<T> {
    combine: Arc<CombineFn<T>>,
    commutative: bool,
}

impl<T> UserReduce<T> {
    /// A reduction by `combine`, associative and commutative.
    pub fn commutative(combine: impl Fn(&[T], &mut [T]) + Send + Sync + 'static) -> Self {
        UserReduce {
            combine: Arc::new(combine),
            commutative: true,
        }
    }

    /// A reduction by `combine`, associative but not commutative: MPI combines the ranks'
    /// values in rank order (`incoming` holds those of lower ranks).
    pub fn associative(combine: impl Fn(&[T], &mut [T]) + Send + Sync + 'static) -> Self {
        UserReduce {
            combine: Arc::new(combine),
            commutative: false,
        }
    }

    /// Whether MPI may combine the ranks' values in any order.
    pub fn is_commutative(&self) -> bool {
        self.commutative
    }

    /// The function, shared with the ops that use it.
    pub(crate) fn function(&self) -> Arc<CombineFn<T>> {
        self.combine.clone()
    }
}

impl<T> Clone for UserReduce<T> {
    fn clone(&self) -> Self {
        UserReduce {
            combine: self.combine.clone(),
            commutative: self.commutative,
        }
    }
}

impl<T> fmt::Debug for UserReduce<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserReduce")
            .field("commutative", &self.commutative)
            .finish_non_exhaustive()
    }
}
