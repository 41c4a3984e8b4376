//! Peer access between the GPUs a backend opens: each device may reach the memory of every
//! other device that the driver says it can (`cuDeviceCanAccessPeer`), so that a kernel reads a
//! buffer of another GPU, and a copy between two GPUs goes over their link rather than through
//! the host.
//!
//! Two grants make that, both needed: the context's (`cuCtxEnablePeerAccess`, for memory from
//! `cuMemAlloc`) and the peer's default memory pool's (`cuMemPoolSetAccess`), from which cudarc
//! allocates its buffers (`cuMemAllocAsync`) on devices that have pools; the context's grant
//! does not open a pool. A device opened next to others is linked with each, both ways, as it
//! opens ([`link`]). A pair the driver refuses, or whose grants fail (too many peers, say),
//! stays unlinked: its copies still work, staged by the driver, so the failure is not the
//! open's.

use std::ffi::c_int;

use cudarc::driver::sys::{self, CUresult};

use crate::current::MadeCurrent;
use crate::device::GpuDevice;

/// What linking two devices needs of them: the driver's calls, or a stand-in's in the tests.
pub(crate) trait Peers {
    /// Whether `from` can reach `to`'s memory.
    fn can_access(from: &Self, to: &Self) -> bool;
    /// Lets `from` reach `to`'s memory, if the driver agrees.
    fn enable(from: &Self, to: &Self);
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

    fn enable(from: &Self, to: &Self) {
        let Ok(_current) = MadeCurrent::new(from.context()) else {
            return;
        };
        // SAFETY: `from`'s context is current (above) and `to`'s is alive (borrowed); flags
        // must be 0. A failure (or access enabled already) leaves things as they were.
        let _ = unsafe { sys::cuCtxEnablePeerAccess(to.context().cu_ctx(), 0) };
        let Ok(id) = c_int::try_from(from.ordinal()) else {
            return;
        };
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: `to`'s device is a handle the driver gave its context; `pool` is written. A
        // device without pools refuses, and then cudarc allocates with `cuMemAlloc`, which the
        // context's grant above covers.
        let found =
            unsafe { sys::cuDeviceGetDefaultMemPool(&raw mut pool, to.context().cu_device()) };
        if found != CUresult::CUDA_SUCCESS {
            return;
        }
        let access = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id,
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: `pool` is `to`'s default pool, which lives as long as its device; `access`
        // is one descriptor, read during the call.
        let _ = unsafe { sys::cuMemPoolSetAccess(pool, &raw const access, 1) };
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::{Peers, link};

    /// A stand-in device: its number, and the devices whose memory it can reach.
    struct Device {
        number: usize,
        reaches: Vec<usize>,
        /// The devices it was let reach, in order.
        enabled: RefCell<Vec<usize>>,
    }

    fn device(number: usize, reaches: &[usize]) -> Device {
        Device {
            number,
            reaches: reaches.to_vec(),
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

        fn enable(from: &Self, to: &Self) {
            from.enabled.borrow_mut().push(to.number);
        }
    }

    /// A third device that reaches only the first, which reaches it: linked with it both
    /// ways; with the second, which it does not reach, only from the second's side.
    #[test]
    fn a_new_device_is_linked_both_ways_where_the_devices_allow_it() {
        let first = device(0, &[1, 2]);
        let second = device(1, &[0, 2]);
        let third = device(2, &[0]);
        link(&third, [&first, &second]);
        assert_eq!(*third.enabled.borrow(), [0]);
        assert_eq!(*first.enabled.borrow(), [2]);
        assert_eq!(*second.enabled.borrow(), [2]);
        // A device that reaches none and that none reaches links nothing.
        let fourth = device(3, &[]);
        link(&fourth, [&first, &second, &third]);
        assert!(fourth.enabled.borrow().is_empty());
        assert_eq!(*first.enabled.borrow(), [2]);
    }
}
