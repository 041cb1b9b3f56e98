//! `mem`: memory bandwidth (docs/families/mem.md, seed 003 "Memory read rate", lmbench
//! `bw_mem`).
//!
//! Each workload makes passes over a buffer of `size` bytes, 512 bytes (128
//! four-byte words) per unrolled block, and reports `size` bytes per pass as
//! MB/s with MB = 10^6 bytes (bw_mem's unit too). The word loops use volatile
//! loads and stores: that keeps the compiler from dropping repeated passes and
//! also from vectorising them, so each word costs one scalar load or store as
//! in bw_mem's C compiled with `-O` — the figures stay comparable with
//! bw_mem's on the same machine. `bzero` and `bcopy` call the C library's
//! `memset`/`memcpy`, as bw_mem does.

use crate::shared::buf::AlignedBuf;
use crate::timing::median_time_per_op;
use crate::{timed, ChartDef, Family, TrialCtx, TrialOutput, WorkloadDef};
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
    help: "word: one 4-byte load or store per word, as bw_mem's C source reads (and gcc 12 \
           -O2 compiles frd); vector: 16-byte SSE2 loads/stores, what gcc 12 -O2 makes of \
           fwr's source (x86_64 only).",
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
                "Sums every 4-byte word of the buffer into one register chain (bw_mem frd, \
                 which gcc 12 -O2 leaves as 4-byte adds). `access=vector` loads 16 bytes at a \
                 time instead: in cache three to four times the figure.",
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
                "Stores to every 4-byte word of the buffer (bw_mem fwr's C source). `access=vector` \
                 stores 16 bytes at a time, as bw_mem built with gcc 12 -O2 does: in cache about \
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
    /// Passed through black_box so every pass re-reads and re-writes memory.
    fn span(&self) -> (*mut i32, *mut i32) {
        let blocks = self.bytes() / BLOCK_BYTES;
        let start = black_box(self.0.ptr().cast::<i32>());
        // SAFETY: blocks >= 1, so the last block starts inside the allocation.
        (start, unsafe { start.add((blocks - 1) * BLOCK) })
    }
}

/// Times `pass` (one sweep over the buffer) and turns it into MB/s, counting
/// `bytes` per pass.
fn bandwidth(ctx: &TrialCtx, bytes: usize, mut pass: impl FnMut()) -> Result<TrialOutput> {
    let (per_pass, n) = median_time_per_op(ctx, |n| {
        timed(|| {
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
        // black_box stops LLVM from re-associating the block back into `sum`.
        $sum = $sum.wrapping_add(black_box(block));
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
    match ctx.params.get("access").unwrap_or("word") {
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
/// the width whatever the compiler would choose; black_box on the pointer
/// (in `span`) and on the sum keeps every pass's accesses.
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
                acc = _mm_add_epi32(acc, black_box(block));
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
    bandwidth(ctx, buf.bytes(), || {
        blocks(&buf, |p| every_word!(store!(p)))
    })
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
