//! `mem`: memory bandwidth (docs/families/mem.md, seed 003 "Memory read rate", lmbench
//! `bw_mem`).
//!
//! Each workload makes passes over a buffer of `size` bytes, 512 bytes (128
//! four-byte words) per unrolled block, and reports `size` bytes per pass as
//! MB/s with MB = 10^6 bytes (bw_mem's unit too). The word loops use volatile
//! loads and stores: that keeps the compiler from dropping repeated passes and
//! also from vectorising them, so each word costs one scalar load or store as
//! in bw_mem's C compiled with `-O` — the figures stay comparable with
//! bw_mem's on the same machine. The block pointer and each block's sum stay
//! in registers (see [`opaque_ptr`]), so every loop is, instruction for
//! instruction, what gcc 12 `-O` (lmbench's own `CFLAGS`) makes of bw_mem's
//! (docs/families/mem.md lists both disassemblies). `bzero` and `bcopy` call
//! the C library's `memset`/`memcpy`, as bw_mem does.

use crate::shared::buf::AlignedBuf;
use crate::timing::median_time_per_op;
use crate::{ChartDef, Clock, Family, TrialCtx, TrialOutput, WorkloadDef};
use anyhow::{ensure, Context, Result};
use kscale_core::{MetricDef, ParamDef, ParamKind};
use std::hint::black_box;
use std::ptr::{read_volatile, write_volatile};

const BW: MetricDef = MetricDef::higher("bandwidth", "MB/s");
const BW_METRICS: &[MetricDef] = &[BW];

/// Words per unrolled block: bw_mem's 512-byte chunk of 4-byte ints.
const BLOCK: usize = 128;
const BLOCK_BYTES: usize = BLOCK * std::mem::size_of::<i32>();

const SIZE: ParamDef = ParamDef {
    name: "size",
    help: "Buffer size; bytes moved per pass (bcopy uses two buffers of this size).",
    kind: ParamKind::Size {
        min: BLOCK_BYTES as u64,
        max: 1 << 40,
    },
    default: &[
        "0.5m", "1m", "2m", "4m", "8m", "16m", "32m", "64m", "128m", "256m",
    ],
    quick: &["0.5m", "8m", "64m"],
};
const PARAMS: &[ParamDef] = &[SIZE];
/// How wide frd's loads and fwr's stores are (docs/families/mem.md).
const ACCESS: ParamDef = ParamDef {
    name: "access",
    help: "word: one 4-byte load or store per word, fwr's stores last word first: bw_mem \
           as lmbench builds it (CFLAGS=-O; gcc 12 -O2 compiles frd the same way); vector: \
           16-byte SSE2 loads/stores, what gcc 12 -O2 makes of fwr (x86_64 only).",
    kind: ParamKind::Choice(&["word", "vector"]),
    default: &["word"],
    quick: &[],
};
const WIDE_PARAMS: &[ParamDef] = &[SIZE, ACCESS];
/// Bandwidth against buffer size, as bw_mem's plots draw it.
const CHARTS: &[ChartDef] = &[ChartDef::against("size").log()];

/// What every mem workload shares: the buffer size swept, bandwidth, its chart.
const MEM: WorkloadDef = WorkloadDef {
    params: PARAMS,
    metrics: BW_METRICS,
    geomean_over: Some("size"),
    charts: CHARTS,
    // A pass over memory never leaves the thread that times it
    // (docs/host.md, "The thread's own clock").
    clock: Clock::Thread,
    ..WorkloadDef::family("mem")
};

pub static FAMILY: Family = Family {
    name: "mem",
    title: "Memory read rate",
    help: "Memory bandwidth of reads, writes, bzero and bcopy over buffers of 0.5 MB to \
           256 MB (lmbench bw_mem).",
    workloads: &[
        WorkloadDef {
            params: WIDE_PARAMS,
            ..MEM.named(
                "frd",
                "Memory read",
                "Sums every 4-byte word of the buffer into one register chain per block (bw_mem \
                 frd, which gcc 12 at -O and -O2 leaves as 4-byte adds). `access=vector` loads \
                 16 bytes at a time instead: in cache three to four times the figure.",
                frd,
            )
        },
        MEM.named(
            "rd",
            "Memory partial read",
            "Sums every fourth 4-byte word (16-byte stride) but counts the whole buffer \
             (bw_mem rd).",
            rd,
        ),
        WorkloadDef {
            params: WIDE_PARAMS,
            ..MEM.named(
                "fwr",
                "Memory write",
                "Stores to every 4-byte word of the buffer, each block's 128 words last first \
                 (bw_mem fwr as lmbench's own -O build compiles it). `access=vector` stores 16 \
                 bytes at a time, as bw_mem built with gcc 12 -O2 does: in cache about twice to \
                 three times the figure, which there counts store instructions more than \
                 bandwidth.",
                fwr,
            )
        },
        MEM.named(
            "wr",
            "Memory partial write",
            "Stores to every fourth 4-byte word (16-byte stride) but counts the whole \
             buffer (bw_mem wr).",
            wr,
        ),
        MEM.named(
            "rdwr",
            "Memory partial read/write",
            "Reads then overwrites every fourth 4-byte word (bw_mem rdwr).",
            rdwr,
        ),
        MEM.named(
            "bzero",
            "Memory bzero",
            "memset of the whole buffer (bw_mem bzero).",
            bzero,
        ),
        MEM.named(
            "bcopy",
            "Memory bcopy",
            "memcpy of the buffer into a second buffer of the same size; counts `size` \
             bytes per copy (bw_mem bcopy).",
            bcopy,
        ),
    ],
};

/// A page-aligned, fully touched buffer of 4-byte words (bw_mem uses valloc
/// and zeroes it, so no page fault lands in the timed passes).
struct Buffer(AlignedBuf);

impl Buffer {
    fn new(bytes: usize) -> Result<Buffer> {
        ensure!(
            bytes >= BLOCK_BYTES,
            "size must be at least {BLOCK_BYTES} bytes (one 512-byte block), got {bytes}"
        );
        let mut b = AlignedBuf::new(bytes)?;
        b.zero();
        Ok(Buffer(b))
    }

    fn bytes(&self) -> usize {
        self.0.len()
    }

    /// Start and start of the last whole block, as bw_mem's `buf`/`lastone`.
    /// The start goes through [`opaque_ptr`] once per pass: the optimiser can
    /// neither merge one pass's accesses with the next's nor keep the
    /// pointer anywhere but in a register.
    fn span(&self) -> (*mut i32, *mut i32) {
        let blocks = self.bytes() / BLOCK_BYTES;
        let start = opaque_ptr(self.0.ptr().cast::<i32>());
        // SAFETY: blocks >= 1, so the last block starts inside the allocation.
        (start, unsafe { start.add((blocks - 1) * BLOCK) })
    }
}

/// `p`, hidden from the optimiser by an empty `asm!` that may read and write
/// any memory, so the stores before it and the accesses after it stay where
/// they are. Unlike `black_box`, which hands the asm the value's *address*,
/// the value stays in a register: with `black_box` here LLVM kept the pass's
/// block pointer in that stack slot, storing and reloading it every 512-byte
/// block (`objdump -d`: `mov 0x8(%rsp),%r10; add %r8,%r10; mov %r10,0x8(%rsp)`
/// after each block's stores), an extra store and a store-forwarded load
/// that bw_mem's loops, with the pointer in a register, do not have.
#[inline(always)]
fn opaque_ptr(p: *mut i32) -> *mut i32 {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let mut p = p;
        // SAFETY: an empty asm; it only claims to read and write memory.
        unsafe { std::arch::asm!("/* {0} */", inout(reg) p, options(nostack, preserves_flags)) };
        p
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        black_box(p)
    }
}

/// `v`, hidden from the optimiser without touching memory: an empty `asm!`
/// on the register holding it. A block's sum goes through it so that LLVM
/// cannot re-associate the block's chain of adds into the running sum, and
/// stays in its register (`black_box` stored and reloaded it every block).
#[inline(always)]
fn opaque_i32(v: i32) -> i32 {
    let mut v = v;
    // SAFETY: an empty asm on one register; no memory, stack or flags.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!("/* {0:e} */", inout(reg) v, options(nomem, nostack, preserves_flags))
    };
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!("/* {0:w} */", inout(reg) v, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        v = black_box(v);
    }
    v
}

/// Times `pass` (one sweep over the buffer) and turns it into MB/s, counting
/// `bytes` per pass.
fn bandwidth(ctx: &TrialCtx, bytes: usize, mut pass: impl FnMut()) -> Result<TrialOutput> {
    let (per_pass, n) = median_time_per_op(ctx, |n| {
        ctx.timed(|| {
            for _ in 0..n {
                pass();
            }
            Ok(())
        })
    })?;
    ensure!(per_pass > 0.0, "timer did not advance over {n} passes");
    Ok(TrialOutput::new(n).with(&BW, bytes as f64 / per_pass / 1e6))
}

fn size_param(ctx: &TrialCtx) -> Result<usize> {
    let size = ctx.params.size("size")?;
    usize::try_from(size).context("size does not fit in memory")
}

/// Invokes `$m!($args; offsets)` with every word offset of a block.
macro_rules! every_word {
    ($m:ident!($($args:tt)*)) => {
        $m!($($args)*; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26
            27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53
            54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80
            81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105
            106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125
            126 127)
    };
}

/// Invokes `$m!($args; offsets)` with every word offset of a block, last
/// first: the order of bw_mem's `fwr` stores as lmbench builds it (gcc 12
/// `-O` emits its chained `p[0]=p[1]=…=p[127]=1` as 128 `movl $1` from offset
/// 0x1fc down to 0).
macro_rules! every_word_descending {
    ($m:ident!($($args:tt)*)) => {
        $m!($($args)*; 127 126 125 124 123 122 121 120 119 118 117 116 115 114 113 112 111 110
            109 108 107 106 105 104 103 102 101 100 99 98 97 96 95 94 93 92 91 90 89 88 87 86 85
            84 83 82 81 80 79 78 77 76 75 74 73 72 71 70 69 68 67 66 65 64 63 62 61 60 59 58 57
            56 55 54 53 52 51 50 49 48 47 46 45 44 43 42 41 40 39 38 37 36 35 34 33 32 31 30 29
            28 27 26 25 24 23 22 21 20 19 18 17 16 15 14 13 12 11 10 9 8 7 6 5 4 3 2 1 0)
    };
}

/// Invokes `$m!($args; offsets)` with every fourth word offset of a block
/// (bw_mem's partial accesses).
macro_rules! every_fourth_word {
    ($m:ident!($($args:tt)*)) => {
        $m!($($args)*; 0 4 8 12 16 20 24 28 32 36 40 44 48 52 56 60 64 68 72 76 80 84 88 92
            96 100 104 108 112 116 120 124)
    };
}

/// Adds the words at the offsets of block `p` into `sum`. The block is
/// summed on its own first and then added, as bw_mem's
/// `sum += p[0]+p[1]+...` is: each block is a fresh dependency chain that the
/// CPU can overlap with the next block's, which a single running sum would
/// forbid (that alone costs frd a third of its in-cache rate).
macro_rules! load {
    ($p:ident, $sum:ident; $($i:literal)*) => {{
        let mut block: i32 = 0;
        // SAFETY: callers pass a block start with BLOCK words inside the buffer.
        $(block = block.wrapping_add(unsafe { read_volatile($p.add($i)) });)*
        // opaque_i32 stops LLVM from re-associating the block back into `sum`.
        $sum = $sum.wrapping_add(opaque_i32(block));
    }};
}

/// Stores 1 to the words at the offsets of block `p`.
macro_rules! store {
    ($p:ident; $($i:literal)*) => {{
        // SAFETY: callers pass a block start with BLOCK words inside the buffer.
        $(unsafe { write_volatile($p.add($i), 1) };)*
    }};
}

/// Reads, adds into `sum` and then overwrites each word at the offsets.
macro_rules! load_store {
    ($p:ident, $sum:ident; $($i:literal)*) => {{
        // SAFETY: callers pass a block start with BLOCK words inside the buffer.
        $(unsafe {
            $sum = $sum.wrapping_add(read_volatile($p.add($i)));
            write_volatile($p.add($i), 1);
        })*
    }};
}

/// Calls `block(p)` for the start of every whole block, as bw_mem's
/// `while (p <= lastone)` loop.
#[inline(always)]
fn blocks(buf: &Buffer, mut block: impl FnMut(*mut i32)) {
    let (mut p, last) = buf.span();
    while p <= last {
        block(p);
        p = p.wrapping_add(BLOCK);
    }
}

/// Whether the `access` param asks for 16-byte vector accesses.
fn vector_access(ctx: &TrialCtx) -> Result<bool> {
    match ctx.param(&ACCESS)?.as_str() {
        "vector" => {
            ensure!(
                cfg!(target_arch = "x86_64"),
                "access=vector needs x86_64 (SSE2); accepted here: word"
            );
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// frd and fwr with 16-byte SSE2 accesses: per block, 32 aligned loads
/// added into one vector, or 32 aligned stores of ones. The intrinsics fix
/// the width whatever the compiler would choose; the opaque pointer (in
/// `span`) and black_box on the sum keep every pass's accesses.
#[cfg(target_arch = "x86_64")]
mod vector {
    use super::{blocks, Buffer, BLOCK};
    use std::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_load_si128, _mm_set1_epi32, _mm_setzero_si128, _mm_store_si128,
    };
    use std::hint::black_box;

    pub(super) fn read_pass(buf: &Buffer) {
        // SAFETY: SSE2 is part of x86_64; every block start is 512-byte
        // aligned (the buffer is page-aligned) and holds BLOCK words.
        unsafe {
            let mut acc = _mm_setzero_si128();
            blocks(buf, |p| {
                let mut block = _mm_setzero_si128();
                for i in (0..BLOCK).step_by(4) {
                    block = _mm_add_epi32(block, _mm_load_si128(p.add(i).cast::<__m128i>()));
                }
                // Hidden in its register: each block a fresh chain, as
                // the word loop's opaque_i32.
                std::arch::asm!("/* {0} */", inout(xmm_reg) block,
                    options(nomem, nostack, preserves_flags));
                acc = _mm_add_epi32(acc, block);
            });
            black_box(acc);
        }
    }

    pub(super) fn write_pass(buf: &Buffer) {
        // SAFETY: as in read_pass; the stores stay inside each block.
        unsafe {
            let ones = _mm_set1_epi32(1);
            blocks(buf, |p| {
                for i in (0..BLOCK).step_by(4) {
                    _mm_store_si128(p.add(i).cast::<__m128i>(), ones);
                }
            });
        }
    }
}

fn frd(ctx: &TrialCtx) -> Result<TrialOutput> {
    let buf = Buffer::new(size_param(ctx)?)?;
    if vector_access(ctx)? {
        #[cfg(target_arch = "x86_64")]
        return bandwidth(ctx, buf.bytes(), || vector::read_pass(&buf));
    }
    bandwidth(ctx, buf.bytes(), || {
        let mut sum: i32 = 0;
        blocks(&buf, |p| every_word!(load!(p, sum)));
        black_box(sum);
    })
}

fn rd(ctx: &TrialCtx) -> Result<TrialOutput> {
    let buf = Buffer::new(size_param(ctx)?)?;
    bandwidth(ctx, buf.bytes(), || {
        let mut sum: i32 = 0;
        blocks(&buf, |p| every_fourth_word!(load!(p, sum)));
        black_box(sum);
    })
}

fn fwr(ctx: &TrialCtx) -> Result<TrialOutput> {
    let buf = Buffer::new(size_param(ctx)?)?;
    if vector_access(ctx)? {
        #[cfg(target_arch = "x86_64")]
        return bandwidth(ctx, buf.bytes(), || vector::write_pass(&buf));
    }
    bandwidth(ctx, buf.bytes(), || word_write_pass(&buf))
}

/// fwr's word pass: 128 four-byte stores of 1 per block, from the last word
/// down to the first, as bw_mem built by lmbench's own `CFLAGS=-O` does.
fn word_write_pass(buf: &Buffer) {
    blocks(buf, |p| every_word_descending!(store!(p)))
}

fn wr(ctx: &TrialCtx) -> Result<TrialOutput> {
    let buf = Buffer::new(size_param(ctx)?)?;
    bandwidth(ctx, buf.bytes(), || {
        blocks(&buf, |p| every_fourth_word!(store!(p)))
    })
}

fn rdwr(ctx: &TrialCtx) -> Result<TrialOutput> {
    let buf = Buffer::new(size_param(ctx)?)?;
    bandwidth(ctx, buf.bytes(), || {
        let mut sum: i32 = 0;
        blocks(&buf, |p| every_fourth_word!(load_store!(p, sum)));
        black_box(sum);
    })
}

fn bzero(ctx: &TrialCtx) -> Result<TrialOutput> {
    let buf = Buffer::new(size_param(ctx)?)?;
    let bytes = buf.bytes();
    bandwidth(ctx, bytes, || {
        // SAFETY: the buffer holds `bytes` bytes; black_box makes each memset
        // a fresh store the compiler cannot merge with the previous pass.
        unsafe { std::ptr::write_bytes(black_box(buf.0.ptr()).cast::<u8>(), 0, bytes) };
    })
}

fn bcopy(ctx: &TrialCtx) -> Result<TrialOutput> {
    let size = size_param(ctx)?;
    let src = Buffer::new(size)?;
    let dst = Buffer::new(size)?;
    bandwidth(ctx, size, || {
        // SAFETY: two distinct allocations of `size` bytes each.
        unsafe {
            std::ptr::copy_nonoverlapping(
                black_box(src.0.ptr()).cast::<u8>(),
                black_box(dst.0.ptr()).cast::<u8>(),
                size,
            )
        };
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_ctx as ctx_with;

    #[test]
    fn every_workload_reports_a_plausible_bandwidth() {
        for w in FAMILY.workloads {
            let out = (w.run)(&ctx_with(&[("size", "64k")], 20)).unwrap();
            let bw = out.values[BW.name];
            assert!(
                bw.is_finite() && bw > 10.0 && bw < 1e7,
                "{}: {bw} MB/s",
                w.id()
            );
            assert!(out.iterations > 0);
        }
    }

    #[test]
    fn fixed_iterations_are_honoured() {
        let mut ctx = ctx_with(&[("size", "4k")], 20);
        ctx.iterations = Some(7);
        assert_eq!(frd(&ctx).unwrap().iterations, 7);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_access_runs_and_writes_every_word() {
        for run in [frd, fwr] {
            let out = run(&ctx_with(&[("size", "64k"), ("access", "vector")], 20)).unwrap();
            assert!(out.values[BW.name] > 10.0);
        }
        let buf = Buffer::new(8 * BLOCK_BYTES).unwrap();
        vector::write_pass(&buf);
        let (start, _) = buf.span();
        // SAFETY: the buffer holds 8 blocks of BLOCK words.
        let words = unsafe { std::slice::from_raw_parts(start, 8 * BLOCK) };
        assert!(words.iter().all(|&w| w == 1));
    }

    #[test]
    fn word_writes_store_every_word_and_frd_sums_every_word() {
        let buf = Buffer::new(4 * BLOCK_BYTES).unwrap();
        word_write_pass(&buf);
        let (start, last) = buf.span();
        // SAFETY: the buffer holds 4 blocks of BLOCK words.
        let words = unsafe { std::slice::from_raw_parts(start, 4 * BLOCK) };
        assert!(words.iter().all(|&w| w == 1));
        assert_eq!(last, start.wrapping_add(3 * BLOCK));
        // frd's block loop over the ones: every word counted once.
        let mut sum: i32 = 0;
        blocks(&buf, |p| every_word!(load!(p, sum)));
        assert_eq!(sum, (4 * BLOCK) as i32);
        let mut sum: i32 = 0;
        blocks(&buf, |p| every_fourth_word!(load!(p, sum)));
        assert_eq!(sum, BLOCK as i32, "rd reads one word in four");
    }

    #[test]
    fn opaque_values_pass_through_unchanged() {
        assert_eq!(opaque_i32(-7), -7);
        let mut x = 3i32;
        let p: *mut i32 = &mut x;
        assert_eq!(opaque_ptr(p), p);
    }

    #[test]
    fn tiny_buffers_are_refused() {
        assert!(rd(&ctx_with(&[("size", "100")], 20)).is_err());
    }

    /// Side-by-side figures for comparison with `bw_mem`:
    /// `cargo test -p kscale-workloads --release mem::tests::measure -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn measure() {
        let sizes = std::env::var("KSCALE_MEM_SIZES").unwrap_or_else(|_| "0.5m 8m 64m".into());
        let only = std::env::var("KSCALE_MEM_ONLY").unwrap_or_default();
        for w in FAMILY.workloads {
            if !only.is_empty() && !only.split_whitespace().any(|o| o == w.name) {
                continue;
            }
            for size in sizes.split_whitespace() {
                let out = (w.run)(&ctx_with(&[("size", size)], 500)).unwrap();
                println!(
                    "mem.{:<6} size={:<5} {:>10.2} MB/s",
                    w.name, size, out.values[BW.name]
                );
            }
        }
    }
}
