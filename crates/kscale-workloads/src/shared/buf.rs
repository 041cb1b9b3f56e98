//! Memory a measured loop works on: page-aligned buffers and mappings.

use anyhow::{ensure, Context, Result};
use std::alloc::Layout;
use std::io;
use std::os::fd::RawFd;

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// A page-aligned heap buffer, as bw_mem's valloc, fio's and the kernel's
/// copies use: an odd alignment would slow memcpy and copy_to_user
/// differently from the references. Not touched until [`AlignedBuf::zero`]
/// or [`AlignedBuf::fill`]: a measured pass must not take its page faults.
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is plain owned memory; only its owner touches it.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(bytes: usize) -> Result<AlignedBuf> {
        let layout = Layout::from_size_align(bytes.max(1), page_size()).context("buffer layout")?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        ensure!(!ptr.is_null(), "cannot allocate {bytes} bytes");
        Ok(AlignedBuf { ptr, layout })
    }

    /// Writes zeroes over every byte, faulting every page in. black_box keeps
    /// the stores from being dropped as writes to memory nobody reads yet.
    pub fn zero(&mut self) {
        // SAFETY: ptr is valid for layout.size() bytes and uniquely borrowed.
        unsafe { std::ptr::write_bytes(std::hint::black_box(self.ptr), 0, self.len()) };
    }

    /// Writes every byte (non-zero, so no page stays the shared zero page).
    pub fn fill(&mut self) {
        for (i, b) in self.as_mut_slice().iter_mut().enumerate() {
            *b = (i % 251) as u8 + 1;
        }
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The start, for loops that write through raw pointers (mem's passes),
    /// as C code holding the buffer would.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// An mmap(2) mapping, unmapped when dropped.
pub struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    /// Maps `len` bytes of `fd` (or anonymous memory with `fd` -1 and
    /// MAP_ANONYMOUS in `flags`) with protection `prot`.
    pub fn new(fd: RawFd, len: usize, prot: libc::c_int, flags: libc::c_int) -> Result<Mapping> {
        ensure!(len > 0, "cannot map 0 bytes");
        // SAFETY: a fresh mapping chosen by the kernel; it aliases nothing.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error()).context("mmap");
        }
        Ok(Mapping { addr, len })
    }

    pub fn addr(&self) -> *mut libc::c_void {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: addr/len is a mapping created in `new` and unmapped once.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}
