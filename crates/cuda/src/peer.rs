//! Peer access between the GPUs a backend opens: each device's context may reach the memory of
//! every other device that the driver says it can (`cuDeviceCanAccessPeer`), so that a kernel
//! reads a buffer of another GPU, and a copy between two GPUs goes over their link rather than
//! through the host.
//!
//! A device opened next to others is linked with each, both ways, as it opens ([`link`]). A
//! pair the driver refuses, or whose enabling fails (too many peers, say), stays unlinked: its
//! copies still work, staged by the driver, so the failure is not the open's.

use cudarc::driver::sys::{self, CUresult};

use crate::current::MadeCurrent;
use crate::device::GpuDevice;

/// What linking two devices needs of them: the driver's calls, or a stand-in's in the tests.
pub(crate) trait Peers {
    /// Whether `from` can reach `to`'s memory.
    fn can_access(from: &Self, to: &Self) -> bool;
    /// Lets `from` reach `to`'s memory; whether it now can.
    fn enable(from: &Self, to: &Self) -> bool;
}

/// Links `new` with each of `opened` (which it is not among), both ways where the devices
/// allow it.
pub(crate) fn link<D: Peers>(new: &D, opened: impl IntoIterator<Item = impl AsRef<D>>) {
    for other in opened {
        let other = other.as_ref();
        for (from, to) in [(new, other), (other, new)] {
            if D::can_access(from, to) {
                D::enable(from, to);
            }
        }
    }
}

impl Peers for GpuDevice {
    fn can_access(from: &Self, to: &Self) -> bool {
        let mut can = 0;
        // SAFETY: both devices are handles the driver gave their contexts; `can` is written.
        let result = unsafe {
            sys::cuDeviceCanAccessPeer(
                &raw mut can,
                from.context().cu_device(),
                to.context().cu_device(),
            )
        };
        result == CUresult::CUDA_SUCCESS && can != 0
    }

    fn enable(from: &Self, to: &Self) -> bool {
        let Ok(_current) = MadeCurrent::new(from.context()) else {
            return false;
        };
        // SAFETY: `from`'s context is current (above) and `to`'s is alive (borrowed); flags
        // must be 0.
        let result = unsafe { sys::cuCtxEnablePeerAccess(to.context().cu_ctx(), 0) };
        matches!(
            result,
            CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        )
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::{Peers, link};

    /// A stand-in device: its number, the devices whose memory it can reach, and those for
    /// which enabling fails (too many peers).
    struct Device {
        number: usize,
        reaches: Vec<usize>,
        refuses: Vec<usize>,
        /// The devices it was let reach, in order.
        enabled: RefCell<Vec<usize>>,
    }

    fn device(number: usize, reaches: &[usize], refuses: &[usize]) -> Device {
        Device {
            number,
            reaches: reaches.to_vec(),
            refuses: refuses.to_vec(),
            enabled: RefCell::new(Vec::new()),
        }
    }

    impl AsRef<Device> for Device {
        fn as_ref(&self) -> &Device {
            self
        }
    }

    impl Peers for Device {
        fn can_access(from: &Self, to: &Self) -> bool {
            from.reaches.contains(&to.number)
        }

        fn enable(from: &Self, to: &Self) -> bool {
            if from.refuses.contains(&to.number) {
                return false;
            }
            from.enabled.borrow_mut().push(to.number);
            true
        }
    }

    /// A third device that reaches only the first, which reaches it: linked with it both
    /// ways; with the second, which reaches it but fails to enable, not at all.
    #[test]
    fn a_new_device_is_linked_both_ways_where_the_devices_allow_it() {
        let first = device(0, &[1, 2], &[]);
        let second = device(1, &[0, 2], &[2]);
        let third = device(2, &[0], &[]);
        link(&third, [&first, &second]);
        assert_eq!(*third.enabled.borrow(), [0]);
        assert_eq!(*first.enabled.borrow(), [2]);
        assert!(second.enabled.borrow().is_empty());
        // A fourth that both the first and the second reach, and that reaches both.
        let fourth = device(3, &[0, 1], &[]);
        let (first, second) = (device(0, &[3], &[]), device(1, &[3], &[]));
        link(&fourth, [&first, &second]);
        assert_eq!(*fourth.enabled.borrow(), [0, 1]);
        assert_eq!(
            (&*first.enabled.borrow(), &*second.enabled.borrow()),
            (&vec![3], &vec![3])
        );
    }
}
